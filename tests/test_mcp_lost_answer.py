"""A tool call (an inbox read, a wait) whose answer cannot be written (the client closed the read end of the server's stdout, its stdin still
open) marks no mail read: the next read shows it, and marks it once its answer was written (docs/behaviour.md §4).
Over the host kit's transport (with its start-up front or without) and the MCP SDK's (the core alone: the kit hidden as
tests/test_mcp_without_hostkit.py does)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from agent_link_testing.mcp_client import exchange_lines

from agent_link_core.app import App

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
CALLS = {"inbox": ("read_agent_link_inbox", {}), "wait": ("wait_for_agent", {"agent": "team:bob", "timeoutMs": 5000})}


def delivered(env: dict[str, str]) -> tuple[object, int]:
    """The message's ``delivered_at`` and how many ``delivered`` events it has."""
    app = App.create(env)
    try:
        return (app.store.conn.execute("SELECT delivered_at FROM messages").fetchone()[0],
                app.store.conn.execute("SELECT COUNT(*) FROM message_events WHERE kind = 'delivered'").fetchone()[0])
    finally:
        app.close()


@pytest.mark.installed_plugins("waits")
@pytest.mark.parametrize("tool", ["inbox", "wait"])
@pytest.mark.parametrize("kind", ["front-relaying", "front-handed-over", "no-front", "core-alone"])
def test_a_read_whose_answer_is_not_written_marks_nothing(tmp_path: Path, kind: str, tool: str) -> None:
    name, arguments = CALLS[tool]
    read = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_DATA_HOME": str(tmp_path / "data"),
           "XDG_CACHE_HOME": str(tmp_path / "cache"), "AGENT_LINK_STATE_DIR": str(tmp_path / "state")}
    # the start-up front relays the answers until a tools/list went by (agent_link_hostkit.fastfront), then hands over
    opening = {"jsonrpc": "2.0", "id": 2, "method": "tools/list" if kind == "front-handed-over" else "ping"}
    if kind == "no-front":
        env["AGENT_LINK_MCP_FRONT"] = "0"
    elif kind == "core-alone":
        shadow = tmp_path / "path" / "agent_link_hostkit"
        shadow.mkdir(parents=True)
        (shadow / "__init__.py").write_text("raise ImportError('agent-link-hostkit is not installed')\n")
        env["PYTHONPATH"] = str(shadow.parent)
    sent = subprocess.run([sys.executable, "-m", "agent_link_core", "send", "--json", "team:alice", "hello"],
                          env={**env, "AGENT_LINK_ADDRESS": "team:bob"}, capture_output=True, text=True, timeout=120)
    assert sent.returncode == 0, sent.stderr
    reader = {**env, "AGENT_LINK_ADDRESS": "team:alice"}
    server = subprocess.Popen([sys.executable, "-m", "agent_link_core", "mcp"], env=reader, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert server.stdin is not None and server.stdout is not None and server.stderr is not None
    try:
        for message in (INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"}, opening):
            server.stdin.write(json.dumps(message).encode() + b"\n")
            server.stdin.flush()
            if "id" in message:
                assert json.loads(server.stdout.readline())["id"] == message["id"]
        server.stdout.close()  # the client reads no more: the answer to the read cannot be written
        server.stdin.write(json.dumps(read).encode() + b"\n")
        server.stdin.flush()
        with contextlib.suppress(subprocess.TimeoutExpired):  # the broken pipe may end the server, its stdin still open
            server.wait(timeout=5)
    finally:
        server.kill()
        server.wait(timeout=30)
        err = server.stderr.read().decode("utf-8", "replace")
        server.stderr.close()
    assert "read_agent_link_inbox" not in err or "Traceback" not in err, err
    assert delivered(reader) == (None, 0), err
    # the next read shows it, and marks it once its answer was written
    script = b"".join(json.dumps(m).encode() + b"\n" for m in (INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"}, read))
    answers = exchange_lines([sys.executable, "-m", "agent_link_core", "mcp"], script, 2, env=reader)
    result = answers[1]["result"]["structuredContent"]
    assert (result["markedDelivered"] if tool == "inbox" else "envelope" in result.get("reply", {})), result
    assert delivered(reader)[1] == 1


@pytest.mark.installed_plugins("waits")
def test_a_reply_message_agent_waited_for_is_not_marked_when_its_answer_is_not_written(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_DATA_HOME": str(tmp_path / "data"),
           "XDG_CACHE_HOME": str(tmp_path / "cache"), "AGENT_LINK_STATE_DIR": str(tmp_path / "state"), "AGENT_LINK_MCP_FRONT": "0"}
    alice, bob = {**env, "AGENT_LINK_ADDRESS": "team:alice"}, {**env, "AGENT_LINK_ADDRESS": "team:bob"}
    server = subprocess.Popen([sys.executable, "-m", "agent_link_core", "mcp"], env=alice, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert server.stdin is not None and server.stdout is not None
    ask = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "message_agent", "arguments": {
        "to": "team:bob", "message": "question", "waitForReply": True, "timeoutMs": 30000}}}
    try:
        for message in (INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"}, {"jsonrpc": "2.0", "id": 2, "method": "ping"}):
            server.stdin.write(json.dumps(message).encode() + b"\n")
            server.stdin.flush()
            if "id" in message:
                assert json.loads(server.stdout.readline())["id"] == message["id"]
        server.stdout.close()  # the answer (the reply the wait returns) cannot be written
        server.stdin.write(json.dumps(ask).encode() + b"\n")
        server.stdin.flush()
        for _ in range(100):  # bob answers once the question is there
            read = subprocess.run([sys.executable, "-m", "agent_link_core", "inbox", "--json"], env=bob, capture_output=True,
                                  text=True, timeout=120)
            if json.loads(read.stdout)["messages"]:
                break
            time.sleep(0.2)
        question = json.loads(read.stdout)["messages"][0]["id"]
        replied = subprocess.run([sys.executable, "-m", "agent_link_core", "reply", question, "answer"], env=bob,
                                 capture_output=True, text=True, timeout=120)
        assert replied.returncode == 0, replied.stderr
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(timeout=5)
    finally:
        server.kill()
        server.wait(timeout=30)
    app = App.create(alice)
    try:
        row = app.store.conn.execute("SELECT delivered_at FROM messages WHERE recipient = 'team:alice'").fetchone()
        assert row is not None and row[0] is None  # the reply stays unread: alice's next read shows it
    finally:
        app.close()
