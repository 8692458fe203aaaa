"""The answers the start-up front (:mod:`agent_link_core.fastfront`) serves from its cache.

The full server is asked, in process over memory streams, exactly what a client would ask at
the start of a connection under every protocol revision the MCP SDK serves: for each
handshake revision ``initialize`` then ``tools/list``, for each stateless revision a
``tools/list`` carrying the revision in ``_meta``. Each response is kept as the SDK would
write it to the wire (``model_dump(by_alias=True, exclude_unset=True)``), minus ``jsonrpc``
and ``id``. No harness background task runs during the probe.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from agent_link_core.app import App
from agent_link_core.handshake import LinkStreams

PROBE_BOUND_S = 30.0  # a bound on a probe that never answers, not a speed target
PROBE_CLIENT = {"name": "agent-link-front-probe", "version": "1"}


def initialize_key(revision: str) -> str:
    """Cache key of the answer to ``initialize`` asking for ``revision``."""
    return f"initialize/{revision}"


def tools_list_key(revision: str) -> str:
    """Cache key of the answer to a first ``tools/list`` under ``revision``."""
    return f"tools/list/{revision}"


def _request(request_id: int, method: str, params: dict[str, Any] | None = None) -> SessionMessage:
    raw: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        raw["params"] = params
    return SessionMessage(types.jsonrpc_message_adapter.validate_python(raw, by_name=False))


def _notification(method: str) -> SessionMessage:
    return SessionMessage(types.jsonrpc_message_adapter.validate_python({"jsonrpc": "2.0", "method": method}, by_name=False))


def _wire(message: SessionMessage) -> dict[str, Any]:
    """A response as the stdio transport writes it, without ``jsonrpc`` and ``id``."""
    data = message.message.model_dump(mode="json", by_alias=True, exclude_unset=True)
    data.pop("jsonrpc", None)
    data.pop("id", None)
    return data


async def _converse(app: App, script: list[SessionMessage]) -> list[dict[str, Any]]:
    """Serve one fresh connection of ``app`` the messages in ``script``; returns the responses
    to its requests in order."""
    from agent_link_core.server import opening

    server, options, refuse_discover = opening(app)
    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](len(script) + 1)
    server_writes, from_server = anyio.create_memory_object_stream[SessionMessage](len(script) + 4)
    link = LinkStreams(server_reads, server_writes, refuse_discover=refuse_discover)
    answers: list[dict[str, Any]] = []
    wanted = sum(1 for item in script if isinstance(item.message, types.JSONRPCRequest))
    with anyio.fail_after(PROBE_BOUND_S):
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.run, link.reader, link.writer, options)
            for item in script:
                await to_server.send(item)
                if isinstance(item.message, types.JSONRPCRequest):
                    while True:
                        reply = await from_server.receive()
                        if isinstance(reply.message, (types.JSONRPCResponse, types.JSONRPCError)):
                            answers.append(_wire(reply))
                            break
            tg.cancel_scope.cancel()
    assert len(answers) == wanted
    return answers


async def probe_answers(app: App) -> dict[str, dict[str, Any]]:
    """``{cache key: response}`` for every opening the front may answer (module docstring)."""
    out: dict[str, dict[str, Any]] = {}
    for revision in HANDSHAKE_PROTOCOL_VERSIONS:
        init = _request(1, "initialize", {"protocolVersion": revision, "capabilities": {}, "clientInfo": PROBE_CLIENT})
        first, listed = await _converse(app, [init, _notification("notifications/initialized"), _request(2, "tools/list")])
        out[initialize_key(revision)] = first
        out[tools_list_key(revision)] = listed
    for revision in MODERN_PROTOCOL_VERSIONS:
        meta = {types.PROTOCOL_VERSION_META_KEY: revision, types.CLIENT_INFO_META_KEY: PROBE_CLIENT,
                types.CLIENT_CAPABILITIES_META_KEY: {}}
        (listed,) = await _converse(app, [_request(1, "tools/list", {"_meta": meta})])
        out[tools_list_key(revision)] = listed
    return out
