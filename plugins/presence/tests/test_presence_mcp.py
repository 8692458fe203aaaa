"""The presence plugin through real MCP client sessions of ``agent-link mcp`` (the core and this plugin alone): each
server's plain address is present while it runs, so list_agents shows the peer, a typo gets a "did you mean" warning,
and requireKnown refuses it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from agent_link_testing.mcp_client import AgentLinkClient, agent_link_mcp

from agent_link_core.app import App

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]
CALL_BOUND_S = 30.0


class Peer:
    """One connected server, as its client calls it."""

    def __init__(self, client: AgentLinkClient) -> None:
        self.client = client

    async def call(self, name: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
        with anyio.fail_after(CALL_BOUND_S):
            return await self.client.call(name, arguments)

    async def ok(self, name: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
        result = await self.call(name, arguments)
        assert result["ok"] is True, (name, arguments, result)
        return result

    async def fail(self, name: str, arguments: Mapping[str, Any], code: str) -> dict[str, Any]:
        result = await self.call(name, arguments)
        assert result["ok"] is False and result["error"]["code"] == code, (name, arguments, result)
        return result["error"]

    async def send(self, to: str, message: str, **extra: Any) -> dict[str, Any]:
        return await self.ok("message_agent", {"to": to, "message": message, **extra})


@asynccontextmanager
async def server(address: str) -> AsyncIterator[Peer]:
    """``agent-link mcp`` serving ``address`` on the test's state dir, with only this plugin loaded."""
    async with agent_link_mcp({"AGENT_LINK_ADDRESS": address, "AGENT_LINK_LOAD_PLUGINS": "presence"}) as client:
        yield Peer(client)


async def test_a_server_lists_its_own_plain_address_as_a_running_session() -> None:
    async with server("test:alice") as alice:
        listed = await alice.ok("list_agents")
        assert [s["address"] for s in listed["sessions"]] == ["test:alice"] and listed["caller"]["address"] == "test:alice"
        assert listed["sessions"][0]["presence"] == {"source": "mcp", "running": True}


async def test_plain_addresses_find_each_other_and_typos_are_caught() -> None:
    async with server("team:alice") as alice, server("team:bob") as bob:
        listed = await alice.ok("list_agents")
        assert {"team:alice", "team:bob"} <= {s["address"] for s in listed["sessions"]}
        assert (await bob.ok("list_agents", {"harness": "team"}))["sessions"]

        typo = await alice.send("team:bobb", "hello?")
        warning = next(w for w in typo["warnings"] if w["code"] == "unknown_address")
        assert warning["details"] == {"address": "team:bobb", "suggestions": ["team:bob"]}
        assert "did you mean team:bob" in warning["message"].lower()
        wrong_harness = await alice.send("tema:bob", "hello?")
        assert [w["details"]["suggestions"] for w in wrong_harness["warnings"]] == [["team:bob"]]
        assert "warnings" not in await alice.send("team:bob", "hello", requireKnown=True)

        error = await alice.fail("message_agent", {"to": "team:bobb", "message": "x", "requireKnown": True}, "not_found")
        assert error["details"]["candidates"] == [{"address": "team:bob"}] and "team:bob" in error["hint"]
        # Nothing was stored for the refused send.
        app = App.create()  # the servers' state dir (agent_link_mailbox_inspect is the conversations plugin's)
        try:
            sent = [row[0] for row in app.store.conn.execute("SELECT to_addr FROM messages WHERE from_addr = 'team:alice'")]
        finally:
            app.close()
        assert sorted(sent) == ["team:bob", "team:bobb", "tema:bob"]


async def test_the_scheme_of_a_live_plain_address_is_a_harness_filter_and_others_are_refused_naming_it() -> None:
    async with server("test:alice") as alice:
        listed = await alice.call("list_agents", {"harness": "nope"})
        resolved = await alice.call("resolve_agent", {"query": "bob", "harness": "nope"})
        own = await alice.call("list_agents", {"harness": "test"})  # the scheme of a live plain address
        every = await alice.call("list_agents", {"harness": "all"})
    for refused in (listed, resolved):
        assert refused["ok"] is False and refused["error"]["code"] == "invalid_arguments"
        [error] = refused["error"]["details"]["errors"]
        assert error["path"] == "harness" and "test" in error["expected"]
    assert own["ok"] is True and every["ok"] is True
