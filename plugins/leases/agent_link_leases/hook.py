"""``agent-link hook leases PreToolUse``: the edit guard as a Claude Code ``PreToolUse`` hook.

Registered as the prompt-hook adapter named ``leases``, so the core's hook fast path runs it
without loading plugins (and never once the plugin is disabled or removed). Declare it in
Claude Code's settings (``hooks.PreToolUse``, matcher ``Edit|MultiEdit|Write|NotebookEdit``,
command ``agent-link hook leases PreToolUse``). The caller is the session the payload names
(``claude:<session_id>``); see :mod:`agent_link_leases.guard` for the decision. Standard
library and the core's fast-path modules only.
"""

from __future__ import annotations

from agent_link_core.addresses import is_address
from agent_link_core.hook import HOOK_BUSY_TIMEOUT_MS
from agent_link_core.store import Store, now_ms

from agent_link_leases.guard import check

TYPE_CHECKING = False  # keep typing out of the fast path
if TYPE_CHECKING:
    from typing import Any

    from agent_link_core.hook import HookContext

EVENT = "PreToolUse"


def handle(event: str, payload: dict[str, Any], ctx: HookContext) -> dict[str, Any] | None:
    """The hook's JSON answer: a ``deny`` (see :func:`agent_link_leases.guard.check`), or None.

    :param event: the event on the command line; only ``PreToolUse`` is answered, and a
        payload whose ``hook_event_name`` disagrees is ignored.
    :param payload: Claude Code's hook stdin (``session_id``, ``tool_name``, ``tool_input``, ``cwd``).
    :param ctx: the core's hook context (its settings: where the database is).
    """
    named = payload.get("hook_event_name")
    if event != EVENT or (named is not None and named != event):
        return None
    session_id = payload.get("session_id")
    address = "claude:" + session_id if isinstance(session_id, str) else ""
    if not is_address(address):
        return None
    wait_ms = min(HOOK_BUSY_TIMEOUT_MS, int(ctx.config.get("AGENT_LINK_BUSY_TIMEOUT_MS")))
    store = Store.open_existing(ctx.config.db_path, busy_timeout_ms=wait_ms)
    try:
        return check(payload, address, store, now_ms())
    finally:
        if store is not None:
            store.close()
