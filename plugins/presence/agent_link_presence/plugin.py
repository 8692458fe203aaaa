"""Entry point of the agent-link presence plugin, registered under the ``agent_link`` group.

Hooks: the ``presence`` table (schema); the record of an ``agent-link mcp`` serving its configured address
(``agent_link_server_tasks``, called as the server starts; the start-up record before that is
:mod:`agent_link_presence.startup`'s) and of an inbox read (``agent_link_inbox_read``); the ``unknown_address`` warning
and ``requireKnown``'s refusal for a never-served address (``agent_link_check_recipient``); the live plain addresses
as sessions (``agent_link_present_sessions``); and the addresses a bare id that found nothing is pointed to
(``agent_link_suggest_addresses``).
"""

from __future__ import annotations

import os

from agent_link_core import hookimpl
from agent_link_core.errors import AgentLinkError
from agent_link_core.lazy import LazyLogger

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

    from agent_link_core.app import App
    from agent_link_core.model import Session
    from agent_link_core.store import Migration

log = LazyLogger(__name__)  # logging imported when it logs: off the CLI's send and inbox path


@hookimpl
def agent_link_schema() -> list[Migration]:
    """The ``presence`` table (:data:`agent_link_presence.table.MIGRATIONS`)."""
    from agent_link_presence.table import MIGRATIONS

    return list(MIGRATIONS)


@hookimpl
def agent_link_server_tasks(app: App) -> None:
    """Record the server's configured plain address as served by this process (peers find it while it runs), or take
    back the start-up record when the server serves a harness's session instead. Done here, as the server starts and
    before it answers its client; no background task."""
    from agent_link_presence import startup, table

    me = app.caller()
    try:
        if app.read_only is not None:  # the core says once why it serves reads only
            return
        if me.source == "config":
            table.record(app.store, me.address, "mcp", os.getpid())
        else:  # the start-up record of the configured address was not this process's identity
            startup.undo_start_record(app.store)
    except AgentLinkError as exc:  # busy, damaged or replaced: reads still work, so the server serves them
        log.warning("agent-link: presence of %s not recorded: %s", me.address, exc.message)


@hookimpl
def agent_link_inbox_read(address: str, app: App) -> None:
    """Record ``address`` as served by an inbox read (it counts as live for :data:`agent_link_presence.RECENT_MS`)."""
    from agent_link_presence import table

    try:
        table.record(app.store, address, "inbox")
    except AgentLinkError:
        pass  # busy: the read's marking reports it; presence is a hint


@hookimpl
def agent_link_check_recipient(address: str, require_known: bool, app: App) -> dict[str, Any]:
    """Known when some process ever served ``address``; else the ``unknown_address`` warning with the closest reachable
    addresses, or with ``require_known`` a ``not_found`` refusal naming them."""
    from agent_link_presence import table

    if table.seen(app.store, address):
        return {"known": True}
    warning = table.unseen_warning(app.store, address, set(app.harnesses))
    if require_known:
        close = warning["details"]["suggestions"]
        raise AgentLinkError(
            "not_found", f"No process has ever served {address}, and requireKnown refuses unknown addresses.",
            {"query": address, "candidates": [{"address": a} for a in close]},
            hint=(f"Did you mean {' or '.join(close)}? " if close else "")
            + "Check the address, or send without requireKnown to leave the message for whoever reads it later.",
        )
    return {"known": False, "warning": warning}


@hookimpl
def agent_link_present_sessions(harness: str, app: App) -> list[Session]:
    """The live plain addresses (:func:`agent_link_presence.table.live_sessions`) of ``harness`` ("all": every scheme)."""
    from agent_link_presence import table

    return table.live_sessions(app.store, skip_schemes=set(app.harnesses), only=harness)


@hookimpl
def agent_link_suggest_addresses(query: str, app: App) -> list[str]:
    """The reachable addresses closest to ``query`` (:func:`agent_link_presence.table.suggestions`)."""
    from agent_link_presence import table

    return table.suggestions(app.store, query, harnesses=app.harnesses)
