"""The File leases section of the ``agent-link web`` page: every active lease (who holds
what, exclusive or shared, why, until when), each with a Release button for a person to end
a stale one (a holder that stopped without releasing).

The button runs as the page's person (``user:<name>``); the release is the same as
``agent-link release --holder`` (which a terminal needs ``AGENT_LINK_LEASE_ADMIN`` for: the
page is the person's own, behind its token and CSRF checks).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_link_core.errors import AgentLinkError
from agent_link_web.panels import Cell, Panel, PanelAction, PanelView
from agent_link_core.store import now_ms

from agent_link_leases.table import active, release_by_id

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App

MAX_ROWS = 200


def render(app: App) -> PanelView:
    """The active leases, oldest first (at most :data:`MAX_ROWS`)."""
    leases = active(app.store, now_ms())
    rows: list[list[Cell]] = [
        [x["path"], x["projectRoot"], x["holder"], "exclusive" if x["exclusive"] else "shared", x["reason"], x["expiresAt"],
         PanelAction("Release", str(x["id"]))]
        for x in leases[:MAX_ROWS]]
    note = f"{len(leases)} active leases; the oldest {MAX_ROWS} are shown." if len(leases) > MAX_ROWS else None
    return PanelView(columns=["Path", "Project", "Holder", "Kind", "Reason", "Until", ""], rows=rows,
                     empty="No file is leased.", note=note)


def act(app: App, key: str, person: str) -> str:
    """Release the lease whose id is ``key``.

    :raises AgentLinkError: ``invalid_arguments`` for a key that is no id; ``not_found`` when
        the lease has ended already.
    """
    if not key.isdigit():
        raise AgentLinkError("invalid_arguments", f"{key!r} is not a lease id.",
                             {"errors": [{"path": "key", "rule": "integer", "expected": "a lease id"}]})
    gone = release_by_id(app.store, int(key), now_ms())
    if gone is None:
        raise AgentLinkError("not_found", "That lease has ended already (released or expired).", {"id": int(key)})
    return f"{person} released {gone['holder']}'s lease of {gone['path']} (under {gone['projectRoot']})."


PANELS = (Panel("leases", "File leases", render, order=60, act=act),)
