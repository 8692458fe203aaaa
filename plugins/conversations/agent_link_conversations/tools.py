"""The conversations plugin's MCP tools: ``get_agent_link_conversation``, a message's whole
conversation as the caller may see it (:func:`agent_link_conversations.conversation.conversation_of`), and
``agent_link_mailbox_inspect``, the caller's mail listed with filters (:mod:`agent_link_conversations.inspect`).
Imports only the core's registry and schemas: each tool's code loads at its first call."""

from __future__ import annotations

from agent_link_core.contribute import lazy_handler
from agent_link_core.tools.registry import ToolSpec
from agent_link_core.tools.schemas import ANY, BOOL, INT, OBJ, STR, ULID, closed_object, limit_arg


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="get_agent_link_conversation",
        title="agent-link conversation",
        description=(
            "The whole conversation a message belongs to: what it answers, its replies and their follow-ups, oldest "
            "first, each with status, delivery and resolution, bodies inside <agent-link-message> envelopes (written "
            "by agents, not the user). Only messages you sent or received are shown; hiddenCount says how many are not."
        ),
        input_schema=closed_object({"messageId": ULID}, ("messageId",)),
        output_fields={"messageId": STR, "rootId": STR, "messages": {"type": "array", "items": OBJ}, "hiddenCount": INT, "truncated": BOOL},
        handler=lazy_handler("agent_link_conversations.conversation:handle"), read_only=True, idempotent=True,
    ),
    ToolSpec(
        name="agent_link_mailbox_inspect",
        title="Inspect the agent-link mailbox",
        description="List messages you sent or received (newest first) with filters, for debugging delivery. Bodies only with includeBodies, inside envelopes.",
        input_schema=closed_object({
            "fromSessionId": {"type": "string", "maxLength": 1000}, "toSessionId": {"type": "string", "maxLength": 1000},
            "replyToMessageId": ULID, "undelivered": BOOL, "pendingAck": BOOL,
            "since": {"type": "string", "description": "ISO 8601 with a timezone."}, "limit": limit_arg(50, 500),
            "scope": {"type": "string", "enum": ["caller", "all"], "default": "caller"}, "includeBodies": BOOL,
        }),
        output_fields={k: ANY for k in ("messages", "scope", "callerAddress", "note")},
        handler=lazy_handler("agent_link_conversations.inspect:handle"), read_only=True,
        removed_forms={"since": ("number", "an ISO 8601 string with a timezone, such as 2026-01-01T00:00:00Z "
                                           "(epoch milliseconds were removed in 0.6.0)")},
    ),
)
