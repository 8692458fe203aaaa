"""The core's own hook implementations (its schema and MCP tools), registered like any plugin."""

from __future__ import annotations

from agent_link_core.hookspecs import hookimpl
from agent_link_core.store import CORE_MIGRATIONS, Migration

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Callable
    from agent_link_core.tools.registry import ToolSpec
    from agent_link_core.app import App


@hookimpl
def agent_link_schema() -> list[Migration]:
    from agent_link_core.handoff import MIGRATIONS as HANDOFF_MIGRATIONS
    from agent_link_core.presence import PRESENCE_MIGRATIONS

    return [*CORE_MIGRATIONS, *PRESENCE_MIGRATIONS, *HANDOFF_MIGRATIONS]


@hookimpl
def agent_link_register_tools(register: Callable[[ToolSpec], None], app: App | None) -> None:
    from agent_link_core.tools.core_tools import CORE_TOOLS, health_spec, message_agent_spec, wait_for_agent_spec

    for spec in CORE_TOOLS:
        builders = {"message_agent": message_agent_spec, "wait_for_agent": wait_for_agent_spec, "agent_link_health": health_spec}
        register(builders[spec.name](app) if spec.name in builders else spec)
