"""The MCP connection of ``agent-link mcp`` as the Claude channel sees it (``agent_link_mcp_connection``): the protocol
revision the client speaks, and the path for notifications written outside any request, at the JSON-RPC message level
between the transport and the SDK. docs/mcp-revisions.md says what it does and why the SDK cannot (``server/discover``
refused while the channel is declared); tests/test_claude_connection.py holds the cases.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from agent_link_claude.channel import HANDSHAKE, STATELESS, PeerGone

DISCOVER = "server/discover"
DISCOVER_REFUSAL = (
    "agent-link serves the initialize handshake on this connection: a harness here pushes "
    "notifications outside requests, which the 2026-07-28 revision has no path for"
)


class McpPeer:
    """The MCP client connection, which exists before the client's first message and fills in as it opens: the core
    hands it every message read (:meth:`inbound`) and written (:meth:`outbound`), and every harness's ``serve`` gets it.

    :param write: the transport's stream of outbound :class:`SessionMessage`; :meth:`notify` writes there.
    :param refuse_discover: answer ``server/discover`` with JSON-RPC error -32601 instead of passing it to the SDK.
    :param capabilities: experimental capabilities (``{name: {}}``) added to the ``initialize`` answer (:meth:`outbound`).

    Attributes: ``era`` (:data:`HANDSHAKE`, :data:`STATELESS`, None before the first request), ``protocol_version`` (e.g.
    ``"2025-11-25"``), ``client_info`` (``{}`` until the client says it), ``initialized`` (a handshake client sent
    ``notifications/initialized``: notifications may be written), ``discover_refused``.
    """

    def __init__(self, write: Any, *, refuse_discover: bool = False, capabilities: Mapping[str, dict[str, Any]] | None = None) -> None:
        self._write = write
        self.refuse_discover = refuse_discover
        self.capabilities = dict(capabilities or {})
        self.client_info: dict[str, Any] = {}
        self.era: str | None = None
        self.protocol_version: str | None = None
        self.initialized = False
        self.discover_refused = False
        self._initialize_ids: set[Any] = set()
        # notifications/initialized read before the initialize answer went out (the reader can be ahead of the writer)
        self._initialized_early = False

    def view(self) -> dict[str, Any]:
        """What health shows about the connection (``mcp``)."""
        return {"era": self.era, "protocolVersion": self.protocol_version, "initialized": self.initialized, "discoverRefused": self.discover_refused,
                "client": {k: self.client_info.get(k) for k in ("name", "version")} if self.client_info else None}

    async def notify(self, method: str, params: Mapping[str, Any]) -> None:
        """Write one notification to the client; :class:`PeerGone` (nothing written) once the connection is closed."""
        try:
            await self._write.send(SessionMessage(types.JSONRPCNotification(jsonrpc="2.0", method=method, params=dict(params))))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise PeerGone(method) from exc

    def inbound(self, item: Any) -> SessionMessage | None:
        """Record one item read from the client; the answer to write instead of passing it to the SDK, or None."""
        message = item.message if isinstance(item, SessionMessage) else None
        if isinstance(message, types.JSONRPCRequest):
            params = message.params if isinstance(message.params, Mapping) else {}
            if message.method == DISCOVER and self.refuse_discover:
                self.discover_refused = True
                error = types.ErrorData(code=types.METHOD_NOT_FOUND, message="Method not found",
                                        data={"method": DISCOVER, "reason": DISCOVER_REFUSAL})
                return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=message.id, error=error))
            if message.method == "initialize":
                self._initialize_ids.add(message.id)
                if isinstance(params.get("clientInfo"), Mapping):
                    self.client_info = dict(params["clientInfo"])
                return None
            meta = params.get("_meta")
            if isinstance(meta, Mapping) and isinstance(meta.get(types.PROTOCOL_VERSION_META_KEY), str):
                # a request in the stateless revision's envelope names its revision itself
                self.era, self.protocol_version = STATELESS, meta[types.PROTOCOL_VERSION_META_KEY]
                if isinstance(info := meta.get(types.CLIENT_INFO_META_KEY), Mapping):
                    self.client_info = dict(info)
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/initialized":
            if self.era == HANDSHAKE:
                self.initialized = True
            elif self._initialize_ids:
                self._initialized_early = True
        return None

    def outbound(self, item: Any) -> SessionMessage | None:
        """Record one item the SDK writes to the client (the ``initialize`` answer fixes the revision); the ``initialize``
        answer with :attr:`capabilities` added to its ``capabilities.experimental`` to write instead, else None."""
        message = item.message if isinstance(item, SessionMessage) else None
        if isinstance(message, types.JSONRPCResponse) and message.id in self._initialize_ids:
            self._initialize_ids.discard(message.id)
            result = message.result if isinstance(message.result, Mapping) else {}
            if isinstance(version := result.get("protocolVersion"), str):
                self.era, self.protocol_version = HANDSHAKE, version
                self.initialized = self.initialized or self._initialized_early
            offered = result.get("capabilities")
            if self.capabilities and isinstance(offered, Mapping):
                experimental = {**(offered.get("experimental") or {}), **self.capabilities}
                answer = {**result, "capabilities": {**offered, "experimental": experimental}}
                return SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=message.id, result=answer), metadata=item.metadata)
        elif isinstance(message, types.JSONRPCError):
            self._initialize_ids.discard(message.id)
        return None
