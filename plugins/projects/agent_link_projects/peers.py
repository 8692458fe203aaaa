"""How this plugin reaches the codex and roles plugins: only through what they register with
the core (their MCP tools in the core's tool table, the ``role:<name>`` address hook) and the
roles plugin's public :mod:`agent_link_roles.api`. Either plugin may be missing; callers get
``unsupported`` (codex) or a ``roles_unavailable`` note (roles), never an ImportError."""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any

from agent_link_core.errors import AgentLinkError
from agent_link_core.tools.registry import ToolCall, validate_arguments

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App

ROLES_PLUGIN = "roles"
ROLES_UNAVAILABLE = {
    "code": "roles_unavailable",
    "message": "The roles plugin (agent-link-roles) is not installed or is disabled, so role assignments were not consulted "
               "(resolution steps 2 and 4 were skipped).",
}


async def run_tool(app: App, name: str, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Call another plugin's registered MCP tool as the same caller; its success fields, or
    its AgentLinkError raised.

    :raises AgentLinkError: ``unsupported`` (``details.capability`` = the tool) when no
        installed plugin registers ``name``.
    """
    spec = app.hooks.tools().get(name)
    if spec is None:
        raise AgentLinkError("unsupported", f"{name} is not available here, so Codex threads cannot be reached.",
                             {"capability": name}, hint="Install and enable the codex plugin (agent-link-codex).")
    validated, warnings = validate_arguments(spec, args)
    call.warnings.extend(warnings)
    return await spec.handler(app, validated, call)


def roles_api(app: App) -> ModuleType | None:
    """:mod:`agent_link_roles.api` when the roles plugin is installed and loaded, else None."""
    if ROLES_PLUGIN not in app.hooks.loaded:
        return None
    try:
        from agent_link_roles import api  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        return None
    return api
