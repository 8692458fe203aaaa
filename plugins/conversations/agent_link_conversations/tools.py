"""The conversations plugin's MCP tool: ``get_agent_link_conversation``, a message's whole
conversation as the caller may see it (:func:`agent_link_conversations.conversation.conversation_of`).
Imports only the core's registry and schemas: the conversation code loads at the first call."""

from __future__ import annotations

from agent_link_core.contribute import lazy_handler
from agent_link_core.tools.registry import ToolSpec
from agent_link_core.tools.schemas import BOOL, INT, OBJ, STR, ULID, closed_object

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
)
