"""A client that closes ``agent-link mcp``'s stdin has left (the MCP stdio shutdown: it closes stdin, waits, then sends
SIGTERM). The server cancels the tool calls it left running and exits at once, and none of them marks mail read: nobody
would receive it. The client process stays alive here (only a dead client was noticed before: by its process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import anyio
import pytest

from agent_link_core.app import App
from agent_link_testing.mcp_client import RawMcpClient, raw_mcp_server

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120), pytest.mark.installed_plugins("waits")]
EXIT_S = 10  # the server exits within this after stdin's end (a wait without a progress token ran ~50 s)


def call(request_id: int, tool: str, arguments: dict[str, object], meta: dict[str, object] | None = None) -> bytes:
    params: dict[str, object] = {"name": tool, "arguments": arguments}
    if meta:
        params["_meta"] = meta
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}).encode()


def send_as_bob(text: str) -> None:
    env = {**os.environ, "AGENT_LINK_ADDRESS": "team:bob"}
    done = subprocess.run([sys.executable, "-m", "agent_link_core", "send", "team:carol", text, "--anticipation", "fyi"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def carol_unread() -> list[str]:
    app = App.create({**os.environ, "AGENT_LINK_ADDRESS": "team:carol"})
    try:
        rows = app.store.conn.execute("SELECT body FROM messages WHERE recipient = 'team:carol' AND delivered_at IS NULL").fetchall()
        return [row["body"] for row in rows]
    finally:
        app.close()


async def leave(client: RawMcpClient) -> float:
    """Close the server's stdin (the client lives on) and return how long the server took to exit, in seconds."""
    assert client.process.stdin is not None
    started = time.monotonic()
    await client.process.stdin.aclose()
    with anyio.fail_after(EXIT_S):
        await client.process.wait()
    return time.monotonic() - started


@pytest.mark.parametrize("meta", [None, {"progressToken": "p"}], ids=["capped", "progress"])
async def test_a_wait_left_running_ends_with_the_connection_and_takes_no_mail(meta: dict[str, object] | None) -> None:
    async with raw_mcp_server({"AGENT_LINK_ADDRESS": "team:carol"}) as client:
        await client.send(call(1, "wait_for_agent", {"agent": "team:bob", "timeoutMs": 600_000}, meta))
        await anyio.sleep(1.0)  # the wait runs
        assert client.process.stdin is not None
        await client.process.stdin.aclose()
        await anyio.sleep(0.5)  # the server has read the end of its input
        await anyio.to_thread.run_sync(send_as_bob, "sent after carol's client left")
        with anyio.fail_after(EXIT_S):
            await client.process.wait()
        assert client.process.returncode == 0
    assert carol_unread() == ["sent after carol's client left"]  # still queued for carol's next session


async def test_a_server_exits_at_once_when_its_client_leaves_during_a_wait() -> None:
    async with raw_mcp_server({"AGENT_LINK_ADDRESS": "team:carol"}) as client:
        await client.send(call(1, "wait_for_agent", {"agent": "team:bob", "timeoutMs": 600_000}, {"progressToken": "p"}))
        await anyio.sleep(1.0)  # the wait runs
        assert await leave(client) < EXIT_S  # not when the wait ends (here: 10 minutes)
        assert client.process.returncode == 0


def bob_replies(text: str) -> None:
    env = {**os.environ, "AGENT_LINK_ADDRESS": "team:bob"}
    app = App.create(env)
    try:
        [row] = app.store.conn.execute("SELECT id FROM messages WHERE recipient = 'team:bob'").fetchall()
    finally:
        app.close()
    done = subprocess.run([sys.executable, "-m", "agent_link_core", "reply", row["id"], text], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr


async def test_a_send_waiting_for_its_reply_leaves_the_reply_unread_when_its_client_left() -> None:
    async with raw_mcp_server({"AGENT_LINK_ADDRESS": "team:carol"}) as client:
        await client.send(call(1, "message_agent", {"to": "team:bob", "message": "question", "waitForReply": True,
                                                    "timeoutMs": 600_000}, {"progressToken": "p"}))
        await anyio.sleep(1.5)  # sent; the wait runs
        assert client.process.stdin is not None
        await client.process.stdin.aclose()
        await anyio.sleep(0.5)
        await anyio.to_thread.run_sync(bob_replies, "the answer")
        with anyio.fail_after(EXIT_S):
            await client.process.wait()
    assert carol_unread() == ["the answer"]
