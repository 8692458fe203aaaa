"""Waits see mail that came before them (issue 18, "Waits"), from a REAL ``claude -p``.

Bob writes to a Claude session while it does not run (no agent-link server of its is up).
When the session is resumed and its model calls ``wait_for_agent {agent: team:bob}``, the
wait returns that unread message at once (``arrivedBeforeWait``) instead of waiting for a new
one and timing out; the next wait returns the next unread one, and only then times out.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from click.testing import CliRunner

from agent_link_core.cli import build_cli
from agent_link_testing.claude_host import mcp_tool_name, plain_server_host
from agent_link_testing.host_process import freeze
from agent_link_testing.messages_stub import MessagesStub, Reply

pytestmark = [pytest.mark.realhost, pytest.mark.timeout(240)]
RUN_TIMEOUT_S = 120.0
WAIT = mcp_tool_name("agent-link", "wait_for_agent")


@pytest.fixture
def stub() -> Iterator[MessagesStub]:
    with MessagesStub() as s:
        yield s


def results(stub: MessagesStub) -> list[dict[str, Any]]:
    """Every tool result the model was sent, oldest first (each once)."""
    out: dict[str, dict[str, Any]] = {}
    for request in stub.main_requests:
        for result in request.tool_results():
            text = result["content"][0]["text"] if isinstance(result["content"], list) else result["content"]
            out.setdefault(result["tool_use_id"], json.loads(text))
    return list(out.values())


def test_a_wait_returns_mail_that_came_while_the_session_was_down(
    stub: MessagesStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_env: Path,
) -> None:
    host, config = plain_server_host(tmp_path, stub, isolated_env, AGENT_LINK_DISABLE_CLAUDE_INBOX="1")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(host.config_dir))
    cwd = tmp_path / "proj"
    cwd.mkdir()
    stub.enqueue("Ready.")
    first = host.run_p("hello", cwd=cwd, args=["--mcp-config", str(config)], timeout_s=RUN_TIMEOUT_S)
    assert first.returncode == 0, first.stderr[-2000:]
    sid = str(json.loads(first.stdout)["session_id"])

    # the session does not run: Bob's mail waits in its mailbox
    sent = []
    for body in ("sent while you were away", "and another"):
        out = CliRunner().invoke(build_cli(), ["send", f"claude:{sid}", body, "--from", "team:bob", "--json"],
                                 catch_exceptions=False)
        sent.append(json.loads(out.stdout)["messageId"])

    stub.enqueue(Reply.tool_use(WAIT, {"agent": "team:bob", "timeoutMs": 60000}),
                 Reply.tool_use(WAIT, {"agent": "team:bob", "timeoutMs": 60000}),
                 Reply.tool_use(WAIT, {"agent": "team:bob", "timeoutMs": 1000}),
                 "Read both.")
    resumed = host.run_p("anything from bob?", cwd=cwd, args=["--mcp-config", str(config), "--resume", sid],
                         timeout_s=RUN_TIMEOUT_S)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert json.loads(resumed.stdout)["session_id"] == sid
    got = results(stub)
    assert [g["ok"] for g in got] == [True, True, True], got
    assert [g["outcome"] for g in got] == ["reply", "reply", "timeout"], got
    assert [g["reply"]["id"] for g in got[:2]] == sent
    assert all(g["arrivedBeforeWait"] is True for g in got[:2])
    assert "while you were away" in got[0]["reply"]["envelope"]


def test_a_wait_whose_claude_died_ends_and_leaves_the_mail_it_found_unread(
    stub: MessagesStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_env: Path,
) -> None:
    """Claude Code is killed (SIGKILL: no goodbye to its servers) while its model waits for Bob,
    and a child of the agent-link server holds the server's stdin open (as a program a plugin
    started would), so no end of input says that the client is gone. The server sees Bob's
    message only after that: it exits by itself (its orphan watch) and what its wait found is
    not counted as delivered (no model could see it): the session's next read gets it."""
    host, config = plain_server_host(tmp_path, stub, isolated_env, AGENT_LINK_DISABLE_CLAUDE_INBOX="1")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(host.config_dir))
    spec = json.loads(config.read_text())
    entry = spec["mcpServers"]["agent-link"]
    entry["args"] = ["-c", 'sleep 120 & exec "$0" "$@"', entry["command"], *entry["args"]]
    entry["command"] = "/bin/sh"
    config.write_text(json.dumps(spec))
    cwd = tmp_path / "proj"
    cwd.mkdir()
    stub.enqueue(Reply.tool_use(WAIT, {"agent": "team:bob", "timeoutMs": 60000}), "never reached")
    # not run_p: it kills claude's whole process group, the server included, once claude ends
    claude = subprocess.Popen([str(host.binary), "-p", "wait for bob", "--mcp-config", str(config)], cwd=cwd,
                              env=host.environ(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while not (row := _active_wait(isolated_env / "agent-link.db")):
            assert time.monotonic() < deadline and claude.poll() is None, "the wait never started"
            time.sleep(0.05)
        address, pid = row
        server = psutil.Process(pid)
        assert server.ppid() == claude.pid
        [holder] = server.children()
        try:
            freeze(pid=pid)  # the server sees Bob's mail only once its client is gone
            # sent while Claude still runs: a session killed this early may have no transcript
            # yet, and a send to a session nobody can find is refused (CI, Claude Code 2.1.197)
            out = CliRunner().invoke(build_cli(), ["send", address, "are you there?", "--from", "team:bob", "--json"],
                                     catch_exceptions=False)
            sent = json.loads(out.stdout)["messageId"]
            assert sent, out.stdout
            claude.kill()
            claude.wait(10)
        finally:
            os.kill(pid, signal.SIGCONT)
        server.wait(10)  # psutil.TimeoutExpired: the orphaned server still runs
        assert holder.is_running()  # its stdin stayed open all along
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(claude.pid, signal.SIGKILL)
        claude.wait(10)
    db = sqlite3.connect(isolated_env / "agent-link.db")
    try:
        assert db.execute("SELECT delivered_at FROM messages WHERE id = ?", (sent,)).fetchone() == (None,)
    finally:
        db.close()
    monkeypatch.setenv("AGENT_LINK_INSPECT_ALL", "1")  # the person looks into the session's mailbox
    inbox = CliRunner().invoke(build_cli(), ["inbox", "--as", address, "--json"], catch_exceptions=False)
    assert [m["id"] for m in json.loads(inbox.stdout)["messages"]] == [sent], inbox.stdout


def _active_wait(database: Path) -> tuple[str, int] | None:
    """``(address, pid)`` of the wait for team:bob, once a server runs it."""
    if not database.exists():
        return None
    db = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        row = db.execute("SELECT address, pid FROM active_waits WHERE key = 'from:team:bob'").fetchone()
    except sqlite3.OperationalError:  # the server has not made its tables yet
        return None
    finally:
        db.close()
    return (str(row[0]), int(row[1])) if row else None
