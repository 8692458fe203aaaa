"""The Claude Code plugin manifests at the repository root agree with each other and with the
code: names, the launcher every command runs, and the hook events the adapter handles."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import agent_link_claude
from agent_link_claude import channel, hook

REPO = Path(agent_link_claude.__file__).resolve().parents[3]
LAUNCHER = "${CLAUDE_PLUGIN_ROOT}/hooks/agent-link.sh"


def load(*parts: str) -> dict:
    return json.loads((REPO.joinpath(*parts)).read_text())


def test_marketplace_offers_the_plugin_at_the_repository_root() -> None:
    market = load(".claude-plugin", "marketplace.json")
    plugin = load(".claude-plugin", "plugin.json")
    assert market["name"] == "agent-link"
    [entry] = market["plugins"]
    assert entry["name"] == plugin["name"] == channel.PLUGIN_NAME
    assert entry["source"] == "./"
    core_version = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M).group(1)
    assert plugin["version"] == core_version


def test_mcp_server_runs_through_the_launcher_as_host_claude() -> None:
    servers = load(".claude-plugin", "plugin.json")["mcpServers"]
    assert list(servers) == [channel.PLUGIN_SERVER_NAME]
    server = servers[channel.PLUGIN_SERVER_NAME]
    assert server["command"] == "sh" and server["args"] == [LAUNCHER, "mcp"]
    assert server["env"] == {"AGENT_LINK_HOST": "claude"}
    assert server["alwaysLoad"] is True  # tools are in the first request even with a slow start


def test_hooks_run_the_adapter_for_each_declared_event() -> None:
    hooks = load("hooks", "hooks.json")["hooks"]
    assert set(hooks) == {"SessionStart", "UserPromptSubmit", "Stop"}
    for event, groups in hooks.items():
        [group] = groups
        [entry] = group["hooks"]
        assert entry["type"] == "command" and entry["timeout"] == 5
        assert entry["command"] == f'sh "{LAUNCHER}" hook claude {event}'
    assert set(hook.NOTE_EVENTS) | {"Stop"} == set(hooks)


def test_launcher_exists_and_is_posix_sh() -> None:
    path = REPO / "hooks" / "agent-link.sh"
    assert path.is_file() and os.access(path, os.X_OK)
    assert subprocess.run(["sh", "-n", str(path)], capture_output=True, timeout=10).returncode == 0


def test_the_staged_copy_the_real_host_tests_install_holds_everything_the_plugin_reads(tmp_path: Path) -> None:
    # conftest's `installed` installs agent_link_testing.claude_host.stage_plugin's copy instead of
    # the ~1 GB checkout: it must hold every file the manifests name under the plugin root, and
    # the root must have no component folder Claude Code would discover on its own
    from agent_link_testing.claude_host import CLAUDE_PLUGIN_FILES, stage_plugin

    named = set()
    for rel in (".claude-plugin/plugin.json", "hooks/hooks.json"):
        named |= set(re.findall(r"\$\{CLAUDE_PLUGIN_ROOT\}/([A-Za-z0-9._/-]+)", (REPO / rel).read_text()))
    assert named == {"hooks/agent-link.sh"}
    assert named | {".claude-plugin/marketplace.json", ".claude-plugin/plugin.json", "hooks/hooks.json"} == set(CLAUDE_PLUGIN_FILES)
    for auto in ("commands", "agents", "skills", "output-styles", ".mcp.json", ".lsp.json", "settings.json"):
        assert not (REPO / auto).exists(), f"{auto} would be part of the plugin but is not staged"
    staged = stage_plugin(tmp_path / "staged")
    assert sorted(str(p.relative_to(staged)) for p in staged.rglob("*") if p.is_file()) == sorted(CLAUDE_PLUGIN_FILES)
    launcher = staged / "hooks" / "agent-link.sh"
    assert os.access(launcher, os.X_OK) and launcher.read_bytes() == (REPO / "hooks" / "agent-link.sh").read_bytes()
