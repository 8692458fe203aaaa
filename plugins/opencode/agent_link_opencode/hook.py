"""The opencode mail-note adapter, run by ``agent-link hook opencode MessagesTransform``.

agent-link's opencode plugin (``host_plugin/agent-link.js``) runs it from opencode's
``experimental.chat.messages.transform`` plugin hook at the first model request of each turn
(the last message being the user's), with ``{"session_id": <opencode session id>}`` on stdin,
and adds the answer's ``note`` to that user message for that request only. The note is the
pending-mail note and the reminders now due for ``opencode:<session id>``
(:class:`agent_link_core.hook.HookContext`, as the Claude Code and Codex prompt hooks give
theirs): never a message body, nothing at all when nothing is waiting or due. It never marks
mail delivered. The core's runner makes it fail open (any error: no output, exit 0).

Only ``re`` is imported (annotations stay strings): it runs on every prompt.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # the typing module is not imported on this path
if TYPE_CHECKING:  # pragma: no cover - typing only
    from agent_link_core.hook import HookContext

EVENT = "MessagesTransform"
VIA = "opencode-plugin"
#: an opencode session id (``ses_`` and base62 in 1.18.33) as an address part; no ":"
SESSION_ID_RE = re.compile(r"[A-Za-z0-9_.-]{1,128}")


def handle(event: str, payload: dict, ctx: HookContext) -> dict | None:
    """The note for one opencode model request.

    :param event: the event on the command line (only ``MessagesTransform`` acts).
    :param payload: ``{"session_id": str}`` from agent-link's opencode plugin.
    :param ctx: an :class:`agent_link_core.hook.HookContext`.
    :returns: ``{"note": text}``, or None when nothing is waiting or due (or the payload names
        no session).
    """
    if event != EVENT:
        return None
    session_id = payload.get("session_id")
    if not isinstance(session_id, str) or not SESSION_ID_RE.fullmatch(session_id):
        return None
    address = f"opencode:{session_id}"
    notes = [ctx.pending_note(address), ctx.due_reminder_note(address, VIA)]
    text = "\n\n".join(n for n in notes if n)
    return {"note": text} if text else None
