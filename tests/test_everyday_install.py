"""The everyday install (README "Install for everyday use"): one command installs the core with
every plugin in ``plugins/``, so every ``agent-link`` command the README names exists after it.
uv and pipx are stand-ins recording their arguments (a real install needs the network)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "install-everyday.sh"
PLUGINS = sorted(str(p.parent) for p in (ROOT / "plugins").glob("*/pyproject.toml"))


def stand_in(folder: Path, name: str, log: Path) -> None:
    exe = folder / name
    exe.write_text(f"#!{sys.executable}\nimport json, sys\nopen({str(log)!r}, 'a').write(json.dumps(sys.argv) + '\\n')\n")
    exe.chmod(0o755)


def install(tmp_path: Path, tools: list[str], *args: str) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    log = tmp_path / "calls.jsonl"
    for name in tools:
        stand_in(folder, name, log)
    env = {**os.environ, "PATH": f"{folder}:/usr/bin:/bin"}
    done = subprocess.run(["sh", str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=60)
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return done, [[Path(c[0]).name, *c[1:]] for c in calls]


def test_uv_installs_the_core_with_every_plugin(tmp_path: Path) -> None:
    done, calls = install(tmp_path, ["uv", "pipx"], "--force")
    assert done.returncode == 0, done.stderr
    expected = ["uv", "tool", "install", "--force", str(ROOT)]
    for plugin in PLUGINS:
        expected += ["--with", plugin]
    assert calls == [expected]
    assert {Path(p).name for p in PLUGINS} >= {"approvals", "web", "codex", "claude", "projects", "forks"}


def test_pipx_installs_the_core_then_injects_every_plugin(tmp_path: Path) -> None:
    done, calls = install(tmp_path, ["pipx"])
    assert done.returncode == 0, done.stderr
    assert calls == [["pipx", "install", str(ROOT)], ["pipx", "inject", "agent-link-core", *PLUGINS]]


def test_dry_run_and_no_installer(tmp_path: Path) -> None:
    done, calls = install(tmp_path, ["uv"], "--dry-run")
    assert done.returncode == 0 and calls == [] and "+ uv tool install" in done.stdout and "dry run" in done.stdout
    bare = tmp_path / "bare"
    bare.mkdir()
    done, calls = install(bare, [])
    assert done.returncode == 2 and "needs uv" in done.stderr and calls == []
    # the README: --dry-run prints the commands, also where no installer is there yet to run them
    done, calls = install(bare, [], "--dry-run")
    assert done.returncode == 0 and calls == [] and f"+ uv tool install {ROOT}" in done.stdout and "dry run" in done.stdout
    assert "neither uv nor pipx is on PATH" in done.stderr


def test_readme_documents_the_one_command() -> None:
    section = (ROOT / "README.md").read_text().split("### Install for everyday use")[1].split("\n### ")[0]
    assert "./install-everyday.sh" in section


@pytest.mark.installed_plugins
def test_every_command_the_readme_names_exists_with_every_plugin() -> None:
    """This environment has every plugin installed (``make install``), as the everyday install does."""
    import click

    from agent_link_core.cli import build_cli

    cli = build_cli()
    names = set(re.findall(r"`agent-link ([a-z][a-z-]+)", (ROOT / "README.md").read_text()))
    ctx = click.Context(cli)
    missing = sorted(n for n in names if cli.get_command(ctx, n) is None)
    assert {"approvals", "web", "install"} <= names and missing == []
