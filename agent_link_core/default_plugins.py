"""The core's own hook implementations (its schema and MCP tools), registered like any plugin."""

from __future__ import annotations

from agent_link_core.lazy import hookimpl
from agent_link_core.store import CORE_MIGRATIONS, Migration

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Callable
    from agent_link_core.tools.registry import ToolSpec
    from agent_link_core.app import App


@hookimpl
def agent_link_schema() -> list[Migration]:
    return list(CORE_MIGRATIONS)


@hookimpl
def agent_link_register_tools(register: Callable[[ToolSpec], None], app: App | None) -> None:
    from agent_link_core.tools.core_tools import core_specs

    for spec in core_specs(app):
        register(spec)
