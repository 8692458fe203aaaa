"""A harness filter naming no harness is refused naming the ones there are, in the MCP tools
as in ``agent-link sessions --harness``: an unknown name would answer an empty list, as if no
session ran."""

from __future__ import annotations

import pytest

from agent_link_testing.mcp_client import agent_link_mcp


@pytest.mark.anyio
async def test_list_agents_and_resolve_agent_refuse_an_unknown_harness() -> None:
    env = {"AGENT_LINK_ADDRESS": "test:alice", "AGENT_LINK_DISABLE_PLUGINS": "codex claude"}
    async with agent_link_mcp(env) as client:
        listed = await client.call("list_agents", {"harness": "nope"})
        resolved = await client.call("resolve_agent", {"query": "bob", "harness": "nope"})
        own = await client.call("list_agents", {"harness": "test"})  # the scheme of a live plain address
        every = await client.call("list_agents", {"harness": "all"})
    for refused in (listed, resolved):
        assert refused["ok"] is False and refused["error"]["code"] == "invalid_arguments"
        [error] = refused["error"]["details"]["errors"]
        assert error["path"] == "harness" and "test" in error["expected"]
    assert own["ok"] is True and every["ok"] is True
