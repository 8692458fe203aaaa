"""Entry point of the agent-link codex plugin (entry point ``codex`` in group ``agent_link``).

Contributes the ``codex`` harness (addresses ``codex:<threadId>``), the Codex thread tools,
the Codex settings and the plugin's tables. Imports stay light: the heavy modules (the
app-server client, websockets) load when the harness or a tool is first built.
"""

from __future__ import annotations

from typing import Any, Callable

from agent_link_core import hookimpl
from agent_link_core.store import Migration

from agent_link_codex.schema import MIGRATIONS
from agent_link_codex.settings import SETTINGS


@hookimpl
def agent_link_register_harnesses(register: Callable[[Any], None]) -> None:
    """The ``codex`` harness."""
    from agent_link_codex.harness import CodexHarness

    register(CodexHarness())


@hookimpl
def agent_link_register_tools(register: Callable[[Any], None]) -> None:
    """The nine Codex thread tools."""
    from agent_link_codex.tools import TOOLS

    for spec in TOOLS:
        register(spec)


@hookimpl
def agent_link_register_settings(register: Callable[[Any], None]) -> None:
    """Every Codex setting with its legacy aliases."""
    for setting in SETTINGS:
        register(setting)


@hookimpl
def agent_link_schema() -> list[Migration]:
    """The ``codex_endpoints`` and ``codex_pushes`` tables."""
    return list(MIGRATIONS)
