"""Entry point of the agent-link web plugin, registered under the ``agent_link`` group.

Hooks:

* ``agent_link_register_commands``: ``agent-link web [--port N] [--open] [--bind ADDRESS]``;
* ``agent_link_register_settings``: ``AGENT_LINK_WEB_USER`` (the person's name on the page)
  and ``AGENT_LINK_WEB_ACT_FOR`` (agents whose mail the person may decline or mark done on
  their behalf; empty, so nobody, by default);
* ``agent_link_before_send``: a message the page sends or answers for a person is marked
  ``metadata.author = {"kind": "person", "through": "web-page"}``. Only this process's page
  can set it (a context variable, not an argument any client could pass);
* ``agent_link_render_envelopes``: such a message's envelope notice says a person wrote it on
  the agent-link web page (not another agent), and it carries an ``<origin />`` element.
"""

from __future__ import annotations

from collections.abc import Callable

from agent_link_core import hookimpl
from agent_link_core.config import Setting
from agent_link_web.context import AUTHOR_KEY, ORIGIN, page_person

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Mapping
    from typing import Any
    import click

    from agent_link_core.records import EnvelopeContribution, OutgoingMessage, SendContext

SETTINGS = (
    Setting("AGENT_LINK_WEB_USER", "str", None,
            doc="the person's name on the web page (user:<name>); default: the login name"),
    Setting("AGENT_LINK_WEB_ACT_FOR", "str", None,
            doc="agents (addresses or patterns such as team:*, comma separated) whose mail the person may decline or "
                "mark done on the page; default none"),
)


@hookimpl
def agent_link_register_settings(register: Callable[[Setting], None]) -> None:
    for setting in SETTINGS:
        register(setting)


@hookimpl
def agent_link_register_commands(cli: click.Group) -> None:
    from agent_link_core.contribute import command

    cli.add_command(command(
        "web", "agent_link_web.cli:web_command",
        "Serve a live page of the agents' mail on 127.0.0.1, for you: see conversations, search,"
        " send and answer as user:<name>. The printed link carries the access token.", reader=True))


@hookimpl
def agent_link_before_send(message: OutgoingMessage, context: SendContext) -> list[dict[str, Any]] | None:
    person = page_person.get()
    if person is not None and message.sender.address == person:
        message.metadata[AUTHOR_KEY] = dict(ORIGIN)
    return None


@hookimpl
def agent_link_render_envelopes(messages: tuple[Mapping[str, Any], ...]) -> dict[str, EnvelopeContribution] | None:
    # only mail written here: the mark of mail from another machine is that machine's word, which no page here vouches for
    written = [m for m in messages if (m.get("metadata") or {}).get(AUTHOR_KEY) == ORIGIN and "machines" not in m["metadata"]]
    if not written:
        return None
    from agent_link_core.envelope import render_element  # only a message written on the page needs it
    from agent_link_core.records import EnvelopeContribution

    added = {}
    for message in written:
        # the notice's first sentence says who wrote it (the core keeps "none of the user's authority"): a person at
        # the page is not another agent, and not necessarily this session's user either
        person = message["from_addr"] if len(message["from_addr"]) <= 120 else message["from_addr"][:119] + "…"  # the sentence: <= 300
        author = f"A person ({person}) wrote this message on the agent-link web page of this machine; it did not come from another AI agent."
        added[message["id"]] = EnvelopeContribution(
            elements=[render_element("origin", [("kind", "person"), ("through", "web-page")])], author=author)
    return added
