"""MCP tools for finding mail: full-text search and conversations.

Both read only what the caller sent or received (every message with
``AGENT_LINK_INSPECT_ALL``), through :meth:`agent_link_core.mailbox.Mailbox.visible_to`.
Search results carry a short escaped snippet; a body reaches a model only inside its
``<agent-link-message>`` envelope (the conversation tool).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_link_core.search import STATUSES
from agent_link_core.tools.core_tools import ANY, STR, ULID
from agent_link_core.tools.registry import ToolCall, ToolSpec

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App

ADDRESS_FILTER = {"type": "string", "minLength": 1, "maxLength": 200}
ISO_TIME = {"type": "string", "minLength": 1, "description": "ISO 8601 with a timezone."}


async def search_messages(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Handler of ``search_agent_link_messages``: validated arguments in, success fields out (AgentLinkError to fail)."""
    return app.search(
        call.caller, args["query"], from_address=args.get("from"), to_address=args.get("to"), since=args.get("since"),
        until=args.get("until"), status=args.get("status"), limit=args.get("limit", 20), cursor=args.get("cursor"),
    )


async def get_conversation(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Handler of ``get_agent_link_conversation``: validated arguments in, success fields out (AgentLinkError to fail)."""
    return app.conversation(call.caller, args["messageId"])


SEARCH_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="search_agent_link_messages",
        title="Search agent-link messages",
        description=(
            "Full-text search over agent-link messages you sent or received: bodies, addresses and the titles of the "
            "sessions involved. Query: words (all must match), \"exact phrases\", OR, NOT, parentheses, prefix*. "
            "Newest first; results give ids, addresses, times, status and a short escaped snippet (hits in <hit>...</hit>). "
            "Read a whole message with get_agent_link_conversation."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": 1000},
                "from": {**ADDRESS_FILTER, "description": "Only messages sent by this address."},
                "to": {**ADDRESS_FILTER, "description": "Only messages addressed or handed to this address."},
                "since": {**ISO_TIME, "description": "Only messages sent at or after this time (ISO 8601 with a timezone)."},
                "until": {**ISO_TIME, "description": "Only messages sent before this time (ISO 8601 with a timezone)."},
                "status": {"type": "string", "enum": list(STATUSES)},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
                "cursor": {"type": "string", "minLength": 1, "maxLength": 40, "description": "nextCursor of the previous page."},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        output_fields={"query": STR, "scope": {"type": "string", "enum": ["caller", "all"]}, "callerAddress": ANY,
                       "results": {"type": "array", "items": {"type": "object"}}, "nextCursor": {"type": ["string", "null"]}},
        handler=search_messages, read_only=True, idempotent=True,
    ),
    ToolSpec(
        name="get_agent_link_conversation",
        title="agent-link conversation",
        description=(
            "The whole conversation a message belongs to: what it answers, its replies and their follow-ups, oldest "
            "first, each with status, delivery and resolution, bodies inside <agent-link-message> envelopes (written "
            "by agents, not the user). Only messages you sent or received are shown; hiddenCount says how many are not."
        ),
        input_schema={"type": "object", "properties": {"messageId": ULID}, "required": ["messageId"],
                      "additionalProperties": False},
        output_fields={"messageId": STR, "rootId": STR, "messages": {"type": "array", "items": {"type": "object"}},
                       "hiddenCount": {"type": "integer"}, "truncated": {"type": "boolean"}},
        handler=get_conversation, read_only=True, idempotent=True,
    ),
)
