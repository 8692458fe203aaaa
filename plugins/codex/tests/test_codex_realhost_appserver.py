"""The production app-server client against the REAL Codex CLI app-server (pinned).

Codex runs from hosts/node_modules (``agent_link_testing.codex_host``) with a temporary HOME and
CODEX_HOME, talking to the stub Responses API (``agent_link_testing.responses_stub``). A
missing binary fails the tests with "run `make hosts`"; they never skip.

Facts observed here beyond docs/hosts/codex.md are noted where they matter:

- Steering only cancels the in-flight model request once its stream has begun (response
  headers / ``response.created`` received). While the request is still unanswered Codex waits
  for it to finish and then sends the follow-up request with the steered input appended.
- The first turn right after ``thread/start`` does not wait for MCP servers: if it starts before
  ``mcpServer/startupStatus/updated {status:"ready"}`` the model's tool list lacks the MCP
  namespace and a scripted call fails with ``unsupported call: mcp__<server><tool>`` (no
  separator in that message). Wait for "ready" first.
- A plain-content MCP tool result reaches the model as a list of ``input_text`` parts
  (``["Wall time: … seconds\nOutput:", "<text>"]``), not only for errors.
- ``[analytics] enabled = false`` in config.toml turns ``analytics_enabled`` off in the
  ``x-codex-turn-metadata`` header.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from ulid import ULID

from agent_link_codex.appserver import AppServerClient, AppServerError, AppServerUnavailable, ConnectionLost, Notification
from agent_link_testing.codex_host import CodexAppServer, McpServerConfig
from agent_link_testing.host_process import freeze
from agent_link_testing.hosts import codex_version
from agent_link_testing.responses_stub import ResponsesStub, mcp_tool_call, text

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(60)]

CLIENT_NAME = "agent-link-realhost-test"
WAIT_MS = 15_000
WAIT_S = WAIT_MS / 1000


def text_input(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value, "text_elements": []}]


@pytest.fixture
async def client(host: CodexAppServer) -> AsyncIterator[AppServerClient]:
    c = await AppServerClient.connect_unix(host.socket_path, refuse_server_requests=True)
    try:
        info = await c.initialize(CLIENT_NAME, "0.0.1", title="agent-link tests", timeout_ms=WAIT_MS)
        assert info["userAgent"].startswith(f"{CLIENT_NAME}/{codex_version()}")
        yield c
    finally:
        await c.close()


async def start_thread(client: AppServerClient) -> str:
    result = await client.request("thread/start", {}, timeout_ms=WAIT_MS)
    assert result["thread"]["source"] == "vscode"
    return str(result["thread"]["id"])


def is_user_message(note: Notification, client_id: str) -> bool:
    item = note.params.get("item") or {}
    return item.get("type") == "userMessage" and item.get("clientId") == client_id


async def test_turn_start_echoes_client_message_id(stub: ResponsesStub, tmp_path: Path) -> None:
    # Also exercises the socket-path quirk: a --listen path longer than the AF_UNIX limit is a
    # symlink that only works through its realpath.
    long_dir = tmp_path / ("s" * max(1, 120 - len(str(tmp_path))))
    long_dir.mkdir()
    sock = long_dir / "app-server.sock"
    assert len(str(sock)) > 108
    with CodexAppServer(stub.base_url, root=tmp_path / "codex", socket_path=sock) as host:
        assert sock.is_symlink()
        assert host.real_socket_path is not None and str(host.real_socket_path).startswith("/tmp/codex-daemon-")
        async with await AppServerClient.connect_unix(sock, refuse_server_requests=True) as client:
            await client.initialize(CLIENT_NAME, "0.0.1", timeout_ms=WAIT_MS)
            thread_id = await start_thread(client)
            message_id = str(ULID())
            prompt = f"hello from the realhost test {message_id}"
            async with client.subscription(thread_id=thread_id) as sub:
                started = await client.request(
                    "turn/start",
                    {"threadId": thread_id, "input": text_input(prompt), "clientUserMessageId": message_id},
                    timeout_ms=WAIT_MS,
                )
                turn_id = started["turn"]["id"]
                assert started["turn"]["status"] == "inProgress"
                echoed = await sub.wait_for(
                    lambda n: n.method == "item/completed" and is_user_message(n, message_id), timeout_ms=WAIT_MS
                )
                assert echoed.params["item"]["content"][0]["text"] == prompt
                done = await sub.wait_for(lambda n: n.method == "turn/completed", timeout_ms=WAIT_MS)
            assert done.params["turn"]["id"] == turn_id
            assert done.params["turn"]["status"] == "completed"
            assert [i.get("text") for i in done.params["turn"]["items"] if i["type"] == "agentMessage"] == ["ok"]

            # the model saw the text, on this thread, from this originator
            assert stub.saw_text(prompt)
            request = stub.wait_for(lambda r: r.contains(prompt), timeout_s=1)
            assert request.thread_id == thread_id
            assert request.headers["originator"] == CLIENT_NAME
            assert json.loads(request.headers["x-codex-turn-metadata"])["analytics_enabled"] is False

            # the echo is also in the thread's history (delivery evidence after a lost answer)
            read = await client.request("thread/read", {"threadId": thread_id, "includeTurns": True}, timeout_ms=WAIT_MS)
            items = [i for t in read["thread"]["turns"] for i in t["items"]]
            assert any(i["type"] == "userMessage" and i.get("clientId") == message_id for i in items)


async def test_turn_steer_into_active_turn(client: AppServerClient, stub: ResponsesStub) -> None:
    thread_id = await start_thread(client)
    hold = stub.hold(timeout_s=WAIT_S)
    # stream_first: Codex only abandons the in-flight request for a steer once its stream began
    stub.enqueue(text("first answer", hold=hold, stream_first=True))
    first_id, steer_id = str(ULID()), str(ULID())
    async with client.subscription(thread_id=thread_id) as sub:
        started = await client.request(
            "turn/start",
            {"threadId": thread_id, "input": text_input("first message"), "clientUserMessageId": first_id},
            timeout_ms=WAIT_MS,
        )
        turn_id = started["turn"]["id"]
        assert await asyncio.to_thread(hold.wait_arrived, WAIT_S), "the model request never reached the stub"

        with pytest.raises(AppServerError) as wrong:
            await client.request(
                "turn/steer",
                {"threadId": thread_id, "expectedTurnId": "not-the-turn", "input": text_input("x")},
                timeout_ms=WAIT_MS,
            )
        assert wrong.value.code == -32600
        assert wrong.value.message == f"expected active turn id `not-the-turn` but found `{turn_id}`"

        steered = await client.request(
            "turn/steer",
            {
                "threadId": thread_id,
                "expectedTurnId": turn_id,
                "input": text_input("steered message"),
                "clientUserMessageId": steer_id,
            },
            timeout_ms=WAIT_MS,
        )
        assert steered == {"turnId": turn_id}
        await sub.wait_for(lambda n: n.method == "item/completed" and is_user_message(n, steer_id), timeout_ms=WAIT_MS)
        done = await sub.wait_for(lambda n: n.method == "turn/completed", timeout_ms=WAIT_MS)
    assert done.params["turn"]["id"] == turn_id and done.params["turn"]["status"] == "completed"
    assert not hold.released
    first, second = stub.responses_requests()[:2]
    assert first.cancelled  # Codex hung up on the held stream
    assert second.user_texts()[-2:] == ["first message", "steered message"]

    with pytest.raises(AppServerError) as idle:
        await client.request(
            "turn/steer", {"threadId": thread_id, "expectedTurnId": turn_id, "input": text_input("y")}, timeout_ms=WAIT_MS
        )
    assert (idle.value.code, idle.value.message) == (-32600, "no active turn to steer")


async def test_thread_read_unknown_thread_is_an_error(client: AppServerClient) -> None:
    unknown = "01a22a93-0000-7000-8000-000000000000"
    with pytest.raises(AppServerError) as info:
        await client.request("thread/read", {"threadId": unknown}, timeout_ms=WAIT_MS)
    # observed: -32600 "thread not loaded: <id>" (as docs/hosts/codex.md §6 says)
    assert (info.value.code, info.value.message, info.value.method) == (-32600, f"thread not loaded: {unknown}", "thread/read")
    with pytest.raises(AppServerError) as bad:
        await client.request("thread/read", {"threadId": "not-a-uuid"}, timeout_ms=WAIT_MS)
    # observed: -32600 "invalid thread id: invalid character: ..." (same text as turn/start)
    assert bad.value.code == -32600 and bad.value.message.startswith("invalid thread id")
    assert client.closed is False  # errors leave the connection usable
    assert await client.request("thread/loaded/list", {}, timeout_ms=WAIT_MS) == {"data": [], "nextCursor": None}


async def test_killed_app_server_fails_pending_request(client: AppServerClient, host: CodexAppServer) -> None:
    thread_id = await start_thread(client)
    # Freeze the server so the request is certainly still pending when the process dies.
    try:
        freeze(pgid=host.pid)
        pending = asyncio.ensure_future(client.request("thread/read", {"threadId": thread_id}, timeout_ms=WAIT_MS))
        await asyncio.sleep(0.2)
        assert not pending.done() and client.pending_count == 1
        killed_at = time.monotonic()
        host.kill()
    finally:
        if host.process is not None and host.process.poll() is None:
            os.killpg(host.pid, signal.SIGCONT)
    with pytest.raises(ConnectionLost) as info:
        await asyncio.wait_for(pending, 5)
    assert time.monotonic() - killed_at < 2
    assert info.value.reason == "connection-lost"
    assert info.value.method == "thread/read"
    assert client.closed_reason == "connection-lost"
    with pytest.raises(ConnectionLost):
        await client.request("thread/list", {}, timeout_ms=WAIT_MS)


# A stdio MCP server with only the standard library: newline-delimited JSON-RPC, tool ping(word).
PING_SERVER = textwrap.dedent(
    r"""
    import json, sys
    TOOL = {"name": "ping", "description": "Answer pong.",
            "inputSchema": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}}
    for line in sys.stdin:
        msg = json.loads(line) if line.strip() else {}
        if msg.get("id") is None:
            continue
        method, result = msg.get("method"), None
        if method == "initialize":
            result = {"protocolVersion": msg["params"].get("protocolVersion", "2025-06-18"),
                      "capabilities": {"tools": {}}, "serverInfo": {"name": "pingsrv", "version": "0.0.1"}}
        elif method == "tools/list":
            result = {"tools": [TOOL]}
        elif method == "tools/call":
            word = msg["params"]["arguments"]["word"]
            result = {"content": [{"type": "text", "text": "pong:" + word}]}
        out = {"jsonrpc": "2.0", "id": msg["id"]}
        out.update({"result": result} if result is not None else {"error": {"code": -32601, "message": method}})
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
    """
)


async def test_stub_scripts_an_mcp_tool_call(stub: ResponsesStub, tmp_path: Path) -> None:
    script = tmp_path / "ping_server.py"
    script.write_text(PING_SERVER)
    servers = {"pingsrv": McpServerConfig(command=sys.executable, args=[str(script)])}
    with CodexAppServer(stub.base_url, root=tmp_path / "codex", mcp_servers=servers) as host:
        async with await AppServerClient.connect_unix(host.socket_path, refuse_server_requests=True) as client:
            await client.initialize(CLIENT_NAME, "0.0.1", timeout_ms=WAIT_MS)
            async with client.subscription() as sub:
                thread_id = await start_thread(client)
                await sub.wait_for(
                    lambda n: n.method == "mcpServer/startupStatus/updated"
                    and n.params.get("name") == "pingsrv"
                    and n.params.get("status") == "ready",
                    timeout_ms=WAIT_MS,
                )
            stub.enqueue(mcp_tool_call("pingsrv", "ping", {"word": "zebra"}), text("done"))
            async with client.subscription(thread_id=thread_id) as sub:
                await client.request(
                    "turn/start", {"threadId": thread_id, "input": text_input("call ping")}, timeout_ms=WAIT_MS
                )
                tool_item = await sub.wait_for(
                    lambda n: n.method == "item/completed" and n.params["item"]["type"] == "mcpToolCall",
                    timeout_ms=WAIT_MS,
                )
                done = await sub.wait_for(lambda n: n.method == "turn/completed", timeout_ms=WAIT_MS)
    item = tool_item.params["item"]
    assert (item["server"], item["tool"], item["status"]) == ("pingsrv", "ping", "completed")
    assert done.params["turn"]["status"] == "completed"
    first, second = stub.responses_requests()[:2]
    assert "mcp__pingsrv/ping" in first.tool_names()  # one namespace tool per MCP server
    assert second.last_input is not None and second.last_input["type"] == "function_call_output"
    # observed: plain-content results reach the model as input_text parts
    # ["Wall time: … seconds\nOutput:", "pong:zebra"], not one string as with structuredContent
    assert second.function_call_output_texts()[0].endswith("Output:\npong:zebra")


async def test_connect_ws_with_capability_token(stub: ResponsesStub, tmp_path: Path) -> None:
    # `--listen ws://127.0.0.1:<port> --ws-auth capability-token --ws-token-file <file>`:
    # a wrong or missing token gets HTTP 401 on the upgrade (observed on 0.169.0).
    with CodexAppServer(stub.base_url, root=tmp_path / "codex", transport="ws-token") as host:
        assert host.ws_url is not None and host.ws_token is not None
        async with await AppServerClient.connect_ws(host.ws_url, token=host.ws_token) as client:
            info = await client.initialize(CLIENT_NAME, "0.0.1", timeout_ms=WAIT_MS)
            assert info["platformFamily"] == "unix"
            assert (await client.request("thread/start", {}, timeout_ms=WAIT_MS))["thread"]["id"]
        for token in ("wrong", None):
            with pytest.raises(AppServerUnavailable) as info_err:
                await AppServerClient.connect_ws(host.ws_url, token=token, open_timeout_ms=WAIT_MS)
            assert info_err.value.reason == "open-failed" and "HTTP 401" in info_err.value.detail


async def test_requests_before_initialize_are_refused(client: AppServerClient, host: CodexAppServer) -> None:
    # A second connection to the same app-server: nothing works before `initialize`.
    async with await AppServerClient.connect_unix(host.socket_path) as fresh:
        with pytest.raises(AppServerError) as info:
            await fresh.request("thread/list", {}, timeout_ms=WAIT_MS)
        assert (info.value.code, info.value.message) == (-32600, "Not initialized")
        await fresh.initialize("second-client", "0.0.1", timeout_ms=WAIT_MS)
        with pytest.raises(AppServerError) as again:
            await fresh.initialize("second-client", "0.0.1", timeout_ms=WAIT_MS)
        assert (again.value.code, again.value.message) == (-32600, "Already initialized")
