"""A real MCP client session against ``agent-link mcp`` in a subprocess (stdio).

Uses the MCP Python SDK's client with the classic ``initialize`` handshake, as real hosts do.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

from mcp.client.session import ClientSession
from mcp_types import RequestParamsMeta
from mcp.client.stdio import StdioServerParameters, stdio_client

CALL_TIMEOUT_S = 60.0


@dataclass
class AgentLinkClient:
    """A connected client; :meth:`call` returns the tool's result object."""

    session: ClientSession
    init: Any

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
async def agent_link_mcp(env: Mapping[str, str] | None = None, args: tuple[str, ...] = ("mcp",)) -> AsyncIterator[AgentLinkClient]:
    """Start ``agent-link mcp`` (``python -m agent_link_core mcp``) and yield a client."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "agent_link_core", *args], env=server_env(env))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            yield AgentLinkClient(session, init)
