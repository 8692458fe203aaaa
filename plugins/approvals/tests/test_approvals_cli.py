"""``agent-link approvals check|apply``: exit codes 0/1/2, --json, --dry-run, backups and file
modes, the role-admin tools, the settings and the health section.

The tool list is the fixture's (``fake_tools``) except in the tests of the real listing."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agent_link_approvals.toollist import (
    ROLE_ADMIN_TOOLS,
    list_running_tools,
    scratch_env,
    tools_of_app,
)
from click.testing import Result

from agent_link_core.app import App
from agent_link_testing.output import said

PID = "codex-agent-link@agent-link"
SRV = "codex-agent-link"
RULE = "mcp__plugin_agent-link_codex-agent-link"
ENABLED = f'[plugins."{PID}"]\nenabled = true\n'
PROMPT = f'[plugins."{PID}".mcp_servers.{SRV}]\ndefault_tools_approval_mode = "prompt"\n'
READ_ONLY = ["agent_link_health", "list_agents", "wait_for_agent"]

Run = Callable[..., Result]


def as_json(result: Result) -> dict[str, Any]:
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text("# mine\n" + ENABLED + PROMPT)
    path.chmod(0o640)
    return path


# -- usage ------------------------------------------------------------------------------------

def test_nothing_named_is_bad_usage(run: Run, fake_tools: list[str]) -> None:
    result = run("approvals", "check")
    assert result.exit_code == 2 and "--codex-config" in result.stderr and fake_tools == []


def test_two_sources_for_one_host_are_bad_usage(run: Run, config: Path, fake_tools: list[str]) -> None:
    assert run("approvals", "check", "--codex-config", config, "--real-codex").exit_code == 2
    assert run("approvals", "check", "--claude-settings", config, "--real-claude").exit_code == 2
    assert run("approvals", "apply").exit_code == 2
    assert run("approvals", "apply", "--codex-config", config, "--claude-settings", config).exit_code == 2


def test_unreadable_and_malformed_files_exit_2_with_one_line(run: Run, tmp_path: Path, fake_tools: list[str]) -> None:
    missing = run("approvals", "check", "--codex-config", tmp_path / "none.toml")
    assert missing.exit_code == 2 and "does not exist" in missing.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text('a = "unterminated\n')
    result = run("approvals", "check", "--codex-config", bad)
    assert result.exit_code == 2 and "line 1" in result.stderr and "Traceback" not in result.output
    assert len(said(result.stderr)) == 1
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"permissions": ')
    result = run("approvals", "apply", "--claude-settings", bad_json)
    assert result.exit_code == 2 and "not valid JSON" in result.stderr and bad_json.read_text() == '{"permissions": '
    assert fake_tools == []  # files are checked before any server is started


def test_a_config_nested_thousands_deep_is_one_line_and_exit_2(run: Run, tmp_path: Path, fake_tools: list[str]) -> None:
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    for command in ("check", "apply"):
        result = run("approvals", command, "--codex-config", deep)
        assert result.exit_code == 2 and "nested too deeply" in result.stderr and "Traceback" not in result.output
        assert len(said(result.stderr)) == 1
    result = run("approvals", "apply", "--codex-config", deep, "--json")
    assert result.exit_code == 2 and as_json(result)["error"]["kind"] == "malformed"


@pytest.mark.parametrize("text", ['{"x": NaN}', '{"x": Infinity}', '{"x": [-Infinity]}'])
def test_settings_claude_code_would_refuse_are_refused(run: Run, tmp_path: Path, fake_tools: list[str], text: str) -> None:
    path = tmp_path / "settings.json"
    path.write_text(text)
    for command in ("check", "apply"):
        result = run("approvals", command, "--claude-settings", path)
        assert result.exit_code == 2 and "not valid JSON" in result.stderr and "Claude Code would not read it" in result.stderr
    assert path.read_text() == text and list(tmp_path.glob("*.bak")) == []


def test_apply_keeps_every_number_as_written(run: Run, tmp_path: Path, fake_tools: list[str]) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{"x": 1e999, "y": [1.50, -0, 1E5, 12345678901234567890123], "z": {"w": -0.0e-7}}\n')
    result = run("approvals", "apply", "--claude-settings", path)
    assert result.exit_code == 0
    text = path.read_text()
    assert '"x": 1e999' in text and "Infinity" not in text
    for number in ("1.50", "-0,", "1E5", "12345678901234567890123", "-0.0e-7"):
        assert number in text
    node = shutil.which("node")
    if node:  # what Claude Code reads it with
        assert subprocess.run([node, "-e", "JSON.parse(require('fs').readFileSync(process.argv[1], 'utf8'))", str(path)],
                              check=False).returncode == 0


def test_apply_json_is_one_object_also_when_the_write_fails(run: Run, tmp_path: Path, fake_tools: list[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_link_approvals import files

    path = tmp_path / "settings.json"
    path.write_text("{}\n")

    def full_disk(*args: Any, **kwargs: Any) -> Any:
        raise OSError(28, "No space left on device", str(tmp_path))

    monkeypatch.setattr(files.tempfile, "mkstemp", full_disk)
    result = run("approvals", "apply", "--claude-settings", path, "--json")
    assert result.exit_code == 1 and path.read_text() == "{}\n" and list(tmp_path.glob("*.bak")) == []
    data = as_json(result)
    assert data["complete"] is False and data["error"]["kind"] == "write"
    assert "No space left on device" in data["error"]["message"]
    assert len(said(result.stderr)) == 1


# -- codex ------------------------------------------------------------------------------------

def test_check_incomplete_prints_snippet_and_fix(run: Run, config: Path, fake_tools: list[str]) -> None:
    result = run("approvals", "check", "--codex-config", config)
    assert result.exit_code == 1 and fake_tools == ["codex"]
    assert "read-only tools that run without asking: 0 of 3" in result.stdout
    assert f"[plugins.\"{PID}\".mcp_servers.{SRV}.tools.list_agents]" in result.stdout
    assert "agent-link approvals apply --codex-config" in result.stdout
    assert "never auto-approved: set_agent_role" in result.stdout


def test_check_json_is_one_object(run: Run, config: Path, fake_tools: list[str]) -> None:
    data = as_json(run("approvals", "check", "--codex-config", config, "--json"))
    codex = data["codex"]
    assert data["complete"] is False and data["version"] == 1
    assert [m["tool"] for m in codex["missing"]] == READ_ONLY
    assert codex["manifests"]["pluginId"] == PID and codex["servers"] == [SRV]
    assert codex["sideEffecting"] == {"approved": [], "count": 6, "approvedCount": 0}


def test_dry_run_writes_nothing(run: Run, config: Path, fake_tools: list[str]) -> None:
    before = config.read_bytes()
    result = run("approvals", "apply", "--codex-config", config, "--dry-run")
    assert result.exit_code == 0 and "+approval_mode = \"approve\"" in result.stdout
    assert config.read_bytes() == before and list(config.parent.glob("*.bak")) == []


def test_apply_appends_keeps_bytes_mode_and_a_backup(run: Run, config: Path, fake_tools: list[str]) -> None:
    before = config.read_bytes()
    result = run("approvals", "apply", "--codex-config", config, "--json")
    assert result.exit_code == 0
    data = as_json(result)["codex"]
    after = config.read_bytes()
    assert after.startswith(before) and data["written"] is True
    assert stat.S_IMODE(config.stat().st_mode) == 0o640
    [backup] = config.parent.glob("config.toml.agent-link-*.bak")
    assert backup.read_bytes() == before and data["backup"] == str(backup)
    tables = tomllib.loads(config.read_text())["plugins"][PID]["mcp_servers"][SRV]["tools"]
    assert set(tables) == set(READ_ONLY)
    # a second apply has nothing to add and leaves the file alone
    again = run("approvals", "apply", "--codex-config", config)
    assert again.exit_code == 0 and "nothing to add" in again.stdout and config.read_bytes() == after
    assert run("approvals", "check", "--codex-config", config).exit_code == 0


def test_apply_all_never_approves_role_admin_tools_and_says_why(run: Run, config: Path, fake_tools: list[str]) -> None:
    result = run("approvals", "apply", "--codex-config", config, "--all")
    assert result.exit_code == 0
    tables = tomllib.loads(config.read_text())["plugins"][PID]["mcp_servers"][SRV]["tools"]
    assert "message_agent" in tables and not set(ROLE_ADMIN_TOOLS) & set(tables)
    assert ("never auto-approved: set_agent_role, clear_agent_role, set_agent_override_policy, agent_link_tools: they change"
            " who holds a role") in result.stdout


def test_apply_creates_a_missing_config(run: Run, tmp_path: Path, fake_tools: list[str]) -> None:
    path = tmp_path / "new.toml"
    assert run("approvals", "apply", "--codex-config", path).exit_code == 0
    assert tomllib.loads(path.read_text()) == {"plugins": {PID: {"enabled": True}}}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_hand_edits_and_user_choices_leave_apply_incomplete(run: Run, tmp_path: Path, fake_tools: list[str]) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f'[plugins."{PID}"]\nnote = 1\n' + PROMPT +
                    f'[plugins."{PID}".mcp_servers.{SRV}.tools.list_agents]\napproval_mode = "prompt"\n')
    result = run("approvals", "apply", "--codex-config", path)
    assert result.exit_code == 1
    assert f'BY HAND: the file already has [plugins."{PID}"]; add `enabled = true` under it' in result.stdout
    assert "kept: list_agents has approval_mode = 'prompt'" in result.stdout


def test_default_codex_mode_is_explained(run: Run, tmp_path: Path, fake_tools: list[str]) -> None:
    path = tmp_path / "config.toml"
    path.write_text(ENABLED)
    result = run("approvals", "check", "--codex-config", path)
    assert result.exit_code == 0
    assert "side-effecting tools that run without asking: 2 of 6: message_agent, reply_agent_link_message" in result.stdout
    assert 'default_tools_approval_mode = "writes"' in result.stdout


def test_real_codex_and_the_settings(run: Run, tmp_path: Path, fake_tools: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    codex_home = Path(os.environ["CODEX_HOME"])
    codex_home.mkdir(parents=True)
    (codex_home / "config.toml").write_text(ENABLED)
    data = as_json(run("approvals", "check", "--real-codex", "--json"))
    assert data["codex"]["config"] == str(codex_home / "config.toml") and data["complete"]
    monkeypatch.setenv("AGENT_LINK_CHECK_REAL_CONFIG", "1")
    assert as_json(run("approvals", "check", "--json"))["codex"]["config"] == str(codex_home / "config.toml")
    other = tmp_path / "other.toml"
    other.write_text(PROMPT)
    monkeypatch.setenv("CODEX_CONFIG", str(other))  # the legacy name still works
    assert as_json(run("approvals", "check", "--json"))["codex"]["config"] == str(other)
    monkeypatch.setenv("CODEX_AGENT_LINK_PLUGIN_ID", "x@y")
    assert as_json(run("approvals", "check", "--json"))["codex"]["pluginId"] == "x@y"
    assert as_json(run("approvals", "check", "--json", "--plugin-id", "p@q"))["codex"]["pluginId"] == "p@q"
    health = as_json(run("health", "--json"))
    assert {"name": "CODEX_CONFIG", "canonical": "AGENT_LINK_CODEX_CONFIG"} in health["env"]["deprecated"]
    assert {"name": "CODEX_AGENT_LINK_PLUGIN_ID", "canonical": "AGENT_LINK_CODEX_PLUGIN_ID"} in health["env"]["deprecated"]


def test_broken_manifests_make_the_check_fail(run: Run, tmp_path: Path, config: Path, fake_tools: list[str]) -> None:
    root = tmp_path / "plugin"
    (root / ".codex-plugin").mkdir(parents=True)
    (root / ".codex-plugin" / "plugin.json").write_text("{}")
    result = run("approvals", "check", "--codex-config", config, "--plugin-root", root)
    assert result.exit_code == 1 and "plugin id is unknown" in result.stderr
    result = run("approvals", "check", "--codex-config", config, "--plugin-root", root, "--plugin-id", PID)
    assert result.exit_code == 1 and "server key is unknown" in result.stderr


# -- claude -----------------------------------------------------------------------------------

def test_claude_check_apply_and_deny_override(run: Run, tmp_path: Path, fake_tools: list[str]) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"model": "x", "permissions": {"deny": [f"{RULE}__wait_for_agent"]}}, indent=4))
    path.chmod(0o644)
    result = run("approvals", "check", "--claude-settings", path)
    assert result.exit_code == 1 and fake_tools == ["claude"]
    assert "OVERRIDDEN: wait_for_agent is held back by deny rule" in result.stdout
    before = path.read_text()
    assert run("approvals", "apply", "--claude-settings", path, "--dry-run").exit_code == 1
    assert path.read_text() == before
    result = run("approvals", "apply", "--claude-settings", path, "--json")
    data = as_json(result)["claude"]
    assert result.exit_code == 1  # the deny rule stays, so it is still incomplete
    assert data["added"] == [f"{RULE}__agent_link_health", f"{RULE}__list_agents"]
    saved = json.loads(path.read_text())
    assert saved["model"] == "x" and saved["permissions"]["deny"] == [f"{RULE}__wait_for_agent"]
    assert saved["permissions"]["allow"] == data["added"] and stat.S_IMODE(path.stat().st_mode) == 0o644
    assert path.read_text().startswith('{\n    "model"')
    [backup] = tmp_path.glob("settings.json.agent-link-*.bak")
    assert backup.read_text() == before


def test_real_claude_adds_up_user_project_and_local(run: Run, tmp_path: Path, fake_tools: list[str]) -> None:
    config_dir = Path(os.environ["CLAUDE_CONFIG_DIR"])
    config_dir.mkdir(parents=True)
    (config_dir / "settings.json").write_text(json.dumps({"permissions": {"allow": [RULE]}}))
    project = tmp_path / "proj"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "settings.local.json").write_text(json.dumps({"permissions": {"ask": [f"{RULE}__list_agents"]}}))
    data = as_json(run("approvals", "check", "--real-claude", "--project", project, "--json"))
    claude = data["claude"]
    assert [f["scope"] for f in claude["files"]] == ["user", "project", "local"]
    assert [o["tool"] for o in claude["overridden"]] == ["list_agents"] and claude["missing"] == []
    listed_admin = sorted(set(ROLE_ADMIN_TOOLS) - {"agent_link_tools"})  # the ones the fake listing (conftest) has
    assert claude["roleAdmin"]["allowed"] == listed_admin  # the server-wide rule allows them
    assert run("approvals", "check", "--real-claude", "--project", project).exit_code == 1


# -- health -----------------------------------------------------------------------------------

def test_health_section_per_host_found(run: Run, tmp_path: Path) -> None:
    assert as_json(run("health", "--json"))["sections"]["approvals"] == {"toolSource": "this process's tools"}
    codex_home = Path(os.environ["CODEX_HOME"])
    codex_home.mkdir(parents=True)
    (codex_home / "config.toml").write_text(ENABLED + PROMPT)
    Path(os.environ["CLAUDE_CONFIG_DIR"]).mkdir(parents=True)
    section = as_json(run("health", "--json"))["sections"]["approvals"]
    assert section["codex"]["status"] == "incomplete" and "list_agents" in section["codex"]["missing"]
    assert section["codex"]["fix"] == f"agent-link approvals apply --codex-config {codex_home / 'config.toml'}"
    assert section["claude"]["status"] == "incomplete" and set(READ_ONLY) <= set(section["claude"]["missing"])
    assert "message_agent" not in section["claude"]["missing"] and section["claude"]["heldBack"] == []
    assert section["claude"]["fix"].startswith("agent-link approvals apply --claude-settings ")
    (codex_home / "config.toml").write_text("[broken")
    assert as_json(run("health", "--json"))["sections"]["approvals"]["codex"]["status"] == "unreadable"


# -- the real listing -------------------------------------------------------------------------

def test_scratch_env_drops_host_and_agent_link_variables(tmp_path: Path) -> None:
    env = scratch_env("codex", str(tmp_path), {"CODEX_THREAD_ID": "t", "CLAUDE_SESSION_ID": "s", "PATH": "/bin",
                                               "AGENT_LINK_DISABLE_PLUGINS": "roles", "AGENT_LINK_STATE_DIR": "/real"})
    assert "CODEX_THREAD_ID" not in env and "CLAUDE_SESSION_ID" not in env and "AGENT_LINK_DISABLE_PLUGINS" not in env
    assert env["PATH"] == "/bin" and env["AGENT_LINK_HOST"] == "codex" and env["AGENT_LINK_CODEX_AUTOSTART"] == "0"
    assert env["AGENT_LINK_STATE_DIR"].startswith(str(tmp_path)) and env["HOME"].startswith(str(tmp_path))


def test_the_listing_server_is_no_separate_mailbox_in_health(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its throwaway state folder is recorded (the settings plugin's record of the state dirs in use, which health warns
    about) in its own cache, not the user's: XDG_CACHE_HOME is set."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    env = scratch_env("codex", str(tmp_path / "scratch"))
    assert env["XDG_CACHE_HOME"] == str(tmp_path / "scratch" / "cache")
    list_running_tools("codex")
    record = tmp_path / "cache" / "agent-link" / "state-dirs.json"
    assert not record.exists() or "agent-link-approvals-" not in record.read_text()


def test_the_running_server_lists_what_this_installation_registers(monkeypatch: pytest.MonkeyPatch) -> None:
    # a disabled plugin here must not shrink the list: the listing server runs without it
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "roles")
    listed = list_running_tools("codex")
    monkeypatch.delenv("AGENT_LINK_DISABLE_PLUGINS")
    app = App.create()
    try:
        assert listed == tools_of_app(app, "codex")  # a host's server lists its default profile
        profiles = "agent_link_tools" in app.hooks.tools()  # without the profiles plugin a server lists every tool
    finally:
        app.close()
    names = {t.name for t in listed}
    if profiles:  # the role-admin tools are not listed to a host by default; agent_link_tools (held back too) reaches them
        assert "agent_link_tools" in names and not (set(ROLE_ADMIN_TOOLS) - {"agent_link_tools"}) & names
    assert {"list_agents", "message_agent"} <= names
    assert all(t.open_world is False for t in listed)
    assert {t.name for t in listed if t.is_read_only} >= {"list_agents", "agent_link_health"}
    assert not any(t.is_read_only for t in listed if t.name in ("message_agent", "reply_agent_link_message"))


def test_check_says_how_to_install_and_what_shadows_the_plugin(run: Run, tmp_path: Path, fake_tools: list[str]) -> None:
    """After ``agent-link uninstall codex`` the marketplace is gone too, so ``codex plugin add``
    fails: the advice is ``agent-link install codex``. A top-level server of the plugin server's
    name (the original Agent Link's entry) is reported: it keeps the check from being complete."""
    path = tmp_path / "config.toml"
    path.write_text('model = "x"\n')
    result = run("approvals", "check", "--codex-config", path)
    assert result.exit_code == 1 and "(install it: agent-link install codex)" in result.stdout, result.stdout
    assert "codex plugin add" not in result.stdout
    path.write_text(ENABLED + f'[plugins."{PID}".mcp_servers.{SRV}]\ndefault_tools_approval_mode = "approve"\n'
                    f'[mcp_servers.{SRV}]\ncommand = "/usr/bin/true"\n')
    result = run("approvals", "check", "--codex-config", path)
    assert result.exit_code == 1 and "INCOMPLETE" in result.stdout
    assert f"SHADOWED: this config has its own [mcp_servers.{SRV}] table" in result.stdout, result.stdout
    assert "agent-link import-legacy" in result.stdout


def test_claude_allow_rules_without_the_plugin_installed_are_not_complete(
        run: Run, tmp_path: Path, fake_tools: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """After ``agent-link uninstall claude`` the allow rules the person added (``approvals
    apply``; install adds none) stay in settings.json, but allow nothing: the check said
    COMPLETE; now it says the plugin is not installed and how to install it."""
    config_dir = tmp_path / "claude"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config_dir))
    path = config_dir / "settings.json"
    (config_dir / "plugins").mkdir(parents=True)
    path.write_text(json.dumps({"permissions": {"allow": [f"{RULE}__{name}" for name in READ_ONLY]}}))
    record = config_dir / "plugins" / "installed_plugins.json"
    record.write_text(json.dumps({"version": 2, "plugins": {}}))  # what `claude plugin uninstall` leaves
    result = run("approvals", "check", "--claude-settings", path)
    assert result.exit_code == 1 and "INCOMPLETE" in result.stdout
    assert "plugin not installed in Claude Code (install it: agent-link install claude)" in result.stdout
    assert as_json(run("approvals", "check", "--claude-settings", path, "--json"))["claude"]["pluginInstalled"] is False
    record.write_text(json.dumps({"version": 2, "plugins": {"agent-link@agent-link": [{"scope": "user"}]}}))
    result = run("approvals", "check", "--claude-settings", path)
    assert result.exit_code == 0 and "  COMPLETE" in result.stdout and "not installed" not in result.stdout
    record.unlink()  # no record (never installed through `claude plugin`): the rules alone decide, as before
    assert run("approvals", "check", "--claude-settings", path).exit_code == 0
