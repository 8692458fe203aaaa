"""``agent_link_tools``: every tool the server's profile (:mod:`agent_link_profiles.profiles`)
leaves out of ``tools/list``, on request, whatever the host does with
``notifications/tools/list_changed``: a model asks for the list, then for one tool's schema,
then calls it, through the same checks as a listed tool's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_link_core.errors import AgentLinkError
from agent_link_core.tools.registry import ToolCall, ToolSpec, output_schema, run_tool
from agent_link_core.tools.schemas import BOOL, OBJ, STR

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App

NAME = "agent_link_tools"


def hidden_tools(app: App) -> dict[str, ToolSpec]:
    """The registered tools this server's profile leaves out of ``tools/list``, by name."""
    offered = app.hooks.listed_tools(app.env.get("AGENT_LINK_HOST"))
    return {name: spec for name, spec in app.hooks.tools().items() if name not in offered}


def summary(description: str) -> str:
    """The first sentence of a tool's description (at most 200 characters)."""
    first = description.strip().split(". ", 1)[0].rstrip(".")
    return (first[:197] + "...") if len(first) > 200 else first + "."


async def handle(app: App, arguments: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """List the tools left out, describe one, or call one (see the tool's description).

    :raises AgentLinkError: ``unknown_tool`` for a name that is not a tool left out;
        ``invalid_arguments`` for ``arguments`` without ``name``; the called tool's own error, as this call's (its
        ``details.tool`` the tool's name; an ``invalid_arguments`` error's paths under ``arguments.``).
    """
    name = arguments.get("name")
    hidden = hidden_tools(app)
    if name is None:
        if "arguments" in arguments:
            raise AgentLinkError("invalid_arguments", "arguments needs name: the tool to call.",
                                 {"errors": [{"path": "name", "rule": "required", "expected": "a tool name"}]},
                                 hint="Call agent_link_tools without arguments for the names.")
        owners = app.hooks.tool_owners()
        return {"tools": [{"name": n, "summary": summary(s.description), "plugin": owners.get(n, "?")}
                          for n, s in sorted(hidden.items())]}
    spec = hidden.get(name)
    if spec is None:
        raise AgentLinkError("unknown_tool", f"{name!r} is not one of the tools agent_link_tools offers.", {"name": name},
                             hint="Call agent_link_tools without arguments for their names; tools/list has the others.")
    if "arguments" not in arguments:
        return {"tool": {"name": spec.name, "description": spec.description, "inputSchema": spec.input_schema,
                         "outputSchema": output_schema(spec)}}
    result = await run_tool(app, spec, arguments["arguments"], call.meta, call.progress)
    if not result["ok"]:  # the called tool failed: so did this call, or a host would show the failure as a success
        error = result["error"]
        details = {**(error.get("details") or {}), "tool": name}
        if error["code"] == "invalid_arguments":
            details["errors"] = [{**e, "path": f"arguments.{e['path']}"} for e in details.get("errors", [])]
        raise AgentLinkError(error["code"], f"{name}: {error['message']}", details, hint=error.get("hint"))
    return {"result": result}


GATEWAY_TOOL = ToolSpec(
    name=NAME,
    title="More agent-link tools",
    description=(
        "Reach the agent-link tools not in your tool list (the host plugins' session tools, roles, projects, receipts,"
        " search...). No arguments: their names and one-line summaries. {name}: that tool's description and input"
        " schema. {name, arguments}: call it; `result` is its answer, and its error is this call's."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 64, "description": "A tool name from the list."},
            "arguments": {"type": "object", "description": "That tool's arguments; present = call it."},
        },
        "additionalProperties": False,
    },
    output_fields={
        "tools": {"type": "array", "items": {"type": "object", "properties": {"name": STR, "summary": STR, "plugin": STR},
                                             "required": ["name", "summary", "plugin"]}},
        "tool": {"type": "object", "properties": {"name": STR, "description": STR, "inputSchema": OBJ, "outputSchema": OBJ},
                 "required": ["name", "description", "inputSchema"]},
        "result": {"type": "object", "properties": {"ok": BOOL}, "required": ["ok"]},
    },
    # It can call any tool, the role-admin ones included: a host that asks before destructive
    # tools (as some do by default) must ask before this one too.
    handler=handle, destructive=True, reaches_unlisted=True,
)
