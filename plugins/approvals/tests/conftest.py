"""Fixtures for the approvals plugin's tests: a tool list shaped like agent-link's (read-only,
side-effecting, destructive and role-admin tools), the CLI with that list standing in for the
running server's (``fake_tools``), and config writers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agent_link_approvals import opencode_layers
from agent_link_approvals.toollist import ToolInfo
from click.testing import CliRunner, Result

from agent_link_core.cli import build_cli

PLUGIN_ID = "codex-agent-link@agent-link"
SERVER = "codex-agent-link"  # the manifests' server key (kept from the original for existing approvals)
CLAUDE_PREFIX = "mcp__plugin_agent-link_codex-agent-link"

#: agent-link's annotations: readOnlyHint for lookups, destructiveHint for archive and the role
#: admin tools, openWorldHint false everywhere (as agent_link_core.server declares them).
TOOLS = [
    ToolInfo("agent_link_health", True, False, False),
    ToolInfo("list_agents", True, False, False),
    ToolInfo("wait_for_agent", True, False, False),
    ToolInfo("message_agent", False, False, False),
    ToolInfo("reply_agent_link_message", False, False, False),
    ToolInfo("archive_codex_thread", False, True, False),
    ToolInfo("set_agent_role", False, True, False),
    ToolInfo("clear_agent_role", False, True, False),
    ToolInfo("set_agent_override_policy", False, True, False),
]
READ_ONLY = ["agent_link_health", "list_agents", "wait_for_agent"]


@pytest.fixture
def tools() -> list[ToolInfo]:
    return list(TOOLS)


@pytest.fixture
def fake_tools(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The CLI lists :data:`TOOLS` instead of starting ``agent-link mcp``; returns the hosts asked."""
    import agent_link_approvals.cli as cli_mod

    asked: list[str] = []

    def listing(host: str) -> list[ToolInfo]:
        asked.append(host)
        return list(TOOLS)

    monkeypatch.setattr(cli_mod, "list_running_tools", listing)
    return asked


@pytest.fixture
def run() -> Callable[..., Result]:
    """``run(*args)``: ``agent-link <args>`` in-process (stdout and stderr apart)."""

    def invoke(*args: Any) -> Result:
        return CliRunner().invoke(build_cli(), [str(a) for a in args], catch_exceptions=False)

    return invoke


def tool_table(tool: str, mode: str = "approve", server: str = SERVER, plugin_id: str = PLUGIN_ID) -> str:
    return f'[plugins."{plugin_id}".mcp_servers.{server}.tools.{tool}]\napproval_mode = "{mode}"\n'


@pytest.fixture
def toml_tables() -> Callable[..., str]:
    return tool_table


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str], Path]:
    """``write(name, text)``: a file in tmp_path."""

    def put(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return put


@pytest.fixture(autouse=True)
def no_real_opencode_layers(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """opencode's global, home and managed folders in a scratch folder, and no ``OPENCODE_*``
    variable: health and ``--real-opencode`` never read the machine's opencode config."""
    root = tmp_path_factory.mktemp("opencode-layers")
    for name in ("OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR", "OPENCODE_CONFIG_CONTENT", "OPENCODE_PERMISSION",
                 "OPENCODE_DISABLE_PROJECT_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(root / "xdg"))
    monkeypatch.setenv("HOME", str(root / "home"))
    monkeypatch.setattr(opencode_layers, "MANAGED_DIR", root / "managed")
    return root
