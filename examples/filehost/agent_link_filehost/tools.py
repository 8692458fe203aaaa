"""The filehost plugin's MCP tool: ``filehost_sessions``."""

from __future__ import annotations

from typing import Any

from agent_link_core.tools.registry import ToolCall, ToolSpec


async def list_filehost_sessions(app: Any, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Every listed filehost session (archived ones with ``includeArchived``)."""
    harness = app.harnesses["filehost"]
    listing = await harness.list_sessions(include_archived=bool(args.get("includeArchived")))
    return {
        "sessions": [{"address": s.address, "title": s.title, "archived": s.archived} for s in listing.sessions],
        "complete": listing.complete,
    }


SESSIONS_TOOL = ToolSpec(
    name="filehost_sessions",
    description="List the sessions of the filehost example host (from its sessions.json), with their addresses.",
    input_schema={
        "type": "object",
        "properties": {"includeArchived": {"type": "boolean", "description": "Also list archived sessions."}},
        "additionalProperties": False,
    },
    output_fields={
        "sessions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"address": {"type": "string"}, "title": {"type": ["string", "null"]}, "archived": {"type": "boolean"}},
                "required": ["address", "title", "archived"],
            },
        },
        "complete": {"type": "boolean"},
    },
    handler=list_filehost_sessions,
    read_only=True,
    idempotent=True,
    title="List filehost sessions",
)
TOOLS = (SESSIONS_TOOL,)
