"""The ``wait_for_agent`` MCP tool (arguments as the original Agent Link's: docs/behaviour.md §5) and ``message_agent``'s
``waitForReply`` (:data:`MESSAGE_AGENT_WAIT`, :func:`send_and_wait`)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from agent_link_core.mailbox import new_message_id
from agent_link_core.tools.core_tools import idempotency_key
from agent_link_core.tools.registry import ToolCall, ToolSpec
from agent_link_core.tools.schemas import AGENT_QUERY, BOOL, INT, NSTR, OBJ, POLL_MS, STR, TIMEOUT_MS, ULID, closed_object

from agent_link_waits.waits import MAX_WAIT_PER_CALL_MS, waits_of

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App


async def wait_for_agent(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """The ``wait_for_agent`` tool's handler: :meth:`~agent_link_waits.waits.Waits.wait` with the call's arguments.

    Without ``replyToMessageId`` the target's own end of activity (its work being over, a session stopping) ends the wait
    too, when its harness has the optional method ``activity_check(session_id)``: it returns None (wait for messages only)
    or an ``async () -> dict | None`` called every poll, answering ``{"outcome": "turn_completed"|"idle", ...}`` once the
    session's activity ends the wait (the extra fields declared in the harness's ``wait_result_fields``, name → JSON
    schema), None to keep waiting; it may raise AgentLinkError."""
    activity = None
    if not args.get("replyToMessageId"):
        recipient, _, _ = await app.target_address(args["agent"], call.caller, allow_archived=True)
        check = getattr(app.harnesses.get(recipient.split(":", 1)[0]), "activity_check", None)
        activity = check(recipient.split(":", 1)[1]) if check is not None else None
    return await waits_of(app).wait(
        caller=call.caller, agent=args["agent"], reply_to=args.get("replyToMessageId"),
        timeout_ms=args.get("timeoutMs", 60000), poll_ms=args.get("pollIntervalMs", 1000), progress=call.progress,
        activity=activity,
    )


WAIT_FOR_AGENT = ToolSpec(
    name="wait_for_agent",
    title="Wait for an agent",
    description="Wait for the answer to a message you sent (replyToMessageId), or for a message from an agent (its oldest unread one first, else the next to arrive); without replyToMessageId the agent's own end of activity also ends the wait (outcome turn_completed when the work it was doing is over, idle when it does nothing). The recipient merely finishing its work is never taken as an answer. A timeout is a normal result: call again to keep waiting. Without a progress token one call returns within 50 s (capped: true).",
    input_schema=closed_object({"agent": AGENT_QUERY, "replyToMessageId": ULID,
                                "timeoutMs": TIMEOUT_MS, "pollIntervalMs": POLL_MS}, ("agent",)),
    output_fields={"outcome": {"type": "string", "enum": ["reply", "declined", "done", "unresolved", "expired", "turn_completed", "idle", "timeout"]},
                   "harness": STR, "messageStatus": NSTR, "waitedMs": INT, "target": OBJ, "reply": OBJ, "resolution": OBJ,
                   "timedOut": BOOL, "arrivedBeforeWait": BOOL, "capped": BOOL, "requestedTimeoutMs": INT},
    handler=wait_for_agent, read_only=True,
)


def tools(app: App | None) -> list[ToolSpec]:
    """``wait_for_agent``, with the result fields the App's harnesses declare for it (``wait_result_fields``) first, the
    first harness (by name) declaring a name defining it."""
    fields: dict[str, Any] = {}
    for _, harness in sorted((app.harnesses if app is not None else {}).items()):
        for name, schema in getattr(harness, "wait_result_fields", {}).items():
            fields.setdefault(name, schema)
    return [replace(WAIT_FOR_AGENT, output_fields={**fields, **WAIT_FOR_AGENT.output_fields}) if fields else WAIT_FOR_AGENT]


#: what this plugin adds to the core's ``message_agent`` (``agent_link_extend_tools``)
MESSAGE_AGENT_WAIT: dict[str, Any] = {
    "input": {"waitForReply": {"type": "boolean", "default": False, "description": "Wait for the recipient's resolution (implies anticipation reply)."},
              "timeoutMs": TIMEOUT_MS, "pollIntervalMs": POLL_MS},
    "output": {"wait": OBJ},
    "description": " waitForReply waits for it.",
}
# pushes of waitForReply sends that outlasted their call (kept referenced until they end)
_PUSHING: set[asyncio.Future[Any]] = set()


async def send_and_wait(app: App, args: dict[str, Any], recipient: str, send: Callable[..., asyncio.Future[dict[str, Any]]],
                        call: ToolCall) -> dict[str, Any]:
    """``message_agent`` with ``waitForReply`` (``agent_link_tool_send``): the send, then the wait for its answer, the
    whole call within :data:`~agent_link_waits.waits.MAX_WAIT_PER_CALL_MS` unless the client sent a progress token."""
    started = time.monotonic()
    # the answer of a push that outlasts the call names it; agent_link_before_send notes the wait under it before the
    # question is stored, so a quicker reply is held for the wait, never also pushed
    message_id = idempotency_key(args)[0] or new_message_id()
    task = send(message_id, wait_for_reply=True)
    # a push that outlasts the bound goes on in the background and the answer returns now, with the message id to wait on
    left_s = max(MAX_WAIT_PER_CALL_MS - (time.monotonic() - started) * 1000, 0) / 1000
    done, _ = await asyncio.wait({task}, timeout=left_s)
    if not done:
        _PUSHING.add(task)
        task.add_done_callback(_push_finished)
        spent_ms = int((time.monotonic() - started) * 1000)
        call.warnings.append({
            "code": "push_still_running",
            "message": f"Pushing took longer than the {MAX_WAIT_PER_CALL_MS} ms this call may take; it goes on. "
                       f"Call wait_for_agent with replyToMessageId {message_id} for the answer.",
            "details": {"messageId": message_id, "sendMs": spent_ms},
        })
        return {"messageId": message_id, "to": recipient, "harness": recipient.split(":", 1)[0], "delivery": "queued",
                "deliveryState": "pushing", "anticipation": "reply",
                "wait": {"outcome": "timeout", "timedOut": True, "waitedMs": 0, "sendMs": spent_ms}}
    result = task.result()
    # what storing and pushing took (a slow host can take most of it) comes off the wait, so no client cuts the call
    # before the model learns the message id
    spent_ms = int((time.monotonic() - started) * 1000)
    requested = args.get("timeoutMs", 60000)
    left = max(MAX_WAIT_PER_CALL_MS - spent_ms, 0)
    waited = await app.hooks.acall(
        "agent_link_wait_for_reply", caller=call.caller, message_id=result["messageId"],
        timeout_ms=requested if call.progress is not None else min(requested, left), poll_ms=args.get("pollIntervalMs", 1000),
        progress=call.progress, mark=True)
    if not isinstance(waited, dict):  # the wait failed (reported; [] when its hookspec could not load): the message stands
        call.warnings.append({"code": "plugin_failed", "details": {"hook": "agent_link_wait_for_reply"},
                              "message": f"The message was sent but waiting for its answer failed; call wait_for_agent with "
                                         f"replyToMessageId {result['messageId']}, or read your inbox later."})
        return result
    result["wait"] = {**waited, "sendMs": spent_ms}
    if call.progress is None and requested > left:  # the wait got only what the send left of one call
        call.warnings.append({
            "code": "wait_shortened",
            "message": f"Sending took {spent_ms} ms, so the wait got {left} ms of the {MAX_WAIT_PER_CALL_MS} ms one call "
                       f"may take; call wait_for_agent with replyToMessageId {result['messageId']} to keep waiting.",
            "details": {"messageId": result["messageId"], "requestedTimeoutMs": requested, "sendMs": spent_ms,
                        "waitedAtMostMs": left},
        })
    call.warnings.extend(result["wait"].pop("warnings", []))
    return result


def _push_finished(task: asyncio.Future[Any]) -> None:
    _PUSHING.discard(task)
    if not task.cancelled() and task.exception() is not None:
        logging.getLogger(__name__).error("a send that outlasted its call failed: %r", task.exception())
