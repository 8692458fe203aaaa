"""Claude Code hooks: ``agent-link hook claude <Event>`` (declared in ``hooks/hooks.json``).

Loaded by the core's hook fast path (:mod:`agent_link_core.hook`), so it imports nothing but
the core's address helpers: every prompt pays for this module.

What each event prints (output shapes verified on Claude Code 2.1.197, docs/hosts/claude-code.md §6):

* ``SessionStart`` -- ``{"hookSpecificOutput": {"hookEventName": "SessionStart",
  "additionalContext": <pending note>}}`` when undelivered mail waits;
* ``UserPromptSubmit`` -- the same shape with the pending note and, after it, the reminder for
  delivered reply/action mail whose reminder is due (each reminder number is claimed once);
* ``Stop`` -- ``{"decision": "block", "reason": <reminder>}`` when a reminder is due and this
  session was not blocked within the reminder interval. When ``stop_hook_active`` is true the
  session is already continuing because of a block; :func:`agent_link_claude.stop.block_reason`
  never blocks then, so a stop can never loop.

Nothing is printed when nothing is due (Claude Code adds plain stdout of SessionStart and
UserPromptSubmit hooks to the model's context, so silence is the only neutral answer). Notes
never carry a body and never mark anything delivered. The session comes from the payload's
``session_id`` (the id after ``/clear``, unlike a long-running server's environment).
"""

from __future__ import annotations

from agent_link_core.addresses import is_address

TYPE_CHECKING = False  # keep typing out of the fast path
if TYPE_CHECKING:
    from typing import Any

    from agent_link_core.hook import HookContext

NOTE_EVENTS = ("SessionStart", "UserPromptSubmit")
VIA_PROMPT = "claude-prompt-hook"
VIA_STOP = "claude-stop-hook"


def session_address(payload: dict[str, Any]) -> str | None:
    """``claude:<session_id>`` from the hook's stdin, or None when absent or not a valid id."""
    session_id = payload.get("session_id")
    if not isinstance(session_id, str):
        return None
    address = "claude:" + session_id
    return address if is_address(address) else None


def handle(event: str, payload: dict[str, Any], ctx: HookContext) -> dict[str, Any] | None:
    """The hook's JSON answer for ``event``, or None to print nothing.

    :param event: the event named on the command line (``SessionStart``, ``UserPromptSubmit``,
        ``Stop``); a payload whose ``hook_event_name`` disagrees is ignored.
    :param payload: the hook's stdin object (``session_id``, ``hook_event_name``,
        ``stop_hook_active`` ...).
    :param ctx: the core's mailbox access.
    """
    named = payload.get("hook_event_name")
    if named is not None and named != event:
        return None
    address = session_address(payload)
    if address is None:
        return None
    if event in NOTE_EVENTS:
        notes = [ctx.pending_note(address)]
        if event == "UserPromptSubmit":
            notes.append(ctx.due_reminder_note(address, VIA_PROMPT))
        text = "\n".join(n for n in notes if n)
        if not text:
            return None
        return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}
    if event == "Stop":
        from agent_link_claude.stop import block_reason  # never blocks while stop_hook_active is true: no loop

        reason = block_reason(ctx, address, VIA_STOP, payload.get("stop_hook_active") is True)
        return {"decision": "block", "reason": reason} if reason else None
    return None
