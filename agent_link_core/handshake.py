"""Where the MCP connection opens: the protocol revision the client speaks, and the path for
notifications a harness sends outside any request, at the JSON-RPC message level between the
transport and the SDK. docs/mcp-revisions.md says what it does and why the SDK cannot
(``server/discover`` refused while ``Harness.needs_handshake``); tests/test_handshake.py holds the cases.
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
DISCOVER_REFUSAL = (
    "agent-link serves the initialize handshake on this connection: a harness here pushes "
    "notifications outside requests, which the 2026-07-28 revision has no path for"
)


class LinkStreams:
    """The read and write streams handed to the SDK's server in place of the transport's.

    :param read: the transport's stream of inbound :class:`SessionMessage` (or exceptions).
    :param write: the transport's stream for outbound :class:`SessionMessage`.
    :param refuse_discover: answer ``server/discover`` with JSON-RPC error -32601 instead of passing it to the SDK.

    :attr:`reader` and :attr:`writer` go to the SDK; :attr:`peer` is the connection as harnesses see it, its notification
    path :meth:`notify`.
    """

    def __init__(self, read: Any, write: Any, *, refuse_discover: bool = False) -> None:
        self._write = write
        self.refuse_discover = refuse_discover
        self.peer = McpPeer(self.notify)
        self._initialize_ids: set[Any] = set()
        # notifications/initialized read before the initialize answer went out (a client sends
        # both at once; the reader can be ahead of the writer)
        self._initialized_early = False
        self._closed = False
        self.reader = _Inbound(self, read)
        self.writer = _Outbound(self, write)

    async def notify(self, method: str, params: Mapping[str, Any]) -> None:
        """Write one notification to the client; :class:`PeerGone` (nothing written) once the connection is closed."""
        if self._closed:
            raise PeerGone(method)
        try:
            await self._write.send(SessionMessage(types.JSONRPCNotification(jsonrpc="2.0", method=method, params=dict(params))))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise PeerGone(method) from exc

    async def _inbound(self, item: Any) -> bool:
        """Record one inbound item; False when it was answered here and must not reach the SDK."""
        message = item.message if isinstance(item, SessionMessage) else None
        peer = self.peer
        if isinstance(message, types.JSONRPCRequest):
            params = message.params if isinstance(message.params, Mapping) else {}
            if message.method == DISCOVER and self.refuse_discover:
                peer.discover_refused = True
                error = types.ErrorData(code=types.METHOD_NOT_FOUND, message="Method not found",
                                        data={"method": DISCOVER, "reason": DISCOVER_REFUSAL})
                await self._write.send(SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=message.id, error=error)))
                return False
            if message.method == "initialize":
                self._initialize_ids.add(message.id)
                if isinstance(params.get("clientInfo"), Mapping):
                    peer.client_info = dict(params["clientInfo"])
                return True
            meta = params.get("_meta")
            if isinstance(meta, Mapping) and isinstance(meta.get(types.PROTOCOL_VERSION_META_KEY), str):
                # a request in the stateless revision's envelope names its revision itself
                peer.era, peer.protocol_version = STATELESS, meta[types.PROTOCOL_VERSION_META_KEY]
                if isinstance(info := meta.get(types.CLIENT_INFO_META_KEY), Mapping):
                    peer.client_info = dict(info)
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/initialized":
            if peer.era == HANDSHAKE:
                peer.initialized = True
            elif self._initialize_ids:
                self._initialized_early = True
        return True

    def _outbound(self, item: Any) -> None:
        message = item.message if isinstance(item, SessionMessage) else None
        if isinstance(message, types.JSONRPCResponse) and message.id in self._initialize_ids:
            self._initialize_ids.discard(message.id)
            version = message.result.get("protocolVersion") if isinstance(message.result, Mapping) else None
            if isinstance(version, str):
                self.peer.era, self.peer.protocol_version = HANDSHAKE, version
                self.peer.initialized = self.peer.initialized or self._initialized_early
        elif isinstance(message, types.JSONRPCError):
            self._initialize_ids.discard(message.id)


class _Stream:
    """What the SDK's stream protocols ask of both sides besides reading or writing; ``inner`` is the transport's stream of that side."""

    def __init__(self, link: LinkStreams, inner: Any) -> None:
        self._link = link
        self._inner = inner

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()


class _Inbound(_Stream):
    """The SDK's read stream: the transport's, minus what :class:`LinkStreams` answers itself."""

    @property
    def last_context(self) -> Any:
        """The transport's sender context of the last item, when it has one (the SDK reads it)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()
            if await self._link._inbound(item):
                return item

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class _Outbound(_Stream):
    """The SDK's write stream: the transport's, watched for the ``initialize`` answer."""

    async def send(self, item: Any) -> None:
        self._link._outbound(item)
        await self._inner.send(item)

    async def aclose(self) -> None:
        self._link._closed = True
        await super().aclose()
