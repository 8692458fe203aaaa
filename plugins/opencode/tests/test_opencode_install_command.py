"""``agent-link install opencode`` / ``uninstall opencode`` on a config under a temporary HOME:
the MCP server and the JS plugin are added (once, however often it runs), and uninstall leaves
the person's other settings as they were; a config that is not plain JSON is refused untouched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

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
    # private, whatever the umask: the folders install made, the plugin and the record (it holds the config's old text)
    for made in (plugin_file, plugin_file.with_name("installs.json")):
        assert made.stat().st_mode & 0o777 == 0o600, made
    for made in (plugin_file.parent, plugin_file.parent.parent, plugin_file.parent.parent.parent):
        assert made.stat().st_mode & 0o777 == 0o700, made
    # the JS plugin runs this installation's agent-link for its hooks (lease guard, mail note)
    assert "tool.execute.before" in staged and f"const AGENT_LINK = {json.dumps(AGENT_LINK)};" in staged
    assert {k: v for k, v in installed.items() if k not in ("mcp", "plugin")} == {k: v for k, v in USER_CONFIG.items() if k not in ("mcp", "plugin")}
    assert installed["mcp"]["mine"] == USER_CONFIG["mcp"]["mine"]

    health = run(["health", "--json"], tmp_path, AGENT_LINK_STATE_DIR=str(tmp_path / "state"))
    assert json.loads(health.stdout)["harnesses"]["opencode"]["install"] == {"config": str(config), "mcpServer": True, "callerPlugin": True, "read": [str(config)]}

    again = run(["install", "opencode"], tmp_path)
    assert again.returncode == 0, again.stderr
    assert json.loads(config.read_text()) == installed

    gone = run(["uninstall", "opencode"], tmp_path)
    assert gone.returncode == 0, gone.stderr
    assert json.loads(config.read_text()) == USER_CONFIG
    assert not plugin_file.exists() and not (tmp_path / "data" / "agent-link").exists()
    health = run(["health", "--json"], tmp_path, AGENT_LINK_STATE_DIR=str(tmp_path / "state"))
    assert json.loads(health.stdout)["harnesses"]["opencode"]["install"] == {"config": str(config), "mcpServer": False, "callerPlugin": False, "read": [str(config)]}
    twice = run(["uninstall", "opencode"], tmp_path)
    assert twice.returncode == 0 and json.loads(config.read_text()) == USER_CONFIG, twice.stderr


def test_opencode_install_creates_a_missing_config_and_uninstall_empties_it(tmp_path: Path) -> None:
    config = tmp_path / "elsewhere" / "opencode.json"
    done = run_here(["install", "opencode"], tmp_path, OPENCODE_CONFIG=str(config))
    assert done.returncode == 0, done.stderr
    assert set(json.loads(config.read_text())) == {"mcp", "plugin"}
    assert run_here(["uninstall", "opencode", "--config", str(config)], tmp_path).returncode == 0
    assert not config.exists()  # install created it


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
    assert done.returncode == 1 and "has comments" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert config.read_text() == text


def test_opencode_install_refuses_a_config_whose_mcp_is_not_an_object(tmp_path: Path) -> None:
    config = tmp_path / "opencode.json"
    config.write_text('{"mcp": ["x"]}')
    done = run_here(["install", "opencode", "--config", str(config)], tmp_path)
    assert done.returncode == 1 and "an `mcp` that is not an object" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert config.read_text() == '{"mcp": ["x"]}'


def global_config(tmp_path: Path, name: str = "opencode.json") -> Path:
    folder = tmp_path / "home" / ".config" / "opencode"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


def plugin_uri(tmp_path: Path) -> str:
    return (tmp_path / "data" / "agent-link" / "host-plugins" / "opencode" / "agent-link.js").as_uri()


def test_opencode_install_writes_through_a_symlinked_config(tmp_path: Path) -> None:
    """A dotfiles setup: the config is a link, which stays one; its target gets the entries, and
    uninstall gives the target back its bytes."""
    dotfiles = tmp_path / "dotfiles" / "opencode.json"
    dotfiles.parent.mkdir()
    original = json.dumps(USER_CONFIG, indent=2) + "\n"
    dotfiles.write_text(original)
    link = global_config(tmp_path)
    link.symlink_to(dotfiles)
    assert run_here(["install", "opencode"], tmp_path).returncode == 0
    assert link.is_symlink() and link.resolve() == dotfiles
    assert plugin_uri(tmp_path) in json.loads(dotfiles.read_text())["plugin"]
    assert run_here(["uninstall", "opencode"], tmp_path).returncode == 0
    assert link.is_symlink() and dotfiles.read_text() == original


def _failing_replace(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    real = os.replace

    def replace(src: Any, dst: Any) -> None:
        if Path(dst).name == name:
            raise PermissionError(1, "Operation not permitted", str(dst))
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)


def test_opencode_install_and_uninstall_on_a_config_that_cannot_be_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a read-only (``chattr +i``) file: one line naming the file and what to do, exit 1,
    no temp file left, the config as it was, and nothing of install left behind."""
    config = global_config(tmp_path)
    config.write_text(json.dumps(USER_CONFIG))
    with monkeypatch.context() as patched:
        _failing_replace(patched, "opencode.json")
        done = run_here(["install", "opencode"], tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr and "unexpected" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and f"cannot write {config}" in done.stderr, done.stderr
    assert "writable" in done.stderr and plugin_uri(tmp_path) in done.stderr
    assert sorted(p.name for p in config.parent.iterdir()) == ["opencode.json"]
    assert json.loads(config.read_text()) == USER_CONFIG and not (tmp_path / "data" / "agent-link").exists()

    assert run_here(["install", "opencode"], tmp_path).returncode == 0
    installed = config.read_text()
    with monkeypatch.context() as patched:
        _failing_replace(patched, "opencode.json")
        gone = run_here(["uninstall", "opencode"], tmp_path)
    assert gone.returncode == 1 and "Traceback" not in gone.stderr and len(gone.stderr.strip().splitlines()) == 1, gone.stderr
    assert f"cannot write {config}" in gone.stderr and "remove" in gone.stderr
    assert sorted(p.name for p in config.parent.iterdir()) == ["opencode.json"] and config.read_text() == installed


@pytest.mark.parametrize(("name", "text", "reason"), [
    ("opencode.jsonc", '{\n  // my theme\n  "theme": "tokyonight"\n}\n', "has comments or trailing commas (JSONC, first at line 2, column 3)"),
    ("opencode.json", '{"model": "x", ', "is not valid JSON (Expecting property name enclosed in double quotes, line 1, column 16)"),
    ("opencode.json", '{"theme": "x",}', "has comments or trailing commas (JSONC, first at line 1, column 14)"),
])
def test_opencode_install_dry_run_refuses_what_the_real_run_refuses(tmp_path: Path, name: str, text: str, reason: str) -> None:
    """The same one line and exit 1 for both, saying why (comments, or the parser's error with
    its line and column) and the entries to add by hand; nothing written, not even the JS plugin."""
    config = global_config(tmp_path, name)
    config.write_text(text)
    dry = run_here(["install", "opencode", "--dry-run"], tmp_path)
    real = run_here(["install", "opencode"], tmp_path)
    assert dry.returncode == real.returncode == 1 and dry.stderr == real.stderr, (dry.stderr, real.stderr)
    assert f"{config} {reason}" in real.stderr and "Traceback" not in real.stderr and "--dry-run" not in real.stderr
    assert '"agent-link": {"type": "local"' in real.stderr and json.dumps(plugin_uri(tmp_path)) in real.stderr
    assert "nothing changed" not in dry.stdout
    assert config.read_text() == text and sorted(p.name for p in config.parent.iterdir()) == [name]
    assert not (tmp_path / "data").exists()


def test_opencode_install_edits_the_jsonc_whose_plugin_list_opencode_uses(tmp_path: Path) -> None:
    """opencode reads opencode.jsonc after opencode.json, its `plugin` list replacing the other:
    install edits the .jsonc (plain JSON) and writes no opencode.json; health reads the files as
    opencode merges them."""
    jsonc = global_config(tmp_path, "opencode.jsonc")
    jsonc.write_text('{"plugin": ["opencode-wakatime"]}\n')
    assert run_here(["install", "opencode"], tmp_path).returncode == 0
    assert json.loads(jsonc.read_text())["plugin"] == ["opencode-wakatime", plugin_uri(tmp_path)]
    assert not jsonc.with_name("opencode.json").exists()
    health = run_here(["health", "--json"], tmp_path, AGENT_LINK_STATE_DIR=str(tmp_path / "state"))
    assert json.loads(health.stdout)["harnesses"]["opencode"]["install"] == {
        "config": str(jsonc), "mcpServer": True, "callerPlugin": True, "read": [str(jsonc)]}
    assert run_here(["uninstall", "opencode"], tmp_path).returncode == 0
    assert jsonc.read_text() == '{"plugin": ["opencode-wakatime"]}\n'


def test_opencode_health_sees_a_jsonc_plugin_list_hiding_the_installed_one(tmp_path: Path) -> None:
    config = global_config(tmp_path)
    assert run_here(["install", "opencode"], tmp_path).returncode == 0
    jsonc = config.with_name("opencode.jsonc")
    jsonc.write_text('{\n  // mine\n  "plugin": ["opencode-wakatime"],\n}\n')
    health = run_here(["health", "--json"], tmp_path, AGENT_LINK_STATE_DIR=str(tmp_path / "state"))
    assert json.loads(health.stdout)["harnesses"]["opencode"]["install"] == {
        "config": str(jsonc), "mcpServer": True, "callerPlugin": False, "read": [str(config), str(jsonc)]}
    # install now targets the .jsonc, which has comments: refused with the entries to add by hand
    again = run_here(["install", "opencode"], tmp_path)
    assert again.returncode == 1 and f"{jsonc} has comments" in again.stderr and plugin_uri(tmp_path) in again.stderr


def test_opencode_uninstall_from_one_config_keeps_the_plugin_another_lists(tmp_path: Path) -> None:
    config = global_config(tmp_path)
    other = tmp_path / "other.json"
    plugin_file = tmp_path / "data" / "agent-link" / "host-plugins" / "opencode" / "agent-link.js"
    assert run_here(["install", "opencode"], tmp_path).returncode == 0
    assert run_here(["install", "opencode", "--config", str(other)], tmp_path).returncode == 0
    gone = run_here(["uninstall", "opencode", "--config", str(other)], tmp_path)
    assert gone.returncode == 0 and f"keep {plugin_file.parent}: {config} still lists its plugin" in gone.stdout, gone.stdout
    assert plugin_file.is_file() and not other.exists()
    # and the other way round: the global config goes, other.json (recorded) keeps the file
    assert run_here(["install", "opencode", "--config", str(other)], tmp_path).returncode == 0
    gone = run_here(["uninstall", "opencode"], tmp_path)
    assert gone.returncode == 0 and f"{other} still lists" in gone.stdout and plugin_file.is_file()
    assert run_here(["uninstall", "opencode", "--config", str(other)], tmp_path).returncode == 0
    assert not (tmp_path / "data" / "agent-link").exists()


def test_opencode_install_keeps_the_format_and_uninstall_the_bytes(tmp_path: Path) -> None:
    config = global_config(tmp_path)
    original = '{\n    "theme": "tokyonight",\n    "plugin": ["opencode-wakatime"],\n    "username": "é"\n}'
    config.write_text(original)
    assert run_here(["install", "opencode"], tmp_path).returncode == 0
    # spliced in: the rest of the text as it was, the new entries in the file's layout
    server = json.dumps({"type": "local", "command": [AGENT_LINK, "mcp"], "environment": {"AGENT_LINK_HOST": "opencode"},
                         "enabled": True}, indent=4).replace("\n", "\n        ")
    assert config.read_text() == (f'{{\n    "theme": "tokyonight",\n    "plugin": ["opencode-wakatime", "{plugin_uri(tmp_path)}"],\n'
                                  f'    "username": "é",\n    "mcp": {{\n        "agent-link": {server}\n    }}\n}}')
    assert run_here(["uninstall", "opencode"], tmp_path).returncode == 0
    assert config.read_text() == original
    # opencode adds a `$schema` to a config that lacks one when it starts: kept, the rest as it was
    assert run_here(["install", "opencode"], tmp_path).returncode == 0
    config.write_text(config.read_text().replace("{", '{\n  "$schema": "https://opencode.ai/config.json",', 1))
    assert run_here(["uninstall", "opencode"], tmp_path).returncode == 0
    assert config.read_text() == original.replace("{", '{\n  "$schema": "https://opencode.ai/config.json",', 1)
    # changed by hand since: rewritten with the file's own indentation
    assert run_here(["install", "opencode"], tmp_path).returncode == 0
    config.write_text(config.read_text().replace("tokyonight", "nord"))
    assert run_here(["uninstall", "opencode"], tmp_path).returncode == 0
    assert config.read_text() == original.replace("tokyonight", "nord").replace("{", '{\n  "$schema": "https://opencode.ai/config.json",', 1)


def test_opencode_uninstall_removes_a_config_install_created(tmp_path: Path) -> None:
    config = global_config(tmp_path)
    assert run_here(["install", "opencode"], tmp_path).returncode == 0 and config.is_file()
    config.write_text(config.read_text().replace("{", '{\n  "$schema": "https://opencode.ai/config.json",', 1))
    assert run_here(["uninstall", "opencode"], tmp_path).returncode == 0
    assert sorted(config.parent.iterdir()) == []


def test_opencode_uninstall_refuses_jsonc_holding_its_entries_and_passes_one_without(tmp_path: Path) -> None:
    config = global_config(tmp_path, "opencode.jsonc")
    text = '{\n  // mine\n  "plugin": [%s]\n}\n' % json.dumps(plugin_uri(tmp_path))
    config.write_text(text)
    dry = run_here(["uninstall", "opencode", "--dry-run"], tmp_path)
    real = run_here(["uninstall", "opencode"], tmp_path)
    assert dry.returncode == real.returncode == 1 and dry.stderr == real.stderr and "Traceback" not in real.stderr
    assert f"{config} has comments" in real.stderr and f"remove \"agent-link\" from its \"mcp\" object and {json.dumps(plugin_uri(tmp_path))}" in real.stderr
    assert config.read_text() == text
    config.write_text('{\n  // mine\n  "theme": "x"\n}\n')
    assert run_here(["uninstall", "opencode"], tmp_path).returncode == 0
    assert config.read_text() == '{\n  // mine\n  "theme": "x"\n}\n'


@pytest.mark.parametrize(("text", "reason"), [
    ("[]", "holds an array, not a JSON object"), ("null", "holds null, not a JSON object"),
    ('"x"', "holds a string, not a JSON object"), ('{"a":1}{"b":2}', "is not valid JSON (Extra data, line 1, column 8)"),
    ('{"a":' * 5000 + "1" + "}" * 5000, "is nested too deeply to read"),
])
def test_opencode_install_names_what_is_wrong_with_a_config(tmp_path: Path, text: str, reason: str) -> None:
    config = tmp_path / "c.json"
    config.write_text(text)
    done = run_here(["install", "opencode", "--config", str(config)], tmp_path)
    assert done.returncode == 1 and f"{config} {reason}; nothing was changed." in done.stderr, done.stderr
    assert config.read_text() == text and not (tmp_path / "data").exists()
