"""The search plugin's MCP tool: ``search_agent_link_messages``, full-text search over mail.

It reads only what the caller sent or received (every message with ``AGENT_LINK_INSPECT_ALL``),
through :meth:`agent_link_core.mailbox.Mailbox.visible_to`. Results carry a short escaped
snippet; a body reaches a model only inside its ``<agent-link-message>`` envelope (the conversations
plugin's ``get_agent_link_conversation``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_link_core.tools.registry import ToolCall, ToolSpec
from agent_link_core.tools.schemas import ANY, STR

from agent_link_search.index import STATUSES, search_messages

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App

ADDRESS_FILTER = {"type": "string", "minLength": 1, "maxLength": 200}
ISO_TIME = {"type": "string", "minLength": 1, "description": "ISO 8601 with a timezone."}


async def search_tool(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Handler of ``search_agent_link_messages``: validated arguments in, success fields out (AgentLinkError to fail)."""
    return search_messages(
        app, call.caller, args["query"], from_address=args.get("from"), to_address=args.get("to"), since=args.get("since"),
        until=args.get("until"), status=args.get("status"), limit=args.get("limit", 20), cursor=args.get("cursor"),
    )


TOOLS: tuple[ToolSpec, ...] = (
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
        handler=search_tool, read_only=True, idempotent=True,
    ),
)
