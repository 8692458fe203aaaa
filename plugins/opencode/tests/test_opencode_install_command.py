"""``agent-link install opencode`` / ``uninstall opencode`` on a config under a temporary HOME:
the MCP server and the JS plugin are added (once, however often it runs), and uninstall leaves
the person's other settings as they were; a config that is not plain JSON is refused untouched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agent_link_testing.cli_runner import run_main

AGENT_LINK = str(Path(sys.executable).with_name("agent-link"))
USER_CONFIG = {
    "$schema": "https://opencode.ai/config.json", "theme": "tokyonight",
    "mcp": {"mine": {"type": "remote", "url": "https://example.invalid/mcp"}},
    "plugin": ["opencode-wakatime"],
}


def run(args: list[str], tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCODE", "XDG_"))}
    env.update({"HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "data")}, **extra)
    return subprocess.run([AGENT_LINK, *args], capture_output=True, text=True, env=env, timeout=120)


def run_here(args: list[str], tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """:func:`run` as the console script runs it, in this process (the first test keeps the
    real process: the install, health, reinstall and uninstall)."""
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith(("OPENCODE", "XDG_"))}
    return run_main(*args, env={**unset, "HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "data"), **extra})


def test_opencode_install_is_idempotent_and_uninstall_leaves_the_rest(tmp_path: Path) -> None:
    config = tmp_path / "home" / ".config" / "opencode" / "opencode.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps(USER_CONFIG))
    done = run(["install", "opencode"], tmp_path)
    assert done.returncode == 0, done.stderr
    installed = json.loads(config.read_text())
    plugin_file = tmp_path / "data" / "agent-link" / "host-plugins" / "opencode" / "agent-link.js"
    assert installed["mcp"]["agent-link"] == {"type": "local", "command": [AGENT_LINK, "mcp"],
                                              "environment": {"AGENT_LINK_HOST": "opencode"}, "enabled": True}
    assert installed["plugin"] == ["opencode-wakatime", plugin_file.as_uri()]
    staged = plugin_file.read_text()
    # the JS plugin runs this installation's agent-link for its hooks (lease guard, mail note)
    assert "tool.execute.before" in staged and f"const AGENT_LINK = {json.dumps(AGENT_LINK)};" in staged
    assert {k: v for k, v in installed.items() if k not in ("mcp", "plugin")} == {k: v for k, v in USER_CONFIG.items() if k not in ("mcp", "plugin")}
    assert installed["mcp"]["mine"] == USER_CONFIG["mcp"]["mine"]

    health = run(["health", "--json"], tmp_path, AGENT_LINK_STATE_DIR=str(tmp_path / "state"))
    assert json.loads(health.stdout)["harnesses"]["opencode"]["install"] == {"config": str(config), "mcpServer": True, "callerPlugin": True}

    again = run(["install", "opencode"], tmp_path)
    assert again.returncode == 0, again.stderr
    assert json.loads(config.read_text()) == installed

    gone = run(["uninstall", "opencode"], tmp_path)
    assert gone.returncode == 0, gone.stderr
    assert json.loads(config.read_text()) == USER_CONFIG
    assert not plugin_file.exists() and not (tmp_path / "data" / "agent-link").exists()
    health = run(["health", "--json"], tmp_path, AGENT_LINK_STATE_DIR=str(tmp_path / "state"))
    assert json.loads(health.stdout)["harnesses"]["opencode"]["install"] == {"config": str(config), "mcpServer": False, "callerPlugin": False}
    twice = run(["uninstall", "opencode"], tmp_path)
    assert twice.returncode == 0 and json.loads(config.read_text()) == USER_CONFIG, twice.stderr


def test_opencode_install_creates_a_missing_config_and_uninstall_empties_it(tmp_path: Path) -> None:
    config = tmp_path / "elsewhere" / "opencode.json"
    done = run_here(["install", "opencode"], tmp_path, OPENCODE_CONFIG=str(config))
    assert done.returncode == 0, done.stderr
    assert set(json.loads(config.read_text())) == {"mcp", "plugin"}
    assert run_here(["uninstall", "opencode", "--config", str(config)], tmp_path).returncode == 0
    assert json.loads(config.read_text()) == {}


def test_opencode_install_dry_run_changes_nothing(tmp_path: Path) -> None:
    done = run_here(["install", "opencode", "--dry-run"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "agent-link.js" in done.stdout and "nothing changed" in done.stdout
    assert not (tmp_path / "home" / ".config").exists() and not (tmp_path / "data").exists()


def test_opencode_install_refuses_a_config_with_comments_and_leaves_it(tmp_path: Path) -> None:
    config = tmp_path / "opencode.jsonc"
    text = '{\n  // my theme\n  "theme": "tokyonight"\n}\n'
    config.write_text(text)
    done = run_here(["install", "opencode", "--config", str(config)], tmp_path)
    assert done.returncode == 1 and "not a plain JSON object" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert config.read_text() == text


def test_opencode_install_refuses_a_config_whose_mcp_is_not_an_object(tmp_path: Path) -> None:
    config = tmp_path / "opencode.json"
    config.write_text('{"mcp": ["x"]}')
    done = run_here(["install", "opencode", "--config", str(config)], tmp_path)
    assert done.returncode == 1 and "`mcp` is not an object" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert config.read_text() == '{"mcp": ["x"]}'
