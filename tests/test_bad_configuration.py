"""Bad configuration is a one-line error naming the variable or file and the fix, never a
traceback (issue reproductions, and a sweep of every declared setting)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent_link_core import discovery
from agent_link_core.app import App
from agent_link_core.cli import build_cli
from agent_link_testing.cli_runner import run_main
from agent_link_testing.mcp_client import agent_link_mcp
from agent_link_testing.output import said

NO_HOSTS = {"AGENT_LINK_DISABLE_PLUGINS": "codex claude"}


def run(*args: str, env: dict[str, str] | None = None, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``agent-link ARGS`` in a child process (its own logging set-up, real stderr)."""
    return subprocess.run([sys.executable, "-m", "agent_link_core", *args], env={**os.environ, **NO_HOSTS, **(env or {})},
                          input=stdin, capture_output=True, text=True, timeout=120)


def one_line_error(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert "Traceback" not in done.stderr, done.stderr
    lines = said(done.stderr)
    assert len(lines) == 1, done.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize("log_file", ["/proc/no-such-dir/agent-link.log", "DIR"])
def test_an_unwritable_log_file_falls_back_to_stderr(tmp_path: Path, log_file: str) -> None:
    path = str(tmp_path) if log_file == "DIR" else log_file
    done = run("health", "--json", env={"AGENT_LINK_LOG_LEVEL": "warn", "AGENT_LINK_LOG_FILE": path})
    assert done.returncode == 0 and json.loads(done.stdout)["version"]
    one_line_error(done, "AGENT_LINK_LOG_FILE", path, "stderr")


@pytest.mark.anyio
async def test_the_mcp_server_answers_with_an_unwritable_log_file() -> None:
    env = {**NO_HOSTS, "AGENT_LINK_DEBUG": "1", "AGENT_LINK_LOG_FILE": "/proc/no-such-dir/agent-link.log",
           "AGENT_LINK_ADDRESS": "test:alice"}
    async with agent_link_mcp(env) as client:  # initialize succeeded
        assert (await client.call("agent_link_health"))["ok"]


@pytest.mark.installed_plugins
def test_a_deeply_nested_roles_file_is_one_line(isolated_env: Path) -> None:
    pytest.importorskip("agent_link_roles")
    isolated_env.mkdir(parents=True)
    (isolated_env / "roles.json").write_text("[" * 100_000 + "]" * 100_000)
    done = run("send", "role:builder", "hello", env={"AGENT_LINK_ADDRESS": "test:alice"})
    assert done.returncode == 1
    one_line_error(done, "roles.json", "nested too deeply")


@pytest.mark.installed_plugins
def test_a_receipt_log_that_is_a_directory_loses_nothing(isolated_env: Path, tmp_path: Path) -> None:
    pytest.importorskip("agent_link_receipts")
    done = run("send", "test:bob", "hello", env={"AGENT_LINK_ADDRESS": "test:alice", "AGENT_LINK_RECEIPT_LOG": str(tmp_path)})
    assert done.returncode == 0 and done.stdout.startswith("queued") and "Traceback" not in done.stderr
    about_log = [line for line in done.stderr.splitlines() if "AGENT_LINK_RECEIPT_LOG" in line]
    assert len(about_log) == 1 and str(tmp_path) in about_log[0], done.stderr
    listed = run("receipts", "--json", env={"AGENT_LINK_ADDRESS": "test:alice"})
    assert len(json.loads(listed.stdout)["data"]) == 1  # the database holds the receipt


def test_a_decline_with_invalid_utf8_is_a_one_line_refusal(isolated_env: Path) -> None:
    sent = run("send", "test:bob", "q?", "--anticipation", "reply", "--json", env={"AGENT_LINK_ADDRESS": "test:alice"})
    message_id = json.loads(sent.stdout)["messageId"]
    bad = b"\xff\xfe not utf-8"
    done = subprocess.run([sys.executable, "-m", "agent_link_core", "reply", message_id.encode(), bad, b"--decline"],
                          env={**os.environ, **NO_HOSTS, "AGENT_LINK_ADDRESS": "test:bob"}, capture_output=True, timeout=120)
    # the CLI refuses TEXT that is not UTF-8 (a usage error, exit 2) in one line; nothing is resolved
    assert done.returncode == 2 and b"Traceback" not in done.stderr, done.stderr
    assert len(said(done.stderr.decode(errors="replace"))) == 1 and b"UTF-8" in done.stderr
    status = json.loads(run("status", message_id, "--json", env={"AGENT_LINK_ADDRESS": "test:alice"}).stdout)
    assert status["status"] == "pending"


@pytest.mark.parametrize(("variable", "make"), [("AGENT_LINK_STATE_DIR", "file"), ("AGENT_LINK_MAILBOX_PATH", "dir")])
def test_an_unusable_state_path_names_its_variable(tmp_path: Path, variable: str, make: str) -> None:
    target = tmp_path / "thing"
    target.write_text("x") if make == "file" else target.mkdir()
    done = run("health", env={variable: str(target)})
    assert done.returncode == 1
    one_line_error(done, variable, str(target))


@contextmanager
def unwritable(directory: Path) -> Iterator[None]:
    """``directory`` made unwritable for this user: mode 0500, or as root (whom mode bits do
    not stop; CI runs as root) the immutable attribute, where the file system and the
    container allow it; else the test is skipped, saying why."""
    if os.geteuid() != 0:
        directory.chmod(0o500)
        try:
            yield
        finally:
            directory.chmod(0o700)
        return
    try:
        made = subprocess.run(["chattr", "+i", str(directory)], capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        pytest.skip("running as root without chattr: nothing makes a directory unwritable for root here")
    if made.returncode != 0:
        pytest.skip(f"running as root and chattr +i is refused here ({made.stderr.strip()}): "
                    "nothing makes a directory unwritable for root")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(directory)], check=True, timeout=30)


def test_health_in_a_state_dir_it_cannot_write_reports_what_it_reads(isolated_env: Path) -> None:
    """A read-only state dir: health reads the mailbox, says in one line that the directory
    is not writable, exits 1 (the database refuses writes: health's rule) and changes nothing."""
    bob = {"AGENT_LINK_ADDRESS": "test:bob"}
    assert run("send", "test:bob", "waiting for you", "--from", "test:alice").returncode == 0
    before = sorted(p.name for p in isolated_env.iterdir())
    with unwritable(isolated_env):
        human = run("health", env=bob)
        machine = run("health", "--json", env=bob)
        inbox = run("inbox", "--peek", env=bob)
        after = sorted(p.name for p in isolated_env.iterdir())
    assert human.returncode == 1 and "Traceback" not in human.stderr + human.stdout, human.stderr
    problem_lines = [line for line in human.stdout.splitlines() if "not writable" in line]
    assert len(problem_lines) == 1 and str(isolated_env) in problem_lines[0], human.stdout
    assert "REFUSING WRITES" in human.stdout and "test:bob" in human.stdout
    assert machine.returncode == 1, machine.stderr
    data = json.loads(machine.stdout)
    assert data["stateDir"]["writable"] is False and data["stateDir"]["exists"] is True
    database = data["database"]
    assert database["ok"] is False and database["readOnly"] is True and database["integrity"] == "ok"
    assert database["problem"]["code"] == "state_io_error" and database["problem"]["details"]["reason"] == "read_only"
    assert database["pendingForCaller"] == 1  # what it could read
    assert after == before  # nothing was created or changed beside the database
    # the mail health says can be read is read (tests/test_read_only_state.py: every reader)
    assert inbox.returncode == 0 and "waiting for you" in inbox.stdout, inbox.stderr
    # writable again: health is all right
    assert json.loads(run("health", "--json", env=bob).stdout)["stateDir"]["writable"] is True


BAD_VALUES = ("relative/path", "/proc/no-such-dir/x", "\u202e", "-1", "99999999999999999999", "maybe", "a" * 5000)


def declared_settings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "")
    app = App.create()
    try:
        return sorted(s.name for s in app.hooks.settings())
    finally:
        app.store.close()


# one test per bad value, so parallel workers share the ~800 commands
@pytest.mark.installed_plugins
@pytest.mark.parametrize("value", BAD_VALUES, ids=lambda v: v if len(v) < 30 else "long")
def test_every_setting_with_a_bad_value_gives_no_traceback(monkeypatch: pytest.MonkeyPatch, isolated_env: Path, value: str) -> None:
    names = declared_settings(monkeypatch)
    assert "AGENT_LINK_RECEIPT_LOG" in names and "AGENT_LINK_CODEX_URL" in names  # the plugins' settings too
    # the installed plugins from the entry-point cache, as the console script finds them: a
    # scan of every distribution per command would be a third of this test's ~90 commands
    monkeypatch.setattr(discovery, "USE_CACHE", True)
    runner = CliRunner()
    for name in names:
        if name in ("AGENT_LINK_STATE_DIR", "AGENT_LINK_DISABLE_PLUGINS"):
            continue  # both steer the test itself; covered above
        # undone after each: what the root conftest set comes back (the loops plugin's rate rule off)
        with monkeypatch.context() as each:
            each.setenv(name, value)
            for args in (["health", "--json"], ["send", "test:bob", "hi", "--from", "test:alice"]):
                result: Any = runner.invoke(build_cli(), args)
                assert result.exception is None or isinstance(result.exception, SystemExit), (name, value, args, result.exception)
                assert "Traceback" not in result.output, (name, value, args)
                if result.exit_code not in (0,):
                    assert len(said(result.stderr)) <= 2, (name, value, result.stderr)
                    if args[-1] == "--json":  # nothing, or still one JSON object saying what is wrong
                        assert not result.stdout or json.loads(result.stdout)["ok"] is False, (name, value, result.stdout)
                    else:
                        assert not result.stdout.strip(), (name, value, result.stdout)


def state_files(state: Path, home: Path) -> list[Path]:
    """Every JSON file agent-link or its plugins read from the state dir, the cache and the
    hosts' config dirs (the isolated HOME of the root conftest)."""
    claude = home / ".claude"
    return [
        state / "roles.json",
        state / "plugin-problems.json",
        state / "claude-channels" / "4242.json",
        state / "managed-app-servers" / "4242.json",
        home / ".cache" / "agent-link" / "state-dirs.json",
        claude / "sessions" / "4242.json",
        claude / ".claude.json",
        claude / "settings.json",
        claude / "plugins" / "installed_plugins.json",
    ]


@pytest.mark.installed_plugins
@pytest.mark.parametrize("content", ["[" * 100_000 + "]" * 100_000, "[1, 2]", "\udcff"])
def test_every_state_file_nested_too_deeply_or_not_an_object_is_no_traceback(isolated_env: Path, content: str) -> None:
    home = isolated_env.parent
    for path in state_files(isolated_env, home):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode("utf-8", "surrogateescape"))
    env = {"AGENT_LINK_DISABLE_PLUGINS": "", "AGENT_LINK_ADDRESS": "test:alice"}
    for args in (["health", "--json"], ["sessions", "--json"], ["who"], ["send", "test:bob", "hi"], ["inbox", "--peek"],
                 ["approvals", "check", "--real-claude"], ["plugins"]):
        done = run_main(*args, env=env)  # in this process: the files are read the same way (a traceback propagates)
        assert "Traceback" not in done.stderr, (args, done.stderr)
        if done.returncode != 0:
            assert len(said(done.stderr)) <= 2, (args, done.stderr)


@pytest.mark.parametrize("variable", ["AGENT_LINK_DEBUG", "AGENT_LINK_REMINDER_LIMIT"])
def test_a_bad_setting_leaves_the_help_readable(isolated_env: Path, variable: str) -> None:
    """A help opens no App: a bad value does not hide it (listing the commands used to build the
    harnesses' sender options of ``send``); running a command still says what is wrong."""
    env = {variable: "maybe"}
    top = run("--help", env=env)
    assert top.returncode == 0 and "send" in top.stdout and "inbox" in top.stdout and top.stderr == "", top.stderr
    send_help = run("send", "--help", env=env)
    assert send_help.returncode == 0 and "Usage: agent-link send" in send_help.stdout, send_help.stderr
    sent = run("send", "team:bob", "hi", "--from", "team:alice", env=env)
    assert sent.returncode == 1
    one_line_error(sent, f"{variable}='maybe' is invalid")


@pytest.mark.parametrize("variable", ["AGENT_LINK_STATE_DIR", "AGENT_LINK_LOG_FILE", "AGENT_LINK_MAILBOX_PATH"])
def test_a_path_that_is_no_utf8_is_refused_by_its_variable(isolated_env: Path, variable: str) -> None:
    """A path holding bytes that are no UTF-8 (here 0xFF) is the setting's fault, said once:
    no plugin is blamed for what it could not encode, and --json stays JSON."""
    env = {variable: os.fsdecode(b"/tmp/st\xffate")}  # refused before anything is made there
    for args in (("health",), ("send", "team:bob", "hi", "--from", "team:alice")):
        done = run(*args, env=env)
        assert done.returncode == 1
        one_line_error(done, variable, "\\xffate", "not UTF-8")
    as_json = run("health", "--json", env=env)
    assert json.loads(as_json.stdout)["error"]["code"] == "invalid_arguments"


def test_a_write_in_a_state_dir_it_cannot_write_says_so(isolated_env: Path) -> None:
    """SQLite says only "unable to open database file" when it cannot make its journal in a
    read-only folder: a send or a reply says the folder is not writable, in one line."""
    assert run("send", "test:bob", "first", "--from", "test:alice").returncode == 0
    with unwritable(isolated_env):
        for args in (("send", "test:bob", "second", "--from", "test:alice"), ("reply", "0" * 26, "x", "--from", "test:bob")):
            done = run(*args)
            assert done.returncode == 1
            one_line_error(done, f"its folder {isolated_env} is not writable")


def test_a_host_that_no_installed_harness_serves_is_said_by_health(monkeypatch: pytest.MonkeyPatch, isolated_env: Path) -> None:
    from agent_link_core.health import report
    from agent_link_testing.harnesses import HarnessPlugin, ScriptedHarness

    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", " ".join(sorted(ep.name for ep in discovery.entry_points("agent_link"))))

    def detected(host: str) -> dict[str, Any]:
        app = App.create({**os.environ, "AGENT_LINK_HOST": host}, (HarnessPlugin(ScriptedHarness("sx", ("a",))),))
        try:
            return report(app)["hostDetection"]
        finally:
            app.close()

    assert detected("sx") == {"host": "sx", "source": "AGENT_LINK_HOST", "variable": "AGENT_LINK_HOST"}
    warning = detected("sxx")["warning"]
    assert warning["code"] == "unknown_host" and "'sxx'" in warning["message"] and "(sx)" in warning["hint"]
    human = run("health", env={"AGENT_LINK_HOST": "codx"}).stdout
    assert "warning: AGENT_LINK_HOST names 'codx', which no installed harness serves." in human


def test_an_empty_state_dir_is_refused_in_one_line(tmp_path: Path) -> None:
    """As the tester ran it: ``AGENT_LINK_STATE_DIR= agent-link inbox`` used ~/.agent-link without a word."""
    env = {**os.environ, "HOME": str(tmp_path), "AGENT_LINK_STATE_DIR": "", "AGENT_LINK_ADDRESS": "team:alice"}
    done = subprocess.run([sys.executable, "-m", "agent_link_core", "inbox"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [done.stderr.strip()] and "AGENT_LINK_STATE_DIR='' is invalid" in done.stderr
    assert not (tmp_path / ".agent-link").exists()


def test_a_role_is_never_a_sender(tmp_path: Path) -> None:
    """``AGENT_LINK_ADDRESS=role:boss agent-link send`` stored a message from="role:boss": a role is an indirect address
    (resolved to a session when mail is sent to it), not a session's own (docs/behaviour.md §2). ``--from`` alike."""
    env = {**os.environ, "HOME": str(tmp_path), "AGENT_LINK_STATE_DIR": str(tmp_path / "state")}
    for extra, args in (({"AGENT_LINK_ADDRESS": "role:boss"}, []), ({}, ["--from", "role:boss"])):
        done = subprocess.run([sys.executable, "-m", "agent_link_core", "send", *args, "team:bob", "hi"], env={**env, **extra},
                              capture_output=True, text=True, timeout=120)
        assert done.returncode != 0 and "role" in done.stderr, done.stderr
    app = App.create({**env, "AGENT_LINK_ADDRESS": "team:alice"})
    try:
        assert app.store.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0
    finally:
        app.close()
