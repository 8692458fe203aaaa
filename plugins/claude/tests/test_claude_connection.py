"""The MCP connection's opening under both protocol revisions (agent_link_claude.connection).

The server runs in-process over memory streams (``serve_streams``) with a test harness whose
background task records what it sees, watched by a test plugin that answers
``agent_link_mcp_connection`` as the claude plugin does; the client is the MCP SDK's ``ClientSession`` opening
the connection with ``initialize`` (the handshake revisions), with ``server/discover`` (the
stateless revision 2026-07-28), or the way current hosts do: ``server/discover`` first, and
``initialize`` when the server answers "method not found".
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from agent_link_core import hookimpl
from agent_link_core.app import App
from agent_link_core.harness import Harness
from agent_link_core.server import serve_streams
from agent_link_testing.harnesses import HarnessPlugin

from agent_link_claude import plugin
from agent_link_claude.channel import HANDSHAKE, STATELESS, PeerGone
from agent_link_claude.connection import McpPeer

pytestmark = pytest.mark.anyio
ALL_PLUGINS = " ".join(sorted(ep.name for ep in importlib.metadata.entry_points(group="agent_link")))
BOUND_S = 20.0  # a bound on waits, never a speed assertion
PUSH = "notifications/test/push"
CLIENT = types.Implementation(name="probe", version="3")


class BackgroundHarness(Harness):
    """Records when its background task starts and what the connection looked like then."""

    name = "bg"

    def __init__(self, handshake: bool) -> None:
        self.handshake = handshake
        self.started = anyio.Event()
        self.cancelled = anyio.Event()
        self.peer: McpPeer | None = None

    async def serve(self, app: Any, peer: McpPeer) -> None:
        self.peer = peer
        self.started.set()
        try:
            await anyio.sleep_forever()
        finally:
            self.cancelled.set()


class WatchingPlugin(HarnessPlugin):
    """Registers the harness and watches the connection, refusing ``server/discover`` and declaring a capability when
    it needs the handshake."""

    @hookimpl
    def agent_link_mcp_connection(self, write: Any) -> McpPeer:
        handshake = any(h.handshake for h in self.harnesses if isinstance(h, BackgroundHarness))
        return McpPeer(write, refuse_discover=handshake, capabilities={"test/push": {}} if handshake else None)


@asynccontextmanager
async def served(harness: BackgroundHarness, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[App, Any, Any]]:
    """An App serving one connection; yields (app, client read stream, client write stream)."""
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", ALL_PLUGINS)
    monkeypatch.setenv("AGENT_LINK_ADDRESS", "test:me")
    app = App.create(extra_plugins=(WatchingPlugin(harness),))
    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    server_writes, from_server = anyio.create_memory_object_stream[SessionMessage](16)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve_streams, app, server_reads, server_writes)
            yield app, from_server, to_server
            await to_server.aclose()  # the client leaves: the server's loop ends
    finally:
        await app.aclose()


async def open_connection(session: ClientSession, how: str) -> None:
    if how == "handshake":
        await session.initialize()
    elif how == "stateless":
        await session.discover()
    else:  # how hosts probe today
        try:
            await session.discover()
        except MCPError as exc:
            assert exc.code == types.METHOD_NOT_FOUND
            await session.initialize()


@pytest.mark.parametrize(("how", "handshake", "era", "version", "refused"), [
    ("handshake", False, HANDSHAKE, "2025-11-25", False),
    ("stateless", False, STATELESS, "2026-07-28", False),
    ("auto", False, STATELESS, "2026-07-28", False),
    ("auto", True, HANDSHAKE, "2025-11-25", True),
])
async def test_background_starts_before_the_client_speaks_under_either_revision(
    monkeypatch: pytest.MonkeyPatch, how: str, handshake: bool, era: str, version: str, refused: bool
) -> None:
    harness = BackgroundHarness(handshake)
    async with served(harness, monkeypatch) as (app, read, write):
        with anyio.fail_after(BOUND_S):
            await harness.started.wait()  # no client message was sent yet
        assert app.mcp_connection is not None and harness.peer is app.mcp_connection[1]
        assert harness.peer is not None and harness.peer.era is None and harness.peer.client_info == {}
        async with ClientSession(read, write, client_info=CLIENT) as session:
            with anyio.fail_after(BOUND_S):
                await open_connection(session, how)
                health = (await session.call_tool("agent_link_health", {})).structured_content
        assert health is not None
        assert health["mcp"] == {"era": era, "protocolVersion": version, "initialized": era == HANDSHAKE,
                                 "discoverRefused": refused, "client": {"name": "probe", "version": "3"}}
        assert not harness.cancelled.is_set()
    assert harness.cancelled.is_set()  # the connection ended: background work was stopped


async def test_a_refused_discover_is_method_not_found_and_never_reaches_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    async with served(BackgroundHarness(True), monkeypatch) as (app, read, write), ClientSession(read, write) as session:
        with anyio.fail_after(BOUND_S), pytest.raises(MCPError) as refused:
            await session.discover()
        assert refused.value.code == types.METHOD_NOT_FOUND
        assert refused.value.error.data["method"] == "server/discover"
        with anyio.fail_after(BOUND_S):
            init = await session.initialize()
        assert init.protocol_version == "2025-11-25" and app.mcp_connection is not None
        assert init.capabilities.experimental == {"test/push": {}}  # the peer's outbound added it
        assert init.capabilities.tools is not None  # the rest of the SDK's answer stands
        peer = app.mcp_connection[1]
        assert peer.discover_refused and peer.era == HANDSHAKE


def request(id_: int, method: str, params: dict[str, Any] | None = None) -> SessionMessage:
    return SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=id_, method=method, params=params))


async def test_notifications_reach_a_handshake_client_and_fail_once_it_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    harness = BackgroundHarness(True)
    async with served(harness, monkeypatch) as (_, read, write):
        with anyio.fail_after(BOUND_S):
            await harness.started.wait()
            peer = harness.peer
            assert peer is not None
            await write.send(request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                                       "clientInfo": {"name": "raw", "version": "9"}}))
            answer = (await read.receive()).message
            assert isinstance(answer, types.JSONRPCResponse) and answer.result["protocolVersion"] == "2025-06-18"
            assert answer.result["capabilities"]["experimental"] == {"test/push": {}}
            assert (peer.era, peer.protocol_version, peer.initialized) == (HANDSHAKE, "2025-06-18", False)
            await write.send(SessionMessage(types.JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized")))
            await peer.notify(PUSH, {"n": 1})
            pushed = (await read.receive()).message
        assert isinstance(pushed, types.JSONRPCNotification) and (pushed.method, pushed.params) == (PUSH, {"n": 1})
        assert peer.initialized and peer.client_info == {"name": "raw", "version": "9"}
    with pytest.raises(PeerGone):
        await peer.notify(PUSH, {"n": 2})


async def test_the_peer_records_the_stateless_envelope() -> None:
    peer = McpPeer(None)
    meta = {types.PROTOCOL_VERSION_META_KEY: "2026-07-28", types.CLIENT_INFO_META_KEY: {"name": "new", "version": "2"},
            types.CLIENT_CAPABILITIES_META_KEY: {}}
    # both pass through to the SDK untouched; the envelope is recorded on the way
    assert peer.inbound(request(7, "tools/list", {"_meta": meta})) is None
    assert peer.inbound(ValueError("a line that was not JSON-RPC")) is None
    assert peer.view() == {"era": STATELESS, "protocolVersion": "2026-07-28", "initialized": False,
                           "discoverRefused": False, "client": {"name": "new", "version": "2"}}


async def test_initialized_read_before_the_initialize_answer_went_out_still_counts() -> None:
    """A client may send ``notifications/initialized`` right behind ``initialize``; the reader
    can see it before the SDK's answer passes the writer (the event-loop reader does), and the
    peer must still count as initialized (Claude Code's channel gate reads it)."""
    peer = McpPeer(None)
    peer.inbound(request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                           "clientInfo": {"name": "fast", "version": "1"}}))
    peer.inbound(SessionMessage(types.JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized")))
    assert not peer.initialized  # the answer has not gone out yet
    peer.outbound(SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=1, result={"protocolVersion": "2025-06-18"})))
    assert (peer.era, peer.initialized) == (HANDSHAKE, True)


@pytest.mark.parametrize("declared", [False, True])
async def test_the_claude_plugin_watches_every_connection_and_refuses_discover_while_its_channel_is_declared(declared: bool) -> None:
    capabilities = {"claude/channel": {}} if declared else {}
    app = type("FakeApp", (), {"harnesses": {"claude": type("H", (), {"declare_channel": lambda self, app: capabilities})()}})()
    peer = plugin.agent_link_mcp_connection(None, app)
    assert isinstance(peer, McpPeer) and peer.refuse_discover is declared
    assert (peer.inbound(request(1, "server/discover")) is not None) is declared
    peer.inbound(request(2, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}}))
    answer = SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=2, result={"protocolVersion": "2025-06-18",
                                                                              "capabilities": {"tools": {}}}))
    written = peer.outbound(answer)
    if declared:  # the initialize answer goes out with the channel's capability
        assert isinstance(written, SessionMessage) and isinstance(written.message, types.JSONRPCResponse)
        assert written.message.id == 2
        assert written.message.result["capabilities"] == {"tools": {}, "experimental": {"claude/channel": {}}}
    else:
        assert written is None


async def test_the_sdk_alone_cannot_refuse_discover_and_then_serve_initialize() -> None:
    """Why the refusal sits in front of the SDK (agent_link_mcp_connection): the SDK fixes the
    revision on the client's first request, so a ``server/discover`` handler of its own that
    refuses leaves the connection stateless and the client's fallback ``initialize`` is refused
    too. Should a later SDK let it through, the refusal can move onto the SDK's handler."""
    from mcp.server import Server

    server: Server[Any] = Server("probe")

    async def refuse(ctx: Any, params: Any) -> Any:
        raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found")

    server.add_request_handler("server/discover", types.RequestParams, refuse)
    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    server_writes, from_server = anyio.create_memory_object_stream[SessionMessage](16)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.run, server_reads, server_writes, server.create_initialization_options())
        async with ClientSession(from_server, to_server) as session:
            with anyio.fail_after(BOUND_S):
                with pytest.raises(MCPError) as refused:
                    await session.discover()
                assert refused.value.code == types.METHOD_NOT_FOUND
                with pytest.raises(MCPError) as fallback:
                    await session.initialize()
        assert fallback.value.code == types.UNSUPPORTED_PROTOCOL_VERSION
        tg.cancel_scope.cancel()
