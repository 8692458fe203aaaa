"""``agent-link hook leases PreToolUse`` and ``agent-link hook leases CodexPreToolUse``: the
edit guard as a Claude Code and a Codex ``PreToolUse`` hook.

Registered as the prompt-hook adapter named ``leases``, so the core's hook fast path runs it
without loading plugins (and never once the plugin is disabled or removed). The Claude Code
plugin declares the first (``hooks/hooks.json``, matcher ``Edit|MultiEdit|Write|NotebookEdit``),
the Codex plugin the second (``hooks/codex-hooks.json``, matcher ``apply_patch|Bash``). Both
hosts send the same payload shape (``hook_event_name`` ``PreToolUse``); the command line's
event names the host, so the caller is ``claude:<session_id>`` or ``codex:<session_id>`` (a
Codex hook's ``session_id`` is the thread id). See :mod:`agent_link_leases.guard` for the
decision. Standard library and the core's fast-path modules only.
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

#: the event on the command line -> the harness whose session the payload's ``session_id`` names
EVENTS = {"PreToolUse": "claude", "CodexPreToolUse": "codex"}
PAYLOAD_EVENT = "PreToolUse"


def handle(event: str, payload: dict[str, Any], ctx: HookContext) -> dict[str, Any] | None:
    """The hook's JSON answer: a ``deny`` (see :func:`agent_link_leases.guard.check`), or None.

    :param event: the event on the command line (a key of :data:`EVENTS`; others are ignored),
        and a payload whose ``hook_event_name`` is not ``PreToolUse`` is ignored.
    :param payload: the host's hook stdin (``session_id``, ``tool_name``, ``tool_input``, ``cwd``).
    :param ctx: the core's hook context (its settings: where the database is).
    """
    named = payload.get("hook_event_name")
    harness = EVENTS.get(event)
    if harness is None or (named is not None and named != PAYLOAD_EVENT):
        return None
    session_id = payload.get("session_id")
    address = f"{harness}:{session_id}" if isinstance(session_id, str) else ""
    if not is_address(address):
        return None
    wait_ms = min(HOOK_BUSY_TIMEOUT_MS, int(ctx.config.get("AGENT_LINK_BUSY_TIMEOUT_MS")))
    store = Store.open_existing(ctx.config.db_path, busy_timeout_ms=wait_ms)
    try:
        return check(payload, address, store, now_ms())
    finally:
        if store is not None:
            store.close()
