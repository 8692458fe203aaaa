"""Entry point of the agent-link projects plugin (``agent_link`` group): the six project tools
and a ``projects`` health section saying what works here (the codex plugin is needed for
every thread; without the roles plugin role assignments are not consulted)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agent_link_core import hookimpl
from agent_link_core.tools.registry import ToolSpec
from agent_link_projects.peers import roles_api
from agent_link_projects.tools import PROJECT_TOOLS

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App


@hookimpl
def agent_link_register_tools(register: Callable[[ToolSpec], None]) -> None:
    for spec in PROJECT_TOOLS:
        register(spec)


@hookimpl
def agent_link_health(app: App) -> tuple[str, dict[str, Any]]:
    codex = "codex" in app.harnesses
    roles = roles_api(app) is not None
    receipts = "receipts" in app.plugin_report.loaded
    limits = []
    if not codex:
        limits.append("The codex plugin is not loaded: no orchestrator or worker thread can be resolved, launched or messaged.")
    if not roles:
        limits.append("The roles plugin is not loaded: role assignments (steps 2 and 4 of orchestrator resolution) and role:<name> orchestrators are unavailable.")
    if not receipts:
        limits.append("The receipts plugin is not loaded: handoffs are sent but check_coordination_obligations cannot verify them.")
    return "projects", {"codex": codex, "roles": roles, "receipts": receipts, "limitations": limits}
