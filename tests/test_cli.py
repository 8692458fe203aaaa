"""The CLI: JSON for scripts, one-line errors with exit codes, subprocess use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import click
from click.testing import CliRunner

from agent_link_core import hookimpl
from agent_link_core.cli import build_cli
from agent_link_testing.cli_plugins import add_cli_plugins
from agent_link_testing.cli_runner import invoke, seed


@pytest.mark.installed_plugins
def test_health_json_is_one_object(isolated_env: Path) -> None:
    result = invoke("health", "--json")
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert data["stateDir"]["path"] == str(isolated_env)
    assert {"codex", "claude", "roles", "receipts"} <= set(data["plugins"]["loaded"])


@pytest.mark.installed_plugins
def test_health_names_a_section_problem_and_exits_1(isolated_env: Path) -> None:
    """A roles file that does not parse breaks every send to role:...: health must say so."""
    pytest.importorskip("agent_link_roles")  # the nested run without the roles plugin
    isolated_env.mkdir(parents=True, exist_ok=True)
    (isolated_env / "roles.json").write_text('{"roles": [ broken\n')
    result = invoke("health")
    assert result.exit_code == 1 and "problem in roles: roles.json is not valid JSON" in result.output
    as_json = invoke("health", "--json")
    assert as_json.exit_code == 1
    assert [p["section"] for p in json.loads(as_json.output)["problems"]] == ["roles"]


def test_section_problems_reads_problem_lines_and_error_objects_only() -> None:
    from agent_link_core.health import section_problems

    found = section_problems({
        "roles": {"error": {"code": "state_io_error", "message": "bad file", "hint": "fix it"}},
        "machines": {"problem": "the relay is not running", "error": "timed out"},  # error: the relay's last answer
        "forkJobs": {"error": 2},  # a count of failed jobs, not a problem of the section
        "broken": {"error": "RuntimeError: boom", "fix": "..."},  # a failed hook: listed as a plugin problem
        "fine": {"error": None},
    })
    assert found == [{"section": "roles", "message": "bad file", "hint": "fix it"},
                     {"section": "machines", "message": "the relay is not running", "hint": None}]


@pytest.mark.parametrize("command", [("health",), ("inbox", "--as", "test:bob"), ("send", "test:bob", "hi", "--from", "test:alice")])
def test_a_bad_number_is_one_line_naming_value_and_range_on_every_command(monkeypatch: pytest.MonkeyPatch, command: tuple[str, ...]) -> None:
    """As a bad flag or path is: never ignored silently on some commands and warned on others."""
    monkeypatch.setenv("AGENT_LINK_REMINDER_LIMIT", "99")
    result = invoke(*command)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "AGENT_LINK_REMINDER_LIMIT='99' is invalid: expected a whole number from 0 to 20" in result.output


def test_relative_state_dir_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_STATE_DIR", "relative/path")
    result = invoke("health")
    assert result.exit_code == 1
    assert "AGENT_LINK_STATE_DIR" in result.output and "Traceback" not in result.output


@pytest.mark.installed_plugins
def test_plugins_json_and_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "roles")
    data = json.loads(invoke("plugins", "--json").output)
    assert "roles" in data["blocked"] and "roles" not in data["loaded"]


def test_inbox_reads_and_marks(isolated_env: Path) -> None:
    mid = seed()
    peek = json.loads(invoke("inbox", "--as", "test:bob", "--peek", "--json").output)
    assert peek["markedDelivered"] == [] and peek["messages"][0]["id"] == mid
    human = invoke("inbox", "--as", "test:bob")
    # People read the text itself; --envelope shows what a model sees.
    assert human.exit_code == 0 and "  hello <bob>" in human.output and "<agent-link-message" not in human.output
    assert "from:    test:alice" in human.output
    model = invoke("inbox", "--as", "test:bob", "--envelope")
    assert "hello &lt;bob&gt;" in model.output and "<agent-link-message" in model.output
    again = json.loads(invoke("inbox", "--as", "test:bob", "--json").output)
    assert again["markedDelivered"] == [] and again["messages"][0]["delivery"] == "delivered"


def test_reading_another_agents_mailbox_peeks_unless_asked(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A person reading carol's mail (AGENT_LINK_INSPECT_ALL) leaves it for carol; --mark-read
    marks it as carol's own read would; carol's own read marks it."""
    monkeypatch.setenv("AGENT_LINK_INSPECT_ALL", "1")
    monkeypatch.delenv("AGENT_LINK_ADDRESS", raising=False)
    seed("test:carol", "fyi")
    looked = CliRunner().invoke(build_cli(), ["inbox", "--as", "test:carol", "--json"], catch_exceptions=False)
    assert looked.exit_code == 0 and json.loads(looked.output)["markedDelivered"] == []
    assert "--mark-read" in CliRunner().invoke(build_cli(), ["inbox", "--help"]).output
    both = CliRunner().invoke(build_cli(), ["inbox", "--as", "test:carol", "--peek", "--mark-read"])
    assert both.exit_code == 2 and "choose one of --peek and --mark-read" in both.output
    own = json.loads(invoke("inbox", "--as", "test:carol", "--json").output)  # carol herself
    assert len(own["markedDelivered"]) == 1
    mid = seed("test:carol", "second")
    marked = CliRunner().invoke(build_cli(), ["inbox", "--as", "test:carol", "--mark-read", "--json"], catch_exceptions=False)
    assert json.loads(marked.output)["markedDelivered"] == [mid]


def test_inbox_without_identity_exits_1() -> None:
    result = invoke("inbox")
    assert result.exit_code == 1
    assert "AGENT_LINK_ADDRESS" in result.output


def test_bad_usage_exits_2() -> None:
    assert invoke("inbox", "--as", "not an address").exit_code == 2
    assert invoke("inbox", "--limit", "0").exit_code == 2
    assert invoke("no-such-command").exit_code == 2


@pytest.mark.parametrize("argv", [["--help"], ["inbox"]])
def test_ctrl_c_while_click_parses_is_one_line_and_exit_130(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C before a command runs (the root's --help listing the commands, a command looked up: both load the plugins)
    ends as documented (README.md, exit codes): exit 130 and one line, never click's "Aborted!" with exit 1."""
    from agent_link_core.cli import AgentLinkGroup, run_click

    class Interrupted(AgentLinkGroup):
        def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
            raise KeyboardInterrupt

        def list_commands(self, ctx: click.Context) -> list[str]:
            raise KeyboardInterrupt

    saved, sys.argv = sys.argv, ["agent-link", *argv]
    try:
        with pytest.raises(SystemExit) as ended:
            run_click(click.group(cls=Interrupted)(lambda: None))
    finally:
        sys.argv = saved
    assert ended.value.code == 130
    assert capsys.readouterr().err == "agent-link: stopped by Ctrl-C (what it had finished stays done).\n"


def test_console_script_subprocess(isolated_env: Path) -> None:
    exe = Path(sys.executable).with_name("agent-link")
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60, env=dict(os.environ))
    assert out.returncode == 0 and "agent-link" in out.stdout
    hook = subprocess.run([str(exe), "hook", "nosuchhost", "Event"], input="{}", capture_output=True, text=True, timeout=60)
    assert hook.returncode == 0 and hook.stdout == ""
    seed()
    inbox = subprocess.run([str(exe), "inbox", "--json"], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, AGENT_LINK_ADDRESS="test:bob"))
    assert inbox.returncode == 0 and json.loads(inbox.stdout)["address"] == "test:bob"


@pytest.mark.parametrize("made_before", [False, True])  # True: by another umask or an older version (0644)
def test_debug_logs_go_to_a_private_file(isolated_env: Path, monkeypatch: pytest.MonkeyPatch, made_before: bool) -> None:
    import logging

    monkeypatch.setenv("AGENT_LINK_DEBUG", "1")
    logger = logging.getLogger("agent_link_core")
    before = list(logger.handlers)
    log_file = isolated_env / "logs" / "agent-link.log"
    if made_before:
        log_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        log_file.write_text("old line\n")
        log_file.chmod(0o644)
    try:
        assert invoke("health", "--json").exit_code == 0
        assert log_file.exists() and oct(log_file.stat().st_mode & 0o777) == "0o600"
        for handler in logger.handlers:
            handler.flush()
        assert "hook agent_link_schema()" in log_file.read_text()  # the hook-call trace
    finally:
        for handler in logger.handlers[len(before):]:
            handler.close()
        logger.handlers[:] = before
        logger.setLevel(logging.NOTSET)


def test_mcp_server_exits_promptly_on_sigterm(isolated_env: Path) -> None:
    import signal
    import time

    proc = subprocess.Popen([sys.executable, "-m", "agent_link_core", "mcp"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
        proc.stdin.write((json.dumps(init) + "\n").encode())
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)  # stdin stays open: the server must not wait for it
        proc.wait(timeout=15)
        assert time.monotonic() - start < 10
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.anyio
async def test_mcp_server_with_a_bad_setting_still_answers() -> None:
    from agent_link_testing.mcp_client import agent_link_mcp

    async with agent_link_mcp({"AGENT_LINK_ADDRESS": "Not An Address"}) as client:
        assert "agent_link_health" in await client.tools()
        result = await client.call("agent_link_health", {})
    assert result["ok"] is False and "AGENT_LINK_ADDRESS" in result["error"]["message"]


def test_corrupt_database_is_one_clear_line(isolated_env: Path) -> None:
    seed()
    db = isolated_env / "agent-link.db"
    import sqlite3

    with sqlite3.connect(db) as conn:  # move everything from the WAL into the main file
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with open(db, "r+b") as fh:  # damage a data page, keep the header
        fh.seek(3 * 4096)
        fh.write(b"\xff" * 4096)
    exe = Path(sys.executable).with_name("agent-link")
    out = subprocess.run([str(exe), "inbox", "--as", "test:bob"], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, AGENT_LINK_ADDRESS="test:bob"))
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "damaged" in out.stderr or "could not be opened" in out.stderr
    health = subprocess.run([str(exe), "health", "--json"], capture_output=True, text=True, timeout=60,
                            env=dict(os.environ, AGENT_LINK_ADDRESS="test:bob"))
    if health.returncode == 0:
        assert json.loads(health.stdout)["database"]["integrity"] != "ok"


class Flagger:
    """A plugin giving the core's ``send`` an option of its own, as a harness plugin may."""

    @hookimpl
    def agent_link_register_commands(self, cli: click.Group) -> None:
        send = cli.commands["send"]
        if send.callback is not None:  # the command being run; the others are placeholders
            send.params.append(click.Option(["--flagger-only"], help="Added by the flagger plugin."))


def test_a_plugin_option_stays_with_the_invocation_that_loaded_the_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    """Core commands are module-level; each root group gets its own copy, so an option a
    plugin adds does not outlive that invocation's plugins."""
    with monkeypatch.context() as patch:
        add_cli_plugins(patch, ("flagger", Flagger()))
        assert "--flagger-only" in CliRunner().invoke(build_cli(), ["send", "--help"]).output
    again = CliRunner().invoke(build_cli(), ["send", "--help"])
    assert again.exit_code == 0 and "--flagger-only" not in again.output


def test_a_command_imports_only_its_own_module() -> None:
    """The root group imports a core command's module when that command is looked up."""
    code = ("import sys; from click.testing import CliRunner; from agent_link_core.cli import build_cli;"
            "CliRunner().invoke(build_cli(), ['health', '--help']);"
            "print(sorted(m for m in sys.modules if m.startswith('agent_link_core.commands.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.strip() == "['agent_link_core.commands.health']"


def test_a_bad_timestamp_keeps_its_example() -> None:
    from agent_link_core.cli_text import error_line
    from agent_link_core.errors import AgentLinkError
    from agent_link_core.mailbox import parse_iso_ms

    for value, example in (("soon", "2030-01-31T17:00:00Z"), ("2030-01-31T17:00:00", "2030-01-31T17:00:00+01:00")):
        with pytest.raises(AgentLinkError) as caught:
            parse_iso_ms(value, "since")
        assert f"--since: expected ISO 8601 date-time with a timezone (e.g. {example})." in error_line(caught.value, "wait")
