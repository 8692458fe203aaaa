"""The Codex ``UserPromptSubmit`` hook adapter, run by ``agent-link hook codex UserPromptSubmit``.

Codex (0.169.0) gives the hook ``{"session_id": <thread id>, "turn_id", "transcript_path",
"cwd", "hook_event_name": "UserPromptSubmit", "model", "permission_mode", "prompt"}`` on stdin
and hands ``hookSpecificOutput.additionalContext`` to the model as a developer message right
after the user's (docs/hosts/codex.md §10). This adapter answers with the
pending-mail note and the reminders now due for ``codex:<session_id>``: never a message body,
nothing at all when nothing is waiting or due. It never marks mail delivered and never talks
to an app-server. The core's runner makes it fail open (any error: no output, exit 0).

Only ``re`` is imported (annotations stay strings): it runs on every prompt.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # the typing module is not imported on this path
if TYPE_CHECKING:  # pragma: no cover - typing only
    from agent_link_core.hook import HookContext

EVENT = "UserPromptSubmit"
VIA = "codex-prompt-hook"
# A Codex thread id as an address part; no ":" (it would change the address).
THREAD_ID_RE = re.compile(r"[A-Za-z0-9_.-]{1,128}")


def handle(event: str, payload: dict, ctx: HookContext) -> dict | None:
    """Compute the hook output for one Codex hook event.

    :param event: the event name given on the command line (only ``UserPromptSubmit`` acts;
        a payload whose ``hook_event_name`` names another event is ignored).
    :param payload: Codex's hook JSON.
    :param ctx: an :class:`agent_link_core.hook.HookContext`.
    :returns: ``{"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
        "additionalContext": <notes>}}``, or None when there is nothing to say.
    """
    if event != EVENT or payload.get("hook_event_name", EVENT) != EVENT:
        return None
    thread_id = payload.get("session_id")
    if not isinstance(thread_id, str) or not THREAD_ID_RE.fullmatch(thread_id):
        return None
    address = f"codex:{thread_id}"
    notes = [ctx.pending_note(address), ctx.due_reminder_note(address, VIA)]
    text = "\n\n".join(n for n in notes if n)
    if not text:
        return None
    return {"hookSpecificOutput": {"hookEventName": EVENT, "additionalContext": text}}
