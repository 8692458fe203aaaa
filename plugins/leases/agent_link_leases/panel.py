"""The File leases section of the ``agent-link web`` page: every active lease (who holds
what, exclusive or shared, why, until when), each with a Release button for a person to end
a stale one (a holder that stopped without releasing).

Ending another holder's lease follows the CLI's rule (``agent-link release --holder`` needs
``AGENT_LINK_LEASE_ADMIN=1``): the buttons are shown, and work, only when ``agent-link web``
runs with that setting on: one rule, whichever way a lease is ended, and the person turns the
power on deliberately for the process that has it. Without the setting the section lists the leases and
says how to turn the buttons on; a button posted anyway is refused (``permission_denied``,
reason ``lease_admin_disabled``) unless the lease is the page's person's own. A button runs
as the page's person (``user:<name>``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_link_core.errors import AgentLinkError
from agent_link_web.panels import Cell, Panel, PanelAction, PanelView
from agent_link_core.store import now_ms

from agent_link_leases.table import ADMIN_SETTING, active, release_by_id

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App

MAX_ROWS = 200
ADMIN_NOTE = (f"Release buttons are off: ending another holder's lease needs {ADMIN_SETTING}=1 in the environment of "
              "agent-link web, as agent-link release --holder does.")


def render(app: App) -> PanelView:
    """The active leases, oldest first (at most :data:`MAX_ROWS`); a Release button on each
    when ``AGENT_LINK_LEASE_ADMIN`` is on."""
    admin = bool(app.config.get(ADMIN_SETTING))
    leases = active(app.store, now_ms())
    rows: list[list[Cell]] = [
        [x["path"], x["projectRoot"], x["holder"], "exclusive" if x["exclusive"] else "shared", x["reason"], x["expiresAt"],
         PanelAction("Release", str(x["id"])) if admin else None]
        for x in leases[:MAX_ROWS]]
    notes = [f"{len(leases)} active leases; the oldest {MAX_ROWS} are shown."] if len(leases) > MAX_ROWS else []
    if leases and not admin:
        notes.append(ADMIN_NOTE)
    return PanelView(columns=["Path", "Project", "Holder", "Kind", "Reason", "Until", ""], rows=rows,
                     empty="No file is leased.", note=" ".join(notes) or None)


def act(app: App, key: str, person: str) -> str:
    """Release the lease whose id is ``key``, as ``person`` (the page's ``user:<name>``).

    :raises AgentLinkError: ``invalid_arguments`` for a key that is no id; ``permission_denied``
        (reason ``lease_admin_disabled``) for another holder's lease while
        ``AGENT_LINK_LEASE_ADMIN`` is off; ``not_found`` when the lease has ended already.
    """
    if not key.isdigit():
        raise AgentLinkError("invalid_arguments", f"{key!r} is not a lease id.",
                             {"errors": [{"path": "key", "rule": "integer", "expected": "a lease id"}]})
    if not app.config.get(ADMIN_SETTING):
        row = app.store.conn.execute("SELECT holder FROM leases WHERE id = ? AND expires_at > ?", (int(key), now_ms())).fetchone()
        if row is not None and row["holder"] != person:
            raise AgentLinkError("permission_denied", f"Releasing {row['holder']}'s lease is turned off: {ADMIN_NOTE}",
                                 {"reason": "lease_admin_disabled"})
    gone = release_by_id(app.store, int(key), now_ms())
    if gone is None:
        raise AgentLinkError("not_found", "That lease has ended already (released or expired).", {"id": int(key)})
    return f"{person} released {gone['holder']}'s lease of {gone['path']} (under {gone['projectRoot']})."


PANELS = (Panel("leases", "File leases", render, order=60, act=act),)
