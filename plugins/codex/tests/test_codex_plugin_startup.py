"""The Codex plugin's MCP server declaration (``.codex-plugin/mcp.json``).

Codex gives an MCP server's process only the variables the declaration names in ``env_vars``
(verified on the pinned Codex by ``test_codex_realhost_install``), so every variable agent-link
reads must be named there, or a setting made in the shell silently misses Codex's server: that
is walked for every host by ``tests/test_host_server_env.py``.
"""

from __future__ import annotations

import json

from agent_link_testing.codex_host import REPO_ROOT



def declaration() -> dict:
    return json.loads((REPO_ROOT / "plugins" / "codex" / "agent_link_codex" / "host_plugin" / ".codex-plugin" / "mcp.json").read_text())["mcpServers"]["codex-agent-link"]


def test_the_server_is_required() -> None:
    """Codex builds the first turn without an optional server it has not listed within about a
    second; a required one it waits for."""
    assert declaration()["required"] is True
