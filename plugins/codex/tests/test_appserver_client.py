"""Unit tests of agent_link_codex.appserver against an in-process fake app-server.

The fake speaks the Codex app-server wire format (docs/hosts/codex.md §5): a
WebSocket on a Unix socket, JSON messages without a ``jsonrpc`` field. Its behaviour is picked
by the request method (see ``FakeAppServer._handle``).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.server import Server, ServerConnection, serve, unix_serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from agent_link_codex.appserver import (
    AppServerClient,
    AppServerError,
    AppServerUnavailable,
    ConnectionLost,
    Notification,
    ServerRequest,
    refusal_for,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(20)]


class FakeAppServer:
    """A scripted app-server on a Unix socket; records every message it receives."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.received: list[dict[str, Any]] = []
        self.connections: list[ServerConnection] = []
        self.replies: asyncio.Queue[dict[str, Any]] = asyncio.Queue()  # client answers to server requests
        self.server: Server | None = None
        self.release = asyncio.Event()

    async def __aenter__(self) -> FakeAppServer:
        self.server = await unix_serve(self._serve, self.path, compression=None, max_size=None)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, conn: ServerConnection) -> None:
        self.connections.append(conn)
        try:
            async for raw in conn:
                msg = json.loads(raw)
                self.received.append(msg)
                if "method" in msg and "id" in msg:
                    asyncio.ensure_future(self._handle(conn, msg))
                elif "method" not in msg:
                    await self.replies.put(msg)
        except ConnectionClosed:
            pass

    async def _handle(self, conn: ServerConnection, msg: dict[str, Any]) -> None:
        method, params, rid = msg["method"], msg.get("params") or {}, msg["id"]
        try:
            if method == "initialize":
                await conn.send(json.dumps({"id": rid, "result": {"userAgent": "fake/0.169.0", "platformOs": "linux"}}))
            elif method == "echo":
                await asyncio.sleep(params.get("delay_s", 0))
                await conn.send(json.dumps({"id": rid, "result": params}))
            elif method == "fail":
                error = {"code": -32600, "message": "thread not found: x", "data": {"hint": 1}}
                await conn.send(json.dumps({"id": rid, "error": error}))
            elif method == "hang":
                await self.release.wait()
                await conn.send(json.dumps({"id": rid, "result": "late"}))
            elif method == "big":
                await conn.send(json.dumps({"id": rid, "result": {"blob": "x" * params["size"]}}))
            elif method == "emit":
                for note in params["notes"]:
                    await conn.send(json.dumps(note))
                await conn.send(json.dumps({"id": rid, "result": {}}))
            elif method == "ask":  # send a server->client request, report the client's answer
                await conn.send(json.dumps({"id": params["id"], "method": params["method"], "params": {"threadId": "t"}}))
                answer = await asyncio.wait_for(self.replies.get(), 5)
                await conn.send(json.dumps({"id": rid, "result": answer}))
            elif method == "abort":  # drop the transport without a close frame
                conn.transport.abort()
            elif method == "close":  # a clean close frame
                await conn.close()
        except ConnectionClosed:
            pass


@pytest.fixture
def sock_dir() -> Iterator[str]:
    """A short directory for sockets (pytest's tmp_path can exceed the AF_UNIX limit)."""
    path = tempfile.mkdtemp(prefix="al-fake-", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def fake(sock_dir: str) -> AsyncIterator[FakeAppServer]:
    async with FakeAppServer(os.path.join(sock_dir, "fake.sock")) as server:
        yield server
        server.release.set()


@pytest.fixture
async def client(fake: FakeAppServer) -> AsyncIterator[AppServerClient]:
    c = await AppServerClient.connect_unix(fake.path)
    yield c
    await c.close()


def requests_of(fake: FakeAppServer, method: str) -> list[dict[str, Any]]:
    return [m for m in fake.received if m.get("method") == method]


async def test_initialize_sends_client_info_then_initialized(client: AppServerClient, fake: FakeAppServer) -> None:
    result = await client.initialize("codex-agent-link", "1.2.3", title="Codex Agent Link")
    assert result == {"userAgent": "fake/0.169.0", "platformOs": "linux"}
    assert client.server_info == result
    for _ in range(50):
        if requests_of(fake, "initialized"):
            break
        await asyncio.sleep(0.01)
    init, initialized = fake.received[0], fake.received[1]
    assert init["method"] == "initialize"
    assert init["params"] == {
        "clientInfo": {"name": "codex-agent-link", "version": "1.2.3", "title": "Codex Agent Link"},
        "capabilities": {"experimentalApi": True},
    }
    assert isinstance(init["id"], str) and init["id"].startswith("agent-link-")
    assert "jsonrpc" not in init  # the Codex app-server protocol omits it
    assert initialized == {"method": "initialized"}


async def test_concurrent_requests_get_their_own_answers(client: AppServerClient, fake: FakeAppServer) -> None:
    # answered in reverse order of sending: routing is by id
    results = await asyncio.gather(*(client.request("echo", {"n": n, "delay_s": 0.05 * (3 - n)}) for n in range(4)))
    assert [r["n"] for r in results] == [0, 1, 2, 3]
    ids = [m["id"] for m in requests_of(fake, "echo")]
    assert len(set(ids)) == 4
    assert client.pending_count == 0


async def test_request_without_params_omits_them(client: AppServerClient, fake: FakeAppServer) -> None:
    assert await client.request("echo") == {}
    assert "params" not in requests_of(fake, "echo")[0]


async def test_error_answer_raises_app_server_error(client: AppServerClient) -> None:
    with pytest.raises(AppServerError) as info:
        await client.request("fail", {"threadId": "x"})
    err = info.value
    assert (err.code, err.message, err.method, err.data) == (-32600, "thread not found: x", "fail", {"hint": 1})
    mapped = err.to_agent_link_error()
    assert mapped.code == "upstream_error"
    assert mapped.details == {"method": "fail", "rpcCode": -32600, "rpcMessage": "thread not found: x"}


async def test_request_timeout_then_late_answer_is_dropped(client: AppServerClient, fake: FakeAppServer) -> None:
    started = time.monotonic()
    with pytest.raises(AppServerUnavailable) as info:
        await client.request("hang", timeout_ms=150)
    assert 0.1 <= time.monotonic() - started < 2
    assert info.value.reason == "request-timeout"
    assert info.value.method == "hang"
    assert not isinstance(info.value, ConnectionLost)
    assert client.pending_count == 0
    fake.release.set()
    for _ in range(100):
        if client.late_responses:
            break
        await asyncio.sleep(0.01)
    assert client.late_responses == 1
    assert await client.request("echo", {"still": "usable"}) == {"still": "usable"}


async def test_default_timeout_applies(fake: FakeAppServer) -> None:
    async with await AppServerClient.connect_unix(fake.path, default_timeout_ms=100) as c:
        with pytest.raises(AppServerUnavailable, match="request-timeout"):
            await c.request("hang")


@pytest.mark.parametrize("how", ["abort", "close"])
async def test_disconnect_fails_every_pending_request(client: AppServerClient, how: str) -> None:
    sub = client.subscription()
    pending = [asyncio.ensure_future(client.request("hang", timeout_ms=10_000)) for _ in range(3)]
    await asyncio.sleep(0.05)
    assert client.pending_count == 3
    started = time.monotonic()
    with pytest.raises(ConnectionLost):
        await client.request(how, timeout_ms=10_000)
    for fut in pending:
        with pytest.raises(ConnectionLost) as info:
            await fut
        assert info.value.reason == "connection-lost"
        assert info.value.method == "hang"
        assert info.value.endpoint.startswith("unix://")
    assert time.monotonic() - started < 2
    assert client.closed and client.closed_reason == "connection-lost"
    assert [n async for n in sub] == []  # iteration just ends
    with pytest.raises(ConnectionLost):
        await sub.next(timeout_ms=100)
    # later requests fail at once
    with pytest.raises(ConnectionLost):
        await client.request("echo", timeout_ms=10_000)
    with pytest.raises(ConnectionLost):
        await client.notify("initialized")
    mapped = info.value.to_agent_link_error()
    assert mapped.code == "codex_unavailable"
    assert mapped.details["reason"] == "connection-lost"


async def test_close_fails_pending_with_client_closed(fake: FakeAppServer) -> None:
    c = await AppServerClient.connect_unix(fake.path)
    pending = asyncio.ensure_future(c.request("hang", timeout_ms=10_000))
    await asyncio.sleep(0.05)
    await c.close()
    with pytest.raises(ConnectionLost) as info:
        await pending
    assert info.value.reason == "client-closed"
    assert c.closed_reason == "client-closed"
    await c.close()  # idempotent
    with pytest.raises(ConnectionLost, match="client-closed"):
        await c.request("echo")


async def test_every_send_fails_alike_when_the_transport_does(client: AppServerClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests, notifications and answers to server requests share one writer: a transport
    failure other than a closed connection is ``send-failed`` for each, naming the method."""
    async def broken(payload: str) -> None:
        raise OSError("broken pipe")

    monkeypatch.setattr(client._ws, "send", broken)
    with pytest.raises(AppServerUnavailable) as info:
        await client.request("echo", timeout_ms=1000)
    assert (info.value.reason, info.value.method) == ("send-failed", "echo") and client.pending_count == 0
    with pytest.raises(AppServerUnavailable) as info:
        await client.notify("initialized")
    assert (info.value.reason, info.value.method) == ("send-failed", "initialized")
    for answer in (client.respond(1, {}), client.respond_error(2, -32601, "no")):
        with pytest.raises(AppServerUnavailable) as info:
            await answer
        assert (info.value.reason, info.value.method) == ("send-failed", None)


def note(method: str, thread_id: str | None = None, **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = dict(extra)
    if thread_id is not None:
        params["threadId"] = thread_id
    return {"method": method, "params": params, "emittedAtMs": 1700000000000}


async def test_notifications_reach_callbacks_and_subscriptions_with_filters(client: AppServerClient) -> None:
    seen_all: list[Notification] = []
    seen_turns: list[Notification] = []
    seen_async: list[str] = []

    async def async_callback(n: Notification) -> None:
        seen_async.append(n.method)

    def broken_callback(n: Notification) -> None:
        raise RuntimeError("callbacks must not break the reader")

    client.subscribe(seen_all.append)
    client.subscribe(broken_callback)
    client.subscribe(async_callback, methods="turn/completed")
    unsubscribe = client.subscribe(seen_turns.append, methods={"turn/started", "turn/completed"}, thread_id="A")
    sub_a = client.subscription(thread_id="A")
    sub_started = client.subscription(methods=["thread/started"])
    notes = [
        note("thread/started", thread={"id": "A"}),
        note("turn/started", "A", turn={"id": "t1"}),
        note("turn/started", "B", turn={"id": "t2"}),
        note("item/completed", "A", item={"type": "userMessage", "clientId": "01J"}),
        note("turn/completed", "A", turn={"id": "t1", "status": "completed"}),
        {"method": "configWarning"},  # no params at all
    ]
    await client.request("emit", {"notes": notes})
    assert [n.method for n in seen_all] == [n["method"] for n in notes]
    assert seen_all[0].thread_id == "A"  # from params.thread.id
    assert seen_all[1].emitted_at_ms == 1700000000000
    assert seen_all[-1].params == {} and seen_all[-1].emitted_at_ms is None
    assert [(n.method, n.params["turn"]["id"]) for n in seen_turns] == [("turn/started", "t1"), ("turn/completed", "t1")]
    got = [await sub_a.next(timeout_ms=1000) for _ in range(4)]
    assert [n.method for n in got] == ["thread/started", "turn/started", "item/completed", "turn/completed"]
    assert (await sub_started.next(timeout_ms=1000)).thread_id == "A"
    with pytest.raises(TimeoutError):
        await sub_started.next(timeout_ms=50)
    for _ in range(50):
        if seen_async:
            break
        await asyncio.sleep(0.01)
    assert seen_async == ["turn/completed"]
    assert client.notification_counts["turn/started"] == 2
    assert len(client.recent_notifications) == 6

    unsubscribe()
    sub_a.close()
    await client.request("emit", {"notes": [note("turn/started", "A", turn={"id": "t3"})]})
    assert len(seen_turns) == 2
    assert [n async for n in sub_a] == []
    sub_started.close()


async def test_subscription_wait_for_and_drop_oldest(client: AppServerClient) -> None:
    async with client.subscription(methods="item/completed", maxsize=2) as sub:
        notes = [note("item/completed", "A", n=i) for i in range(4)]
        await client.request("emit", {"notes": notes})
        assert sub.dropped == 2
        found = await sub.wait_for(lambda n: n.params["n"] == 3, timeout_ms=1000)
        assert found.params["n"] == 3
        with pytest.raises(TimeoutError):
            await sub.wait_for(timeout_ms=50)


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("item/commandExecution/requestApproval", {"result": {"decision": "decline"}}),
        ("item/fileChange/requestApproval", {"result": {"decision": "decline"}}),
        ("execCommandApproval", {"result": {"decision": "denied"}}),
        ("applyPatchApproval", {"result": {"decision": "denied"}}),
        ("mcpServer/elicitation/request", {"result": {"action": "decline"}}),
        ("item/permissions/requestApproval", {"result": {"permissions": {}}}),
        ("item/tool/requestUserInput", {"error": {"code": -32601, "message": "agent-link does not handle item/tool/requestUserInput"}}),
    ],
)
async def test_server_requests_are_refused(fake: FakeAppServer, method: str, expected: dict[str, Any]) -> None:
    async with await AppServerClient.connect_unix(fake.path, refuse_server_requests=True) as c:
        answer = await c.request("ask", {"id": 7, "method": method}, timeout_ms=5000)
        assert answer == {"id": 7, **expected}
        assert c.server_request_counts == {method: 1}
    result, error = refusal_for(method)
    assert (result, error) == (expected.get("result"), expected.get("error"))


async def test_server_requests_left_unanswered_by_default(client: AppServerClient) -> None:
    with pytest.raises(AppServerUnavailable, match="request-timeout"):
        await client.request("ask", {"id": "s1", "method": "mcpServer/elicitation/request"}, timeout_ms=300)
    assert client.unanswered_server_requests == 1
    assert client.server_request_counts == {"mcpServer/elicitation/request": 1}


async def test_server_request_handler(fake: FakeAppServer) -> None:
    seen: list[ServerRequest] = []

    async def handler(req: ServerRequest) -> Any:
        seen.append(req)
        if req.method == "currentTime/read":
            return {"currentTimeAt": 5}
        raise AppServerError(-32602, "nope", req.method)

    async with await AppServerClient.connect_unix(fake.path, on_server_request=handler) as c:
        assert await c.request("ask", {"id": 1, "method": "currentTime/read"}) == {"id": 1, "result": {"currentTimeAt": 5}}
        assert await c.request("ask", {"id": 2, "method": "other"}) == {"id": 2, "error": {"code": -32602, "message": "nope"}}
    assert [(r.id, r.method, r.thread_id) for r in seen] == [(1, "currentTime/read", "t"), (2, "other", "t")]


async def test_messages_above_one_mib(client: AppServerClient) -> None:
    size = 3 * 1024 * 1024
    result = await client.request("big", {"size": size})
    assert len(result["blob"]) == size


async def test_connect_unix_missing_socket(sock_dir: str) -> None:
    path = os.path.join(sock_dir, "missing.sock")
    with pytest.raises(AppServerUnavailable) as info:
        await AppServerClient.connect_unix(path)
    assert info.value.reason == "open-failed"
    assert info.value.endpoint == f"unix://{path}"
    assert info.value.to_agent_link_error().details == {"endpoint": f"unix://{path}", "reason": "open-failed"}


async def test_connect_unix_through_long_symlink(fake: FakeAppServer, tmp_path: Path) -> None:
    # Codex makes the --listen path a symlink to /tmp/codex-daemon-<uid>/<hash>; a symlink path
    # over the AF_UNIX limit (~107 bytes) only works when the client connects to its realpath.
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    link = deep / "app-server.sock"
    link.symlink_to(fake.path)
    assert len(str(link)) > 120
    async with await AppServerClient.connect_unix(link) as c:
        assert c.endpoint == f"unix://{link}"
        assert await c.request("echo", {"ok": 1}) == {"ok": 1}


async def test_open_timeout(sock_dir: str) -> None:
    stop = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await stop.wait()  # never answers the HTTP upgrade
        writer.close()

    path = os.path.join(sock_dir, "silent.sock")
    server = await asyncio.start_unix_server(silent, path)
    try:
        started = time.monotonic()
        with pytest.raises(AppServerUnavailable) as info:
            await AppServerClient.connect_unix(path, open_timeout_ms=200)
        assert info.value.reason == "open-timeout"
        assert time.monotonic() - started < 2
    finally:
        stop.set()
        server.close()
        await server.wait_closed()


async def test_connect_ws_sends_bearer_token() -> None:
    seen_auth: list[str | None] = []

    def check_token(conn: ServerConnection, request: Request) -> Response | None:
        seen_auth.append(request.headers.get("Authorization"))
        if request.headers.get("Authorization") != "Bearer s3cret":
            return Response(401, "Unauthorized", Headers(), b"")
        return None

    async def handler(conn: ServerConnection) -> None:
        async for raw in conn:
            msg = json.loads(raw)
            await conn.send(json.dumps({"id": msg["id"], "result": {"method": msg["method"]}}))

    async with serve(handler, "127.0.0.1", 0, process_request=check_token) as server:
        port = server.sockets[0].getsockname()[1]
        url = f"ws://127.0.0.1:{port}/"
        async with await AppServerClient.connect_ws(url, token="s3cret") as c:
            assert await c.request("thread/list", {}) == {"method": "thread/list"}
        with pytest.raises(AppServerUnavailable) as info:
            await AppServerClient.connect_ws(url, token="wrong")
        assert info.value.reason == "open-failed"
        assert "401" in str(info.value)
        assert "wrong" not in str(info.value)
        assert info.value.endpoint == url
    assert seen_auth == ["Bearer s3cret", "Bearer wrong"]


async def test_connect_ws_refused() -> None:
    with pytest.raises(AppServerUnavailable) as info:
        await AppServerClient.connect_ws("ws://127.0.0.1:9/", open_timeout_ms=2000)
    assert info.value.reason == "open-failed"
