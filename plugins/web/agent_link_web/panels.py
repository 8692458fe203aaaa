"""Sections that plugins add to the views people read (the ``agent-link web`` page).

A plugin contributes a :class:`Panel` through this plugin's ``agent_link_register_panels`` hook (:mod:`agent_link_web.hookspecs`).
The hook stays in the core so that a plugin implementing it loads without this one; the
record types are this plugin's, which alone calls the hook (:func:`panels`) and checks each
record (:func:`check_panel`). A plugin imports them inside its hook implementation (or names a
``module:attribute`` with ``agent_link_core.contribute.registers``), never in its entry module.
 A panel
renders *data*, never markup: a table of plain values (:class:`PanelView`), optional links
to conversations (:class:`PanelLink`), buttons (:class:`PanelAction`, run by the panel's
``act`` as the person at the page) and labels shown beside agents (roles held, for
instance). The view escapes every value, so a panel cannot put script or markup on the page
whatever text it carries (a fork job's prompt, a project name, a thread title).
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_link_core.boundary import Refused

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App
    from agent_link_core.mailbox import Visibility

PANEL_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,47}\Z")
_viewer: contextvars.ContextVar[Visibility | None] = contextvars.ContextVar("agent_link_panel_viewer", default=None)


def panel_viewer() -> Visibility:
    """Who the section being drawn is for: the one read rule of the view that draws it.

    A panel that shows anything of the mail (ids, addresses, previews, receipts) shows only
    the messages this :class:`~agent_link_core.mailbox.Visibility` allows. Outside
    :func:`drawing_for` it is a reader who sees no message at all.
    """
    from agent_link_core.mailbox import Visibility

    return _viewer.get() or Visibility(None)


@contextmanager
def drawing_for(visibility: Visibility) -> Iterator[None]:
    """Draw panels for a reader: :func:`panel_viewer` returns ``visibility`` inside the block
    (a context variable, so concurrent requests of one page server each keep their own)."""
    token = _viewer.set(visibility)
    try:
        yield
    finally:
        _viewer.reset(token)


@dataclass(frozen=True)
class PanelLink:
    """A cell that links to the conversation of ``message_id`` (a ULID), showing ``text``."""

    text: str
    message_id: str


@dataclass(frozen=True)
class PanelAction:
    """A cell holding a button showing ``label``: pressing it calls the panel's ``act`` with
    ``key`` (an id the panel chose, e.g. a row's id; at most 200 characters)."""

    label: str
    key: str


Cell = str | int | float | bool | None | PanelLink | PanelAction


@dataclass
class PanelView:
    """What a panel shows now.

    :param columns: column headings.
    :param rows: one list of cells per row, as many cells as columns; a cell is plain text,
        a number, a boolean, None (shown empty) or a :class:`PanelLink`.
    :param empty: the sentence shown when there are no rows.
    :param note: one optional line under the table (a count, a setting to change...).
    :param agent_labels: ``{address: [label, ...]}`` shown beside those agents wherever
        agents are listed (e.g. the roles an agent holds).
    """

    columns: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    empty: str = "Nothing to show."
    note: str | None = None
    agent_labels: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Panel:
    """One section contributed by a plugin.

    :param name: unique id, ``[a-z][a-z0-9-]*`` of at most 48 characters (used in URLs).
    :param title: the heading people see.
    :param render: ``(app) -> PanelView`` (or an awaitable of one); called each time the
        section is drawn, so keep it to a few quick reads. Mail it shows must pass
        :func:`panel_viewer` (the reader's visibility). It runs through the plugin boundary:
        what it raises (any ``BaseException``), an answer that is no :class:`PanelView` or
        shows more than 1 MiB of text, or a render outliving 5 s is its plugin's fault,
        reported as ``panel <name>`` and shown as "this section failed" in place of the
        panel, never breaking the page.
    :param order: sections are shown by ascending order, then name.
    :param act: ``(app, key, person) -> str`` (or an awaitable of one): what a
        :class:`PanelAction` of this panel does when the person at the page (``person``, their
        address, e.g. ``user:ana``) presses it; returns one sentence saying what was done.
        It raises :class:`~agent_link_core.errors.AgentLinkError` to refuse (its message is
        shown). None: the panel has no buttons.
    """

    name: str
    title: str
    render: Callable[[App], PanelView | Awaitable[PanelView]]
    order: int = 100
    act: Callable[[App, str, str], str | Awaitable[str]] | None = None

    def __post_init__(self) -> None:
        if not PANEL_NAME_RE.match(self.name):
            raise ValueError(f"panel name {self.name!r} must match {PANEL_NAME_RE.pattern}")


def check_panel(record: Any) -> None:
    """Refuse a registered panel that is not a :class:`Panel` with a title and a callable
    ``render`` (the plugin that registered it is then left out and reported).

    :raises Refused: naming what is wrong and how to fix it.
    """
    if not isinstance(record, Panel):
        raise Refused(f"registered a {type(record).__name__}, not a Panel", "Register agent_link_web.panels.Panel records.")
    if not isinstance(record.name, str) or not PANEL_NAME_RE.match(record.name):
        raise Refused(f"registered a panel named {record.name!r}", "Panel names are a-z 0-9 -, starting with a letter, at most 48.")
    if not isinstance(record.title, str) or not record.title.strip() or not callable(record.render):
        raise Refused(f"panel {record.name!r} has no title or a render that is not callable",
                      "A panel has a title and render(app) -> PanelView.")


def panels(app: App) -> list[Panel]:
    """Every plugin's panels (``agent_link_register_panels``), by ascending ``order`` then name;
    a record :func:`check_panel` refuses, or a second panel of one name, leaves its plugin out
    (reported, naming both plugins for a clash)."""
    found = app.hooks.collect("panel", "agent_link_register_panels", check_panel).values()
    return sorted(found, key=lambda p: (p.order, p.name))
