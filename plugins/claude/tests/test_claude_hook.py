"""The Claude hook adapter (``agent-link hook claude <Event>``) and its launcher in hooks/."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

import agent_link_claude
from agent_link_claude import hook
from agent_link_core.app import App
from agent_link_core.config import load_config
from agent_link_core.hook import HookContext
from agent_link_core.model import Caller
from agent_link_testing.locks import hold_write_lock

A = "11111111-1111-4111-8111-111111111111"
ADDR = f"claude:{A}"
REPO = Path(agent_link_claude.__file__).resolve().parents[3]
LAUNCHER = REPO / "plugins" / "claude" / "agent_link_claude" / "host_plugin" / "hooks" / "agent-link.sh"
ALICE = Caller("test:alice", "config", "test")
BOB = Caller("test:bob", "config", "test")


@pytest.fixture
def app(fake_claude):
    fake_claude.write_transcript(A)
    application = App.create()
    yield application
    application.close()


def send(app: App, sender: Caller = ALICE, anticipation: str = "reply", body: str = "secret body text") -> str:
    outcome = anyio.run(lambda: app.send(caller=sender, to=ADDR, body=body, anticipation=anticipation))
    return outcome.message["id"]


def age(app: App, message_id: str, ms: int = 60_000) -> None:
    """Pretend the message was delivered ``ms`` ago (and its reminders were sent that long ago)."""
    with app.store.write() as conn:
        conn.execute("UPDATE messages SET first_delivered_at = first_delivered_at - ?, delivered_at = delivered_at - ? WHERE id = ?",
                     (ms, ms, message_id))
        conn.execute("UPDATE reminders SET at = at - ? WHERE message_id = ?", (ms, message_id))


def run(event: str, payload: dict) -> dict | None:
    return hook.handle(event, {"hook_event_name": event, **payload}, HookContext(load_config()))


def test_nothing_is_printed_without_a_database_or_mail(app: App) -> None:
    for event in ("SessionStart", "UserPromptSubmit", "Stop"):
        assert run(event, {"session_id": A}) is None
    app.close()
    os.unlink(app.config.db_path)
    assert run("UserPromptSubmit", {"session_id": A}) is None


def test_pending_note_on_session_start_and_prompt_without_bodies(app: App) -> None:
    send(app)
    send(app, BOB)
    for event in ("SessionStart", "UserPromptSubmit"):
        out = run(event, {"session_id": A, "source": "startup", "prompt": "hi"})
        assert set(out) == {"hookSpecificOutput"}
        assert out["hookSpecificOutput"]["hookEventName"] == event
        note = out["hookSpecificOutput"]["additionalContext"]
        assert "2 peer messages" in note and "test:alice" in note and "test:bob" in note
        assert "read_agent_link_inbox" in note and "secret body text" not in note
    # the hook never marks anything delivered: the note repeats until the inbox is read
    assert app.mailbox.count_open(ADDR, undelivered_only=True) == 2
    app.inbox(Caller(ADDR, "env", "claude"))
    assert run("UserPromptSubmit", {"session_id": A}) is None  # delivered, reminder not due yet


def test_reminders_only_on_prompt_and_once_per_number(app: App) -> None:
    mid = send(app)
    app.mailbox.mark_delivered(mid, "inbox")
    age(app, mid)
    assert run("SessionStart", {"session_id": A}) is None  # reminders never on SessionStart
    out = run("UserPromptSubmit", {"session_id": A})
    text = out["hookSpecificOutput"]["additionalContext"]
    assert "reminder 1 of 3" in text and "reply_agent_link_message" in text and "secret" not in text
    assert run("UserPromptSubmit", {"session_id": A}) is None  # reminder 1 was claimed; 2 is not due yet
    rows = app.store.conn.execute("SELECT n, via, to_addr FROM reminders WHERE message_id = ?", (mid,)).fetchall()
    assert [tuple(r) for r in rows] == [(1, "claude-prompt-hook", ADDR)]


def test_stop_blocks_once_per_interval_and_never_loops(app: App) -> None:
    mid = send(app)
    app.mailbox.mark_delivered(mid, "inbox")
    age(app, mid)
    # the host is already continuing because of a block: never block then
    assert run("Stop", {"session_id": A, "stop_hook_active": True}) is None
    out = run("Stop", {"session_id": A, "stop_hook_active": False})
    assert out["decision"] == "block" and "reminder 1 of 3" in out["reason"] and "secret" not in out["reason"]
    assert run("Stop", {"session_id": A, "stop_hook_active": True}) is None
    with app.store.write() as conn:  # reminder 2 falls due while the block is still recent
        conn.execute("UPDATE reminders SET at = at - 60000")
    assert run("Stop", {"session_id": A}) is None
    with app.store.write() as conn:  # one interval after the block
        conn.execute("UPDATE nudge_blocks SET at = at - 60000, bucket = bucket - 2")
    again = run("Stop", {"session_id": A})
    assert again["decision"] == "block" and "reminder 2 of 3" in again["reason"]
    assert app.store.conn.execute("SELECT COUNT(*) FROM nudge_blocks").fetchone()[0] == 2
    vias = {r[0] for r in app.store.conn.execute("SELECT via FROM reminders")}
    assert vias == {"claude-stop-hook"}


def test_stop_never_blocks_for_fyi_or_undelivered_mail(app: App) -> None:
    fyi = send(app, anticipation="fyi")
    app.mailbox.mark_delivered(fyi, "inbox")
    age(app, fyi)
    send(app)  # reply expected, but never delivered: no reminder clock yet
    assert run("Stop", {"session_id": A}) is None


def test_bad_payloads_are_ignored(app: App) -> None:
    send(app)
    assert hook.handle("SessionStart", {"session_id": A, "hook_event_name": "Stop"}, HookContext(load_config())) is None
    for bad in ({}, {"session_id": 5}, {"session_id": "a b"}, {"session_id": "x" * 200}, {"session_id": "claude:x"}):
        assert run("SessionStart", bad) is None
    assert run("PreToolUse", {"session_id": A}) is None


# -- through the command line and the plugin's launcher ---------------------------------------


def launch(event: str, stdin: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # the plugin folder names no executable: the launcher runs the one AGENT_LINK_BIN names
    env = {**os.environ, "CLAUDE_PLUGIN_ROOT": str(LAUNCHER.parents[1]),
           "AGENT_LINK_BIN": str(Path(sys.executable).with_name("agent-link")), **(env_extra or {})}
    return subprocess.run(["sh", str(LAUNCHER), "hook", "claude", event], input=stdin, capture_output=True,
                          text=True, env=env, timeout=30)


def test_launcher_runs_the_hook_and_prints_one_json_line(app: App) -> None:
    send(app)
    done = launch("UserPromptSubmit", json.dumps({"session_id": A, "hook_event_name": "UserPromptSubmit", "prompt": "x"}))
    assert done.returncode == 0, done.stderr
    [line] = done.stdout.splitlines()
    assert json.loads(line)["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    beat = Path(app.config.state_dir) / "hooks" / "claude-UserPromptSubmit.last"
    assert beat.is_file()  # the heartbeat health reads


def test_a_prompt_and_a_stop_never_wait_for_another_processs_write_lock(app: App) -> None:
    send(app, BOB)  # not delivered yet: the note about it is a read
    mid = send(app)
    app.mailbox.mark_delivered(mid, "inbox")
    age(app, mid)  # its reminder is due: claiming it is a write
    slow = {"AGENT_LINK_BUSY_TIMEOUT_MS": "600000"}  # a hook that waited for the lock would outlast the holder
    prompt = json.dumps({"session_id": A, "hook_event_name": "UserPromptSubmit", "prompt": "x"})
    with hold_write_lock(app.store.path) as held:
        noted = launch("UserPromptSubmit", prompt, slow)
        stopped = launch("Stop", json.dumps({"session_id": A, "hook_event_name": "Stop", "stop_hook_active": False}), slow)
        assert not held.waited, "the hook held the prompt up for another process's write lock"
    note = json.loads(noted.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "test:bob" in note and "reminder" not in note  # the note is shown; the reminder waits for the lock
    assert (stopped.returncode, stopped.stdout) == (0, "")  # no block while another process writes
    assert app.mailbox.state(app.mailbox.get_row(mid)).reminder_count == 0  # nothing claimed, nothing lost
    again = json.loads(launch("UserPromptSubmit", prompt).stdout)["hookSpecificOutput"]["additionalContext"]
    assert "reminder 1 of 3" in again  # the next prompt claims and shows it


@pytest.mark.parametrize("stdin", ["", "not json", "[1]", '{"session_id": null}'])
def test_launcher_fails_open_on_bad_input(app: App, stdin: str) -> None:
    done = launch("Stop", stdin)
    assert done.returncode == 0 and done.stdout == ""


def test_launcher_fails_open_without_agent_link(tmp_path: Path) -> None:
    empty_root = tmp_path / "plugin"
    (empty_root / "hooks").mkdir(parents=True)
    done = subprocess.run(["sh", str(LAUNCHER), "hook", "claude", "Stop"], input='{"session_id":"x"}', capture_output=True,
                          text=True, timeout=30, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "CLAUDE_PLUGIN_ROOT": str(empty_root)})
    assert (done.returncode, done.stdout) == (0, "")
    # the MCP server stands in with no tools, so the session starts without agent-link
    opening = '{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}\n'
    server = subprocess.run(["sh", str(LAUNCHER), "mcp"], input=opening, capture_output=True, text=True, timeout=30,
                            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "CLAUDE_PLUGIN_ROOT": str(empty_root)})
    assert server.returncode == 0 and json.loads(server.stdout.splitlines()[0])["id"] == 1 and "AGENT_LINK_BIN" in server.stderr
    other = subprocess.run(["sh", str(LAUNCHER), "health"], capture_output=True, text=True, timeout=30,
                           env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "CLAUDE_PLUGIN_ROOT": str(empty_root)})
    assert other.returncode == 127 and "AGENT_LINK_BIN" in other.stderr


def test_launcher_prefers_agent_link_bin(tmp_path: Path) -> None:
    fake = tmp_path / "fake-agent-link"
    fake.write_text("#!/bin/sh\necho \"fake $*\"\n")
    fake.chmod(0o755)
    done = subprocess.run(["sh", str(LAUNCHER), "--version"], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "AGENT_LINK_BIN": str(fake), "CLAUDE_PLUGIN_ROOT": str(LAUNCHER.parents[1])})
    assert done.stdout.strip() == "fake --version"


@pytest.mark.parametrize("event", ["UserPromptSubmit", "Stop"])
def test_hook_path_imports_no_heavy_modules(app: App, event: str) -> None:
    """Undelivered mail only (no reminder can be due): a prompt's note and a stop are reads through sqlite3's C module,
    with neither the store nor the sqlite3 package (which imports datetime)."""
    send(app)
    code = (
        "import sys, io, json\n"
        "sys.stdin = io.StringIO(json.dumps({'session_id': %r, 'hook_event_name': %r}))\n"
        "from agent_link_core.hook import main\n"
        "main(['claude', %r])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'pydantic', 'click', 'pluggy', 'anyio', 'jsonschema',"
        " 'sqlite3') or m == 'agent_link_core.store')\n"
        "mine = sorted(m for m in sys.modules if m.startswith('agent_link_claude'))\n"
        "print(json.dumps([heavy, mine]), file=sys.stderr)\n"
    ) % (A, event, event)
    # the first run after plugins change builds the prompt-hook registry through pluggy
    subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    heavy, mine = json.loads(done.stderr.strip().splitlines()[-1])
    assert ("peer message" in done.stdout) is (event == "UserPromptSubmit")
    assert heavy == [] and mine == ["agent_link_claude", "agent_link_claude.hook", *(["agent_link_claude.stop"] if event == "Stop" else [])]


def test_stop_before_the_plugin_made_its_table_blocks_nothing(fake_claude) -> None:
    """A database no process has opened with the claude plugin yet (made by the core alone) has no
    ``nudge_blocks``: the Stop hook blocks nothing and fails nothing; the next App makes the table."""
    fake_claude.write_transcript(A)
    core_only = App.create(env={**os.environ, "AGENT_LINK_LOAD_PLUGINS": ""})
    try:
        mid = send(core_only)
        core_only.mailbox.mark_delivered(mid, "inbox")
        age(core_only, mid)
        assert run("Stop", {"session_id": A}) is None
    finally:
        core_only.close()
    app = App.create()
    try:
        out = run("Stop", {"session_id": A})
        assert out is not None and out["decision"] == "block"
        assert app.store.conn.execute("SELECT COUNT(*) FROM nudge_blocks").fetchone()[0] == 1
    finally:
        app.close()
