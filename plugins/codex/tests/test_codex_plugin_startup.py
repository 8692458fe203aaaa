"""The Codex plugin's MCP server declaration (``.codex-plugin/mcp.json``).

Codex gives an MCP server's process only the variables the declaration names in ``env_vars``
(verified on the pinned Codex by ``test_codex_realhost_install``), so every agent-link setting
must be named there, or a setting made in the shell silently misses Codex's server.
"""

from __future__ import annotations

import json

from agent_link_testing.codex_host import REPO_ROOT

from agent_link_core.app import App
from agent_link_core.config import CORE_SETTINGS


def declaration() -> dict:
    return json.loads((REPO_ROOT / "plugins" / "codex" / "agent_link_codex" / "host_plugin" / ".codex-plugin" / "mcp.json").read_text())["mcpServers"]["codex-agent-link"]


def test_every_setting_reaches_the_server() -> None:
    app = App.create()
    settings = [*CORE_SETTINGS, *app.hooks.settings()]
    wanted = {s.name for s in settings if s.name != "AGENT_LINK_HOST"}  # set by the declaration itself
    wanted |= {alias for s in settings for alias in s.aliases if "AGENT_LINK" in alias}
    wanted |= {"XDG_CONFIG_HOME", "XDG_CACHE_HOME"}  # where the settings file and the start-up cache live
    missing = wanted - set(declaration()["env_vars"])
    assert not missing, f"add to plugins/codex/agent_link_codex/host_plugin/.codex-plugin/mcp.json env_vars: {sorted(missing)}"


def test_the_server_is_required() -> None:
    """Codex builds the first turn without an optional server it has not listed within about a
    second; a required one it waits for."""
    assert declaration()["required"] is True
