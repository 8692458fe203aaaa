"""A harness filter naming no harness is refused naming the ones there are, in the MCP tools
as in ``agent-link sessions --harness``: an unknown name would answer an empty list, as if no
session ran."""

from __future__ import annotations

import pytest

from agent_link_testing.mcp_client import agent_link_mcp


@pytest.mark.anyio
async def test_list_agents_and_resolve_agent_refuse_an_unknown_harness() -> None:
    """No harness and no plugin listing plain addresses (with the presence plugin a live plain address's scheme is a
    filter too: plugins/presence/tests): every name but ``all`` is refused, saying none is installed."""
    env = {"AGENT_LINK_ADDRESS": "test:alice"}
    async with agent_link_mcp(env) as client:
        listed = await client.call("list_agents", {"harness": "nope"})
        resolved = await client.call("resolve_agent", {"query": "bob", "harness": "nope"})
        own = await client.call("list_agents", {"harness": "test"})
        every = await client.call("list_agents", {"harness": "all"})
    for refused in (listed, resolved, own):
        assert refused["ok"] is False and refused["error"]["code"] == "invalid_arguments"
        [error] = refused["error"]["details"]["errors"]
        assert error["path"] == "harness" and error["expected"] == "all or one of no harness (none is installed)"
    assert every["ok"] is True
