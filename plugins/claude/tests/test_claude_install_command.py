"""``agent-link install claude`` / ``uninstall claude`` with a fake ``claude`` that records its
arguments (the real host: test_claude_realhost_install_command.py): the steps, their order,
the dry run, and the one-line error when the CLI is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agent_link_testing.cli_runner import run_main

AGENT_LINK = str(Path(sys.executable).with_name("agent-link"))


def fake_host(tmp_path: Path) -> tuple[Path, Path]:
    log = tmp_path / "calls.jsonl"
    fake = tmp_path / "bin" / "claude"
    fake.parent.mkdir()
    fake.write_text(f"#!{sys.executable}\nimport json, sys\nopen({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
                    "if sys.argv[1:3] == ['plugin', 'uninstall']:\n    print('Plugin not found'); sys.exit(1)\n")
    fake.chmod(0o755)
    return fake, log


def run(args: list[str], tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "data"),
           "CLAUDE_CONFIG_DIR": str(tmp_path / "home" / ".claude"), **extra}
    return subprocess.run([AGENT_LINK, *args], capture_output=True, text=True, env=env, timeout=120)


def run_here(args: list[str], tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """:func:`run` as the console script runs it, in this process (the install and the dry
    run keep a real process each)."""
    return run_main(*args, env={"HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "data"),
                                "CLAUDE_CONFIG_DIR": str(tmp_path / "home" / ".claude"), **extra})


def calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_install_runs_the_host_cli_in_order_and_stages_the_folder(tmp_path: Path) -> None:
    fake, log = fake_host(tmp_path)
    folder = tmp_path / "data" / "agent-link" / "host-plugins" / "claude"
    done = run(["install", "claude", "--host-bin", str(fake)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert calls(log) == [["plugin", "uninstall", "agent-link@agent-link"], ["plugin", "marketplace", "remove", "agent-link"],
                          ["plugin", "marketplace", "add", str(folder)], ["plugin", "install", "agent-link@agent-link"]]
    market = json.loads((folder / ".claude-plugin" / "marketplace.json").read_text())
    assert market["name"] == "agent-link" and market["plugins"][0]["source"] == "./"
    assert f"installed_bin={AGENT_LINK}" in (folder / "hooks" / "agent-link.sh").read_text()
    assert "Restart your Claude Code sessions" in done.stdout and "--allowedTools" in done.stdout


def test_dry_run_changes_nothing(tmp_path: Path) -> None:
    fake, log = fake_host(tmp_path)
    for verb in ("install", "uninstall"):
        done = run([verb, "claude", "--dry-run", "--host-bin", str(fake)], tmp_path)
        assert done.returncode == 0 and "dry run" in done.stdout and "plugin marketplace" in done.stdout
    assert calls(log) == [] and not (tmp_path / "data").exists()


def test_uninstall_removes_the_leftover_cache_and_the_folder(tmp_path: Path) -> None:
    fake, log = fake_host(tmp_path)
    assert run_here(["install", "claude", "--host-bin", str(fake)], tmp_path).returncode == 0
    leftover = tmp_path / "home" / ".claude" / "plugins" / "cache" / "agent-link" / "agent-link" / "0.1.0"
    leftover.mkdir(parents=True)
    (leftover / ".orphaned_at").write_text("1")
    done = run_here(["uninstall", "claude", "--host-bin", str(fake)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert calls(log)[-2:] == [["plugin", "uninstall", "agent-link@agent-link"], ["plugin", "marketplace", "remove", "agent-link"]]
    assert not leftover.parents[1].exists() and not (tmp_path / "data" / "agent-link").exists()
    assert "mailbox stays" in done.stdout


def test_missing_host_cli_is_one_line_and_exit_1(tmp_path: Path) -> None:
    done = run_here(["install", "claude"], tmp_path, PATH=str(tmp_path))
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "`claude` is not on PATH" in done.stderr and "--host-bin" in done.stderr
    failing = tmp_path / "claude"
    failing.write_text("#!/bin/sh\necho 'marketplace broken' >&2\nexit 4\n")
    failing.chmod(0o755)
    broken = run_here(["install", "claude", "--host-bin", str(failing)], tmp_path)
    assert broken.returncode == 1 and "step 2 failed (exit 4): marketplace broken" in broken.stderr
