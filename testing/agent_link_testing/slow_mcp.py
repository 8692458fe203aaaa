"""A stdio MCP server whose one tool takes as long as asked: keeps a host's turn busy in a
tool call (``python -m agent_link_testing.slow_mcp``).

Tool ``sleep {seconds}`` (0-600) waits that long, then returns ``slept <seconds>``. Used to
hold a real Codex turn inside a long tool call while something is steered into it.
"""

from __future__ import annotations

import asyncio

from mcp.server.mcpserver import MCPServer

server = MCPServer("slow")


@server.tool(structured_output=False)
async def sleep(seconds: float) -> str:
    """Wait ``seconds`` (0-600), then answer."""
    await asyncio.sleep(max(0.0, min(float(seconds), 600.0)))
    return f"slept {seconds}"


if __name__ == "__main__":
    server.run()
