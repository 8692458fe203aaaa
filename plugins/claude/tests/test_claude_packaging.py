"""The Claude Code plugin folder (``agent_link_claude/host_plugin``) and the repository's
marketplace agree with each other and with the code: names, the launcher every command runs,
and the hook events the adapter handles."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import agent_link_claude
from agent_link_claude import channel, hook

REPO = Path(agent_link_claude.__file__).resolve().parents[3]
FOLDER = Path(agent_link_claude.__file__).resolve().parent / "host_plugin"
LAUNCHER = "${CLAUDE_PLUGIN_ROOT}/hooks/agent-link.sh"


def load(*parts: str) -> dict:
    return json.loads((FOLDER.joinpath(*parts)).read_text())


def test_the_repository_marketplace_offers_the_plugin_folder() -> None:
    market = json.loads((REPO / ".claude-plugin" / "marketplace.json").read_text())
    plugin = load(".claude-plugin", "plugin.json")
    assert market["name"] == "agent-link"
    [entry] = market["plugins"]
    assert entry["name"] == plugin["name"] == channel.PLUGIN_NAME
    assert (REPO / entry["source"]).resolve() == FOLDER
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
    # the lease guard (agent-link-leases; silent when that plugin is not installed): edit and
    # write tools, and Bash (the guard passes a command whose text shows no write); never reads
    [guard_group] = hooks.pop("PreToolUse")
    assert guard_group["matcher"] == "Edit|MultiEdit|Write|NotebookEdit|Bash"
    assert guard_group["hooks"] == [{"type": "command", "command": f'sh "{LAUNCHER}" hook leases PreToolUse', "timeout": 5}]
    assert set(hooks) == {"SessionStart", "UserPromptSubmit", "Stop"}
    for event, groups in hooks.items():
        [group] = groups
        [entry] = group["hooks"]
        assert entry["type"] == "command" and entry["timeout"] == 5
        assert entry["command"] == f'sh "{LAUNCHER}" hook claude {event}'
    assert set(hook.NOTE_EVENTS) | {"Stop"} == set(hooks)


def test_launcher_exists_and_is_posix_sh() -> None:
    path = FOLDER / "hooks" / "agent-link.sh"
    assert path.is_file() and os.access(path, os.X_OK)
    assert subprocess.run(["sh", "-n", str(path)], capture_output=True, timeout=10).returncode == 0


def test_the_folder_holds_only_what_the_plugin_reads(tmp_path: Path) -> None:
    # Claude Code copies the whole folder: every file the manifests name under the plugin root,
    # nothing more, and no component folder Claude Code would discover on its own
    from agent_link_testing.claude_host import CLAUDE_PLUGIN_FILES, STAGED_MARKETPLACE, stage_plugin

    named = set()
    for rel in (".claude-plugin/plugin.json", "hooks/hooks.json"):
        named |= set(re.findall(r"\$\{CLAUDE_PLUGIN_ROOT\}/([A-Za-z0-9._/-]+)", (FOLDER / rel).read_text()))
    assert named == {"hooks/agent-link.sh"}
    files = sorted(str(p.relative_to(FOLDER)) for p in FOLDER.rglob("*") if p.is_file())
    assert files == sorted(named | {".claude-plugin/plugin.json", "hooks/hooks.json"}) == sorted(CLAUDE_PLUGIN_FILES)
    staged = stage_plugin(tmp_path / "staged")
    assert sorted(str(p.relative_to(staged)) for p in staged.rglob("*") if p.is_file()) == sorted([*files, STAGED_MARKETPLACE])
    launcher = staged / "hooks" / "agent-link.sh"
    assert os.access(launcher, os.X_OK) and launcher.read_bytes() == (FOLDER / "hooks" / "agent-link.sh").read_bytes()


def test_both_host_plugins_ship_the_same_launcher() -> None:
    codex = REPO / "plugins" / "codex" / "agent_link_codex" / "host_plugin" / "hooks" / "agent-link.sh"
    assert codex.read_bytes() == (FOLDER / "hooks" / "agent-link.sh").read_bytes()
