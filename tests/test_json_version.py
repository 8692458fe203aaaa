"""README: "Every ``--json`` is one object with a ``version`` field". One test runs every
command that has ``--json`` (found by walking the command tree with every installed plugin, so
a new command is covered at once) and checks what it prints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pytest

from agent_link_testing.cli_runner import run_main

pytestmark = pytest.mark.installed_plugins

#: the arguments of each command that needs some (anything else runs with --json alone)
ARGS: dict[str, list[str]] = {
    "approvals check": ["--claude-settings", "{tmp}/settings.json"], "approvals apply": ["--claude-settings", "{tmp}/settings.json"],
    "config get": ["state_dir"], "contacts add": ["bob", "team:bob"], "contacts rename": ["bob", "robert"],
    "contacts remove": ["carol"], "endpoints add": ["{tmp}/endpoint.sock"], "endpoints remove": ["{tmp}/endpoint.sock"],
    "find": ["team:bob"], "forks show": ["no-such-job"], "lease": ["file.txt", "--project-root", "{tmp}"], "release": ["--all", "--project-root", "{tmp}"], "reply": ["{mid}", "yes"],
    "search": ["hello"], "send": ["team:bob", "hello"], "show": ["{mid}"], "status": ["{mid}"],
    "wait": ["{mid}", "--timeout-ms", "1"],
}
#: commands whose --json run here is refused (stderr, exit != 0): their success is covered by their own tests
REFUSED = {"forks show", "endpoints add", "endpoints remove", "machines status"}


def json_commands() -> list[str]:
    """Every command (path after ``agent-link``) that has a ``--json`` option."""
    from agent_link_core.cli import build_cli
    from agent_link_core.lazy_command import LazyCommand

    cli = build_cli()
    ctx = cli.make_context("agent-link", ["health"], resilient_parsing=True)
    found: list[str] = []

    def walk(command: Any, path: list[str]) -> None:
        if isinstance(command, LazyCommand):
            command = command.load(ctx)
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), [*path, name])
        elif any(isinstance(p, click.Option) and "--json" in p.opts for p in command.params):
            found.append(" ".join(path))

    walk(cli, [])
    return found


def test_every_json_output_is_one_object_with_a_version(isolated_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the project of the lease
    env = {"AGENT_LINK_ADDRESS": "team:alice"}
    sent = run_main("send", "team:bob", "to answer", "--anticipation", "reply", "--json", env=env)
    mid = json.loads(sent.stdout)["messageId"]
    (tmp_path / "file.txt").write_text("x")
    assert run_main("contacts", "add", "carol", "team:carol", env=env).returncode == 0
    commands = json_commands()
    assert {"config list", "config get", "health", "inbox", "send", "plugins"} <= set(commands)
    printed = {}
    for path in commands:
        args = [a.format(tmp=tmp_path, mid=mid) for a in ARGS.get(path, [])]
        as_who = {**env, "AGENT_LINK_ADDRESS": "team:bob"} if path == "reply" else env
        proc = run_main(*path.split(), *args, "--json", env=as_who)
        if path in REFUSED and proc.returncode != 0:
            continue
        assert proc.stdout.strip(), (path, proc.returncode, proc.stderr)
        data = json.loads(proc.stdout)
        assert isinstance(data, dict) and "version" in data, (path, proc.stdout[:300])  # health's: agent-link's own version
        printed[path] = data
    assert len(printed) >= len(commands) - len(REFUSED)
