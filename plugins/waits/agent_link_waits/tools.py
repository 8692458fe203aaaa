"""The ``wait_for_agent`` MCP tool (arguments as the original Agent Link's: docs/behaviour.md §5)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from agent_link_core.tools.core_tools import POLL_MS, TIMEOUT_MS, harness_declared
from agent_link_core.tools.registry import ToolCall, ToolSpec
from agent_link_core.tools.schemas import AGENT_QUERY, BOOL, INT, NSTR, OBJ, STR, ULID, closed_object

from agent_link_waits.waits import waits_of

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
    """``wait_for_agent``, with the result fields the App's harnesses declare for it (``wait_result_fields``) first."""
    fields = harness_declared(app, "wait_result_fields")
    return [replace(WAIT_FOR_AGENT, output_fields={**fields, **WAIT_FOR_AGENT.output_fields}) if fields else WAIT_FOR_AGENT]
