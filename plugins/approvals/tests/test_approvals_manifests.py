"""Plugin ids and MCP server keys come from the repository's manifests, and broken manifests
are reported (never a traceback)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agent_link_approvals.manifests import (
    default_plugin_root,
    read_claude_plugin,
    read_codex_plugin,
)
from agent_link_testing.cli_runner import run_main

REPO = default_plugin_root()


def test_the_repository_manifests_give_ids_and_servers() -> None:
    codex = read_codex_plugin()
    market = json.loads((REPO / ".agents" / "plugins" / "marketplace.json").read_text())
    manifest = json.loads((codex.plugin_root / ".codex-plugin" / "plugin.json").read_text())
    servers = json.loads((codex.plugin_root / manifest["mcpServers"]).read_text())["mcpServers"]
    assert codex.problems == []
    assert codex.plugin_id == f"{manifest['name']}@{market['name']}"
    assert codex.servers == list(servers)
    claude = read_claude_plugin()
    cmanifest = json.loads((claude.plugin_root / ".claude-plugin" / "plugin.json").read_text())
    assert claude.problems == [] and claude.plugin == cmanifest["name"] and claude.servers == list(cmanifest["mcpServers"])


@pytest.fixture
def codex_root(tmp_path: Path) -> Path:
    """A copy of the Codex plugin's files (the marketplace, manifests and launcher), with the
    plugin folder at the marketplace's root (``./``)."""
    root = tmp_path / "copy"
    plugin = read_codex_plugin()
    for rel in plugin.files:
        inside = (REPO / rel).resolve().relative_to(plugin.plugin_root) if rel.startswith("plugins/") else Path(rel)
        (root / inside).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, root / inside)
    edit(root / ".agents" / "plugins" / "marketplace.json",
         lambda d: [p.update(source={"source": "local", "path": "./"}) for p in d["plugins"]])
    return root


def edit(path: Path, change: object) -> None:
    data = json.loads(path.read_text())
    change(data)  # type: ignore[operator]
    path.write_text(json.dumps(data))


def test_copied_manifests_are_fine(codex_root: Path) -> None:
    assert read_codex_plugin(codex_root).problems == []


def test_missing_and_malformed_manifests(codex_root: Path) -> None:
    market = codex_root / ".agents" / "plugins" / "marketplace.json"
    listing = market.read_text()
    market.unlink()
    plugin = read_codex_plugin(codex_root)
    assert plugin.plugin_id is None and any("marketplace.json does not exist" in p for p in plugin.problems)
    market.write_text(listing)
    (codex_root / ".codex-plugin" / "plugin.json").write_text("{nope")
    plugin = read_codex_plugin(codex_root)
    assert plugin.plugin is None and "line 1" in plugin.problems[0]
    edit(market, lambda d: d.update(plugins=[{"name": "other", "source": "./elsewhere"}]))
    assert "lists no plugin" in read_codex_plugin(codex_root).problems[0]
    assert read_codex_plugin(codex_root.parent / "empty").problems  # nothing there at all


def test_the_plugin_folder_is_where_the_marketplace_says(codex_root: Path) -> None:
    moved = codex_root / "plugins" / "host"
    for name in (".codex-plugin", "hooks"):
        shutil.move(codex_root / name, moved / name)
    market = codex_root / ".agents" / "plugins" / "marketplace.json"
    edit(market, lambda d: [p.update(source={"source": "local", "path": "./plugins/host"}) for p in d["plugins"]])
    plugin = read_codex_plugin(codex_root)
    assert plugin.problems == [] and plugin.plugin_root == moved.resolve() and plugin.servers
    assert ".codex-plugin/plugin.json" not in plugin.files and "plugins/host/.codex-plugin/plugin.json" in plugin.files
    edit(market, lambda d: [p.update(name="renamed") for p in d["plugins"]])
    assert "whose manifest names" in read_codex_plugin(codex_root).problems[0]


def test_server_file_must_exist_stay_inside_and_start_agent_link(codex_root: Path) -> None:
    manifest = codex_root / ".codex-plugin" / "plugin.json"
    server_file = codex_root / json.loads(manifest.read_text())["mcpServers"]
    edit(manifest, lambda d: d.update(mcpServers="../outside.json"))
    assert "outside the plugin folder" in read_codex_plugin(codex_root).problems[0]
    edit(manifest, lambda d: d.update(mcpServers="./.codex-plugin/none.json"))
    assert "does not exist" in read_codex_plugin(codex_root).problems[0]
    edit(manifest, lambda d: d.update(mcpServers=str(server_file.relative_to(codex_root))))
    edit(server_file, lambda d: d["mcpServers"][next(iter(d["mcpServers"]))].update(args=["./hooks/agent-link.sh", "hook"]))
    plugin = read_codex_plugin(codex_root)
    assert plugin.servers == [] and any("starts `agent-link mcp`" in p for p in plugin.problems)
    (codex_root / "hooks" / "agent-link.sh").unlink()
    edit(server_file, lambda d: d["mcpServers"][next(iter(d["mcpServers"]))].update(args=["./hooks/agent-link.sh", "mcp"]))
    assert read_codex_plugin(codex_root).servers == []  # the launcher it names is missing


def test_server_without_the_host_variable_is_reported(codex_root: Path) -> None:
    manifest = json.loads((codex_root / ".codex-plugin" / "plugin.json").read_text())
    edit(codex_root / manifest["mcpServers"], lambda d: [e.pop("env", None) for e in d["mcpServers"].values()])
    plugin = read_codex_plugin(codex_root)
    assert plugin.servers and "AGENT_LINK_HOST=codex" in plugin.problems[0]


def test_other_ways_to_start_agent_link(tmp_path: Path) -> None:
    (tmp_path / ".claude-plugin").mkdir()
    (tmp_path / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": "p", "mcpServers": {
        "a": {"command": "/opt/bin/agent-link", "args": ["mcp"], "env": {"AGENT_LINK_HOST": "claude"}},
        "b": {"command": "python3", "args": ["-m", "agent_link_core", "mcp"], "env": {"AGENT_LINK_HOST": "claude"}},
        "c": {"command": "node", "args": ["server.js"]},
    }}))
    (tmp_path / ".claude-plugin" / "marketplace.json").write_text(json.dumps({"name": "m", "plugins": [{"name": "p", "source": "./"}]}))
    plugin = read_claude_plugin(tmp_path)
    assert plugin.servers == ["a", "b"] and plugin.problems == [] and plugin.plugin_id == "p@m"


def test_without_a_checkout_the_installed_marketplace_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # an installation without a checkout (pipx): the marketplaces `agent-link install` made
    from agent_link_approvals import manifests

    monkeypatch.setattr(manifests, "default_plugin_root", lambda: tmp_path / "site-packages")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert read_codex_plugin().problems  # nothing installed: the missing marketplace is reported
    # installed as the console script does it, in this process (the default plugin root above is
    # the approvals plugin's own, which the install does not read), without the Codex install's
    # last step, four MCP servers started to keep their opening (plugins/codex's install tests check it)
    from agent_link_codex import opening

    monkeypatch.setattr(opening, "keep_opening_answers", lambda folder, env=None: ["kept"])
    for host in ("codex", "claude"):
        fake = tmp_path / host
        fake.write_text("#!/bin/sh\n")
        fake.chmod(0o755)
        done = run_main("install", host, "--host-bin", str(fake))
        assert done.returncode == 0, done.stderr
    codex, claude = read_codex_plugin(), read_claude_plugin()
    assert codex.problems == [] and codex.plugin_id == "codex-agent-link@agent-link" and codex.servers == ["codex-agent-link"]
    assert codex.root == tmp_path / "data" / "agent-link" / "host-plugins" / "codex"
    assert claude.problems == [] and claude.plugin_id == "agent-link@agent-link" and claude.servers == ["codex-agent-link"]
