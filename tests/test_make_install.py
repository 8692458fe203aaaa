"""`make install`'s quiet steps: npm shows no "new version available" notice, and the browser
step's apt output goes to a log (its tail shown only on failure). npm, apt-get and id are
stand-ins that record how they were called."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from agent_link_testing.hosts import claude_version, codex_version, opencode_version

ROOT = Path(__file__).resolve().parents[1]


def stand_in(folder: Path, name: str, body: str) -> None:
    exe = folder / name
    exe.write_text(f"#!/bin/sh\n{body}\n")
    exe.chmod(0o755)


def test_host_installs_run_npm_without_its_update_notice(tmp_path: Path) -> None:
    if not (ROOT / "hosts" / "node" / "node_modules" / "node" / "bin" / "node").exists():
        pytest.skip("the registry Node is not installed (make hosts)")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "npm.log"
    stand_in(bin_dir, "npm", f'echo "$NPM_CONFIG_UPDATE_NOTIFIER $*" >> {log}')
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    done = subprocess.run(["bash", str(ROOT / "hosts" / "install.sh")], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    assert len(calls) == 3 and all(c.startswith("false ci ") for c in calls), calls
    # each host folder's line names the three pinned hosts, read from its lock file
    for folder, label in ((ROOT / "hosts", "hosts"), (ROOT / "hosts" / "previous", "hosts/previous")):
        pins = f"codex {codex_version(folder)}, claude-code {claude_version(folder)}, opencode-ai {opencode_version(folder)}"
        assert f"hosts: {pins} into {label} " in done.stdout, done.stdout


def test_the_browser_step_keeps_apt_output_in_a_log(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.skip("no make")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in(bin_dir, "id", "echo 0")
    stand_in(bin_dir, "apt-get", 'i=0; while [ $i -lt 300 ]; do echo "Selecting previously unselected package lib$i."; i=$((i+1)); done\n'
                                 '[ -z "$FAIL_APT" ] || { echo "E: Unable to locate package $5" >&2; exit 100; }')
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    venv = tmp_path / "venv"
    args = ["make", "--no-print-directory", "-C", str(ROOT), "browser", "CHROMIUM=no-such-browser-here", f"VENV={venv}"]
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1 and "log: " in done.stdout and "Selecting" not in done.stdout + done.stderr
    assert (venv / "browser.log").read_text().count("Selecting previously unselected") == 600
    failed = subprocess.run(args, capture_output=True, text=True, env={**env, "FAIL_APT": "1"}, timeout=120)
    assert failed.returncode != 0 and "E: Unable to locate package" in failed.stdout + failed.stderr
    assert (failed.stdout + failed.stderr).count("Selecting") <= 40


@pytest.mark.parametrize("folder", ["hosts", "hosts/previous"])
def test_host_locks_list_every_optional_platform_package(folder: str) -> None:
    # `npm ci` refuses a lock that misses an optional dependency of a locked package (opencode-ai
    # names one platform package per system), even one it would never install on this machine
    packages = json.loads((ROOT / folder / "package-lock.json").read_text())["packages"]
    missing = [f"{name} (of {key})" for key, entry in packages.items() if key
               for name in entry.get("optionalDependencies", {}) if f"node_modules/{name}" not in packages]
    assert missing == []
