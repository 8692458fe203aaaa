"""A real MCP client session against ``agent-link mcp`` in a subprocess (stdio).

Uses the MCP Python SDK's client. ``revision`` says how it opens the connection:
``"handshake"`` (``initialize``, MCP revisions up to 2025-11-25), ``"stateless"``
(``server/discover``, revision 2026-07-28), or ``"auto"`` (``server/discover`` first and
``initialize`` when the server answers "method not found", as Claude Code 2.1.332 does).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

from mcp.client.session import ClientSession
from mcp_types import RequestParamsMeta
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp_types import METHOD_NOT_FOUND

CALL_TIMEOUT_S = 60.0


@dataclass
class AgentLinkClient:
    """A connected client; :meth:`call` returns the tool's result object.

    ``init`` is the ``initialize`` result, or the ``server/discover`` result on a stateless
    connection; ``discover_refused`` says the server answered ``server/discover`` with
    "method not found" (``revision="auto"`` then used ``initialize``).
    """

    session: ClientSession
    init: Any
    discover_refused: bool = False

    async def call(self, name: str, arguments: Mapping[str, Any] | None = None, meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Call a tool and return its JSON result, checking the result contract on the way:
        the text content and structuredContent carry the same object, and isError == not ok."""
        result = await self.session.call_tool(name, dict(arguments or {}), read_timeout_seconds=CALL_TIMEOUT_S, meta=cast("RequestParamsMeta", dict(meta)) if meta else None)
        assert len(result.content) == 1, result
        text_obj = json.loads(result.content[0].text)
        assert result.structured_content == text_obj, (result.structured_content, text_obj)
        assert result.is_error == (not text_obj["ok"]), text_obj
        return text_obj

    async def tools(self) -> dict[str, Any]:
        """``{name: Tool}`` from tools/list."""
        listed = await self.session.list_tools()
        return {t.name: t for t in listed.tools}


def server_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The current (test-isolated) environment plus ``extra``."""
    env = dict(os.environ)
    env.update(extra or {})
    return env


@asynccontextmanager
async def agent_link_mcp(env: Mapping[str, str] | None = None, args: tuple[str, ...] = ("mcp",),
                         revision: str = "handshake", launcher: Sequence[str] = ()) -> AsyncIterator[AgentLinkClient]:
    """Start ``agent-link mcp`` (``python -m agent_link_core mcp``) and yield a client that
    opened the connection as ``revision`` says (see the module docstring).

    :param launcher: a command prefix the server runs under (e.g.
        :func:`agent_link_testing.host_program.launcher`: as the child of a host's program).
    """
    if revision not in ("handshake", "stateless", "auto"):
        raise ValueError(f"revision must be handshake, stateless or auto, not {revision!r}")
    command = [*launcher, sys.executable, "-m", "agent_link_core", *args]
    params = StdioServerParameters(command=command[0], args=command[1:], env=server_env(env))
    # errlog named now: the SDK's default is the sys.stderr of when it was imported, which may
    # be a click CliRunner's capture that no longer has a file descriptor
    async with stdio_client(params, errlog=sys.stderr) as (read, write), ClientSession(read, write) as session:
        refused = False
        if revision == "handshake":
            init: Any = await session.initialize()
        else:
            try:
                init = await session.discover()
            except MCPError as exc:
                if revision == "stateless" or exc.code != METHOD_NOT_FOUND:
                    raise
                refused = True
                init = await session.initialize()
        yield AgentLinkClient(session, init, refused)
