"""The one place agent-link touches the MCP connection's opening: which protocol revision the
client and this server speak, and the path for notifications sent outside any request.

MCP has two ways to open a connection (docs/mcp-revisions.md):

* the **handshake** revisions (up to 2025-11-25): ``initialize``, then the client's
  ``notifications/initialized``; afterwards the server may write notifications at any time;
* the **stateless** revision 2026-07-28: the client probes ``server/discover`` and every request
  carries its revision and client info in ``_meta``; there is no ``initialize`` and no
  ``notifications/initialized``, and a notification outside a request (a live channel) has no
  defined path: clients are free to drop it, and at least one host refuses its channel
  feature on such a connection.

The MCP SDK's server picks the revision from the client's first request. This module sits
between the stdio transport and the SDK, at the JSON-RPC message level (no SDK internals), and:

* records what the client said (revision, ``clientInfo``, whether it sent
  ``notifications/initialized``) on the :class:`~agent_link_core.harness.McpPeer` that harnesses
  and health read;
* when asked to (``refuse_discover``: a harness pushes notifications outside requests), answers
  ``server/discover`` with "method not found" before the SDK sees it, as a server that predates
  the stateless revision would; clients then fall back to ``initialize``;
* writes notifications for harnesses straight to the transport.

Why it is not left to the SDK (issue 31): the SDK serves the stateless revision to a client
that probes for it, and a host that supports it refuses its live-channel feature on such a
connection (docs/mcp-revisions.md, verified end to end there); a harness that pushes outside
requests needs the handshake revisions, which only a refused probe gets. tests/test_handshake.py
holds the cases. Of this module, the refusal alone could move onto the SDK: mcp 2.3.0 lets a
server replace its ``server/discover`` handler (``Server.add_request_handler``); that move
waits for the real-host channel test of docs/mcp-revisions.md to run against it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from agent_link_core.harness import HANDSHAKE, STATELESS, McpPeer, PeerGone

DISCOVER = "server/discover"
INITIALIZE = "initialize"
INITIALIZED = "notifications/initialized"
DISCOVER_REFUSAL = (
    "agent-link serves the initialize handshake on this connection: a harness here pushes "
    "notifications outside requests, which the 2026-07-28 revision has no path for"
)


class LinkStreams:
    """The read and write streams handed to the SDK's server in place of the transport's.

    :param read: the transport's stream of inbound :class:`SessionMessage` (or exceptions).
    :param write: the transport's stream for outbound :class:`SessionMessage`.
    :param peer: updated as the connection opens (see the module docstring).
    :param refuse_discover: answer ``server/discover`` with JSON-RPC error -32601 instead of
        passing it to the SDK.

    :attr:`peer` is the connection as harnesses see it; its notification path is
    :meth:`notify`.
    """

    def __init__(self, read: Any, write: Any, *, refuse_discover: bool = False) -> None:
        self._read = read
        self._write = write
        self.refuse_discover = refuse_discover
        self.peer = McpPeer(self.notify)
        self._initialize_ids: set[Any] = set()
        #: ``notifications/initialized`` read before the answer to ``initialize`` went out (a
        #: client sends both at once; the reader can be ahead of the writer)
        self._initialized_early = False
        self._closed = False
        self.reader = _Inbound(self)
        self.writer = _Outbound(self)

    async def notify(self, method: str, params: Mapping[str, Any]) -> None:
        """Write one notification to the client.

        :raises PeerGone: the connection is closed (nothing was written).
        """
        message = SessionMessage(types.JSONRPCNotification(jsonrpc="2.0", method=method, params=dict(params)))
        if self._closed:
            raise PeerGone(method)
        try:
            await self._write.send(message)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise PeerGone(method) from exc

    # -- what the client says ----------------------------------------------------------------

    async def _inbound(self, item: Any) -> bool:
        """Look at one inbound item; False when it was answered here and must not reach the SDK."""
        if not isinstance(item, SessionMessage):
            return True
        message, peer = item.message, self.peer
        if isinstance(message, types.JSONRPCRequest):
            params = message.params if isinstance(message.params, Mapping) else {}
            if message.method == DISCOVER and self.refuse_discover:
                peer.discover_refused = True
                error = types.ErrorData(code=types.METHOD_NOT_FOUND, message="Method not found",
                                        data={"method": DISCOVER, "reason": DISCOVER_REFUSAL})
                await self._write.send(SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=message.id, error=error)))
                return False
            if message.method == INITIALIZE:
                self._initialize_ids.add(message.id)
                if isinstance(params.get("clientInfo"), Mapping):
                    peer.client_info = dict(params["clientInfo"])
            else:
                meta = params.get("_meta")
                if isinstance(meta, Mapping) and isinstance(meta.get(types.PROTOCOL_VERSION_META_KEY), str):
                    # a request in the stateless revision's envelope names its revision itself
                    peer.era, peer.protocol_version = STATELESS, meta[types.PROTOCOL_VERSION_META_KEY]
                    info = meta.get(types.CLIENT_INFO_META_KEY)
                    if isinstance(info, Mapping):
                        peer.client_info = dict(info)
        elif isinstance(message, types.JSONRPCNotification) and message.method == INITIALIZED:
            if peer.era == HANDSHAKE:
                peer.initialized = True
            elif self._initialize_ids:
                self._initialized_early = True
        return True

    def _outbound(self, item: Any) -> None:
        if not isinstance(item, SessionMessage):
            return
        message = item.message
        if isinstance(message, types.JSONRPCResponse) and message.id in self._initialize_ids:
            self._initialize_ids.discard(message.id)
            version = message.result.get("protocolVersion") if isinstance(message.result, Mapping) else None
            if isinstance(version, str):
                self.peer.era, self.peer.protocol_version = HANDSHAKE, version
                self.peer.initialized = self.peer.initialized or self._initialized_early
        elif isinstance(message, types.JSONRPCError):
            self._initialize_ids.discard(message.id)


class _Inbound:
    """The SDK's read stream: the transport's, minus what :class:`LinkStreams` answers itself."""

    def __init__(self, link: LinkStreams) -> None:
        self._link = link

    @property
    def last_context(self) -> Any:
        """The sender context of the last item (the SDK reads it when the transport has one)."""
        return getattr(self._link._read, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self._link._read.receive()
            if await self._link._inbound(item):
                return item

    async def aclose(self) -> None:
        await self._link._read.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()


class _Outbound:
    """The SDK's write stream: the transport's, watched for the ``initialize`` answer."""

    def __init__(self, link: LinkStreams) -> None:
        self._link = link

    async def send(self, item: Any) -> None:
        self._link._outbound(item)
        await self._link._write.send(item)

    async def aclose(self) -> None:
        self._link._closed = True
        await self._link._write.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()
