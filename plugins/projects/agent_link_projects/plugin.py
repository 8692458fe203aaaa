"""Entry point of the agent-link projects plugin (``agent_link`` group): the six project tools
and a ``projects`` health section saying what works here (the codex plugin is needed for
every thread; without the roles plugin role assignments are not consulted)."""

from __future__ import annotations

from agent_link_core import hookimpl
from agent_link_core.contribute import registers

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any
    from agent_link_core.app import App

#: the project tools (their module is imported only when tools are listed)
agent_link_register_tools = registers("agent_link_projects.tools:PROJECT_TOOLS")


@hookimpl
def agent_link_health(app: App) -> tuple[str, dict[str, Any]]:
    from agent_link_projects.peers import roles_api

    codex = "codex" in app.harnesses
    roles = roles_api(app) is not None
    receipts = "receipts" in app.hooks.loaded
    limits = []
    if not codex:
        limits.append("The codex plugin is not loaded: no orchestrator or worker thread can be resolved, launched or messaged.")
    if not roles:
        limits.append("The roles plugin is not loaded: role assignments (steps 2 and 4 of orchestrator resolution) and role:<name> orchestrators are unavailable.")
    if not receipts:
        limits.append("The receipts plugin is not loaded: handoffs are sent but check_coordination_obligations cannot verify them.")
    return "projects", {"codex": codex, "roles": roles, "receipts": receipts, "limitations": limits}
