"""``agent-link mcp`` with and without agent-link-hostkit.

The start-up front and the stdio transport that answers every line are the host kit's
(``plugins/hostkit/agent_link_hostkit/fastfront.py`` and ``stdio_transport.py``): hosts' behaviour is
why they exist. The kit declares them in the ``agent_link_mcp_front`` entry-point group; the
core imports no package of it. Without a usable front (a core installed alone, no host
plugin) the server serves over the MCP SDK's stdio transport: a real MCP client still lists
the tools and sends. The host kit is hidden by a package of its name earlier on
``PYTHONPATH`` whose import fails: its declared front cannot load, which the server says in
one stderr line and serves on, as it does when no front is declared
(tests/test_discovery.py holds that case and the others in process).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_link_testing.mcp_client import agent_link_mcp


@pytest.mark.anyio
@pytest.mark.parametrize("hostkit", [True, False], ids=["with-hostkit", "core-alone"])
async def test_the_server_serves_with_or_without_the_host_kit(tmp_path: Path, hostkit: bool) -> None:
    cache = tmp_path / "cache"
    env = {"XDG_CACHE_HOME": str(cache), "AGENT_LINK_ADDRESS": "test:alice"}
    if not hostkit:
        shadow = tmp_path / "path" / "agent_link_hostkit"
        shadow.mkdir(parents=True)
        (shadow / "__init__.py").write_text("raise ImportError('agent-link-hostkit is not installed')\n")
        env["PYTHONPATH"] = str(shadow.parent)
    async with agent_link_mcp(env) as client:
        assert "message_agent" in await client.tools()
        sent = await client.call("message_agent", {"to": "test:bob", "message": "hi"})
        assert sent["ok"] is True, sent
        read = await client.call("read_agent_link_inbox")
        assert read["ok"] is True, read
    # the front keeps the full server's opening answers for the next start; the core alone has no front
    kept = list((cache / "agent-link" / "mcp-front").glob("*.json"))
    assert bool(kept) is hostkit, kept
