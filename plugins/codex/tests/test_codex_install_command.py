"""``agent-link install codex`` / ``uninstall codex`` with a fake ``codex`` that records its
arguments (the real host: test_codex_realhost_install_command.py): the steps, their order, the
dry run, ``AGENT_LINK_CODEX_BIN``, and the one-line error when the CLI is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_link_testing.cli_runner import run_main

AGENT_LINK = str(Path(sys.executable).with_name("agent-link"))
PLUGIN_ID = "codex-agent-link@agent-link"


def fake_host(tmp_path: Path) -> tuple[Path, Path]:
    log = tmp_path / "calls.jsonl"
    fake = tmp_path / "bin" / "codex"
    fake.parent.mkdir()
    fake.write_text(f"#!{sys.executable}\nimport json, sys\nopen({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
                    "if sys.argv[1:4] == ['plugin', 'marketplace', 'remove']:\n"
                    "    print('Error: marketplace `agent-link` is not configured or installed'); sys.exit(1)\n")
    fake.chmod(0o755)
    return fake, log


def run(args: list[str], tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "data"),
           "CODEX_HOME": str(tmp_path / "home" / ".codex")}
    env.pop("AGENT_LINK_CODEX_BIN", None)
    env.update(extra)
    return subprocess.run([AGENT_LINK, *args], capture_output=True, text=True, env=env, timeout=120)


def run_here(args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **extra: str) -> subprocess.CompletedProcess[str]:
    """:func:`run` as the console script runs it in this process, with the install's last step
    (four MCP servers started to keep their opening: the first test checks it) answering at once."""
    from agent_link_codex import opening

    monkeypatch.setattr(opening, "keep_opening_answers", lambda folder, env=None: ["kept"])
    return run_main(*args, env={"HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "data"),
                                "CODEX_HOME": str(tmp_path / "home" / ".codex"), "AGENT_LINK_CODEX_BIN": None, **extra})


def calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_install_runs_the_host_cli_in_order_and_stages_the_folder(tmp_path: Path) -> None:
    fake, log = fake_host(tmp_path)
    folder = tmp_path / "data" / "agent-link" / "host-plugins" / "codex"
    done = run(["install", "codex"], tmp_path, AGENT_LINK_CODEX_BIN=str(fake))
    assert done.returncode == 0, done.stderr
    assert calls(log) == [["plugin", "marketplace", "add", str(folder)], ["plugin", "add", PLUGIN_ID]]
    market = json.loads((folder / ".agents" / "plugins" / "marketplace.json").read_text())
    assert market["name"] == "agent-link" and market["plugins"][0]["source"] == {"source": "local", "path": "./"}
    assert (folder / ".codex-plugin" / "mcp.json").is_file()
    assert f"installed_bin={AGENT_LINK}" in (folder / "hooks" / "agent-link.sh").read_text()
    assert "Restart Codex" in done.stdout and "/hooks" in done.stdout
    # the launcher can answer the first thread's opening at every handshake revision (opening.py)
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    cache_home = Path(os.environ.get("XDG_CACHE_HOME") or tmp_path / "home" / ".cache")
    [kept] = (cache_home / "agent-link" / "launcher").iterdir()
    for revision in HANDSHAKE_PROTOCOL_VERSIONS:
        assert json.loads("{" + (kept / f"tools-list-{revision}").read_text() + "}")["result"]["tools"]
        assert (kept / f"initialize-{revision}").is_file()


def test_reinstall_never_removes_the_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``codex plugin remove`` deletes the person's own tables for the plugin from config.toml
    (the approval table install itself recommends): install never runs it. A marketplace of the
    same name registered from another folder is removed first; one registered from agent-link's
    folder is left as it is. Codex's copies of earlier plugin versions are removed."""
    fake, log = fake_host(tmp_path)
    folder = tmp_path / "data" / "agent-link" / "host-plugins" / "codex"
    config = tmp_path / "home" / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    old = tmp_path / "home" / ".codex" / "plugins" / "cache" / "agent-link" / "codex-agent-link" / "0.0.1"
    old.mkdir(parents=True)
    for source, expected in ((str(tmp_path / "checkout"), [["plugin", "marketplace", "remove", "agent-link"]]),
                             (str(folder), [])):
        config.write_text(f'[marketplaces.agent-link]\nsource_type = "local"\nsource = "{source}"\n')
        log.unlink(missing_ok=True)
        done = run_here(["install", "codex", "--host-bin", str(fake)], tmp_path, monkeypatch)
        assert done.returncode == 0, done.stderr
        assert calls(log) == [*expected, ["plugin", "marketplace", "add", str(folder)], ["plugin", "add", PLUGIN_ID]]
        assert not old.exists()


def test_dry_run_changes_nothing(tmp_path: Path) -> None:
    fake, log = fake_host(tmp_path)
    for verb in ("install", "uninstall"):
        done = run([verb, "codex", "--dry-run", "--host-bin", str(fake)], tmp_path)
        assert done.returncode == 0 and "dry run" in done.stdout and "plugin marketplace" in done.stdout
    assert calls(log) == [] and not (tmp_path / "data").exists()


def test_uninstall_removes_the_empty_cache_folder_and_ours(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake, log = fake_host(tmp_path)
    assert run_here(["install", "codex", "--host-bin", str(fake)], tmp_path, monkeypatch).returncode == 0
    cache = tmp_path / "home" / ".codex" / "plugins" / "cache" / "agent-link"
    cache.mkdir(parents=True)
    done = run_here(["uninstall", "codex", "--host-bin", str(fake)], tmp_path, monkeypatch)
    assert done.returncode == 0, done.stderr
    assert calls(log)[-2:] == [["plugin", "remove", PLUGIN_ID], ["plugin", "marketplace", "remove", "agent-link"]]
    assert not cache.exists() and not (tmp_path / "data" / "agent-link").exists()


def test_missing_host_cli_is_one_line_and_exit_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    done = run_here(["uninstall", "codex"], tmp_path, monkeypatch, PATH=str(tmp_path))
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "`codex` is not on PATH" in done.stderr and "--host-bin" in done.stderr


def test_shell_completion_offers_the_host_subcommands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # README "Shell completion": click's completion sees the commands plugins add
    done = run_here([], tmp_path, monkeypatch, COMP_WORDS="agent-link install c", COMP_CWORD="2", _AGENT_LINK_COMPLETE="bash_complete")
    assert done.returncode == 0 and "plain,codex" in done.stdout.splitlines(), done.stdout + done.stderr


def test_the_approval_hint_names_only_installed_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the approvals plugin the hint is a command that runs; without it (not installed or
    not loaded) it is the config.toml line and how to get the command, never a missing command."""
    fake, _ = fake_host(tmp_path)
    config = tmp_path / "home" / ".codex" / "config.toml"
    done = run_here(["install", "codex", "--host-bin", str(fake)], tmp_path, monkeypatch)
    assert done.returncode == 0, done.stderr
    assert f"`agent-link approvals apply --codex-config {config}`" in done.stdout
    without = run_here(["install", "codex", "--host-bin", str(fake)], tmp_path, monkeypatch, AGENT_LINK_LOAD_PLUGINS="codex")
    assert without.returncode == 0, without.stderr
    assert "agent-link approvals apply`" in without.stdout and "install-everyday.sh" in without.stdout
    assert "`agent-link approvals apply --codex-config" not in without.stdout
    assert f'default_tools_approval_mode = "approve" in {config}' in without.stdout
    hint = without.stdout.split("the approvals plugin, not installed here")[0]
    assert "agent-link approvals" not in hint


ORIGINALS = '\n# the original Agent Link\n[mcp_servers.codex-agent-link]\ncommand = "/usr/bin/true"\nargs = []\n'


def test_install_says_when_a_server_of_its_name_shadows_the_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The original Agent Link's ``[mcp_servers.codex-agent-link]`` shadows the plugin's server
    (Codex runs that one; threads get no agent-link tools). Install does its steps, then says so
    in one line with the fix and exits 1 (it said "Done" before); the dry run warns."""
    fake, log = fake_host(tmp_path)
    config = tmp_path / "home" / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('model = "x"\n' + ORIGINALS)
    before = config.read_bytes()
    dry = run_here(["install", "codex", "--host-bin", str(fake), "--dry-run"], tmp_path, monkeypatch)
    assert dry.returncode == 0 and "warning: " in dry.stderr and "[mcp_servers.codex-agent-link]" in dry.stderr
    done = run_here(["install", "codex", "--host-bin", str(fake)], tmp_path, monkeypatch)
    assert done.returncode == 1 and "Done." not in done.stdout and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    for said_here in (f"{config} has a [mcp_servers.codex-agent-link] table of its own (command: /usr/bin/true)",
                      "shadows agent-link's Codex plugin server", "no agent-link tools",
                      f"Remove that table from {config}", "agent-link import-legacy", "the plugin is installed"):
        assert said_here in done.stderr, done.stderr
    assert ["plugin", "add", PLUGIN_ID] in calls(log) and config.read_bytes() == before  # installed; the table is theirs


def test_health_names_the_server_that_shadows_the_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "home" / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    env = {"AGENT_LINK_STATE_DIR": str(tmp_path / "state")}
    config.write_text(f'[plugins."{PLUGIN_ID}"]\nenabled = true\n' + ORIGINALS)
    done = run_here(["health", "--json"], tmp_path, monkeypatch, **env)
    section = json.loads(done.stdout)["sections"]["codexPlugin"]
    assert done.returncode == 1 and section["enabled"] is True
    assert section["shadowedBy"]["table"] == "[mcp_servers.codex-agent-link]"
    assert "shadows agent-link's Codex plugin server" in section["problem"]["message"]
    text = run_here(["health"], tmp_path, monkeypatch, **env)
    assert "problem in codexPlugin:" in text.stdout and "agent-link import-legacy" in text.stdout
    config.write_text(ORIGINALS)  # the plugin not installed: nothing it shadows
    done = run_here(["health", "--json"], tmp_path, monkeypatch, **env)
    section = json.loads(done.stdout)["sections"]["codexPlugin"]
    assert section["enabled"] is False and "problem" not in section
