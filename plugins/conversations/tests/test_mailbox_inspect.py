"""``agent_link_mailbox_inspect`` (agent_link_conversations.tools; it was the core's): its declaration, each error it
returns and its filters through a real MCP client session. The plugin loads alone (conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_link_testing.mcp_client import agent_link_mcp

NAME = "agent_link_mailbox_inspect"
pytestmark = pytest.mark.anyio


async def test_the_tool_is_declared_as_when_the_core_had_it(isolated_env: Path) -> None:
    async with agent_link_mcp({"AGENT_LINK_ADDRESS": "team:alice"}) as alice:
        tool = (await alice.tools())[NAME]
    assert tool.title == "Inspect the agent-link mailbox"
    assert tool.description and tool.description.startswith("List messages you sent or received (newest first)")
    assert tool.input_schema["additionalProperties"] is False and "required" not in tool.input_schema
    assert set(tool.input_schema["properties"]) == {"fromSessionId", "toSessionId", "replyToMessageId", "undelivered", "pendingAck",
                                                    "since", "limit", "scope", "includeBodies"}
    assert tool.input_schema["properties"]["limit"] == {"type": "integer", "minimum": 1, "maximum": 500, "default": 50}
    out = tool.output_schema
    assert out is not None and out["additionalProperties"] is False
    assert set(out["properties"]) == {"messages", "scope", "callerAddress", "note", "ok", "error", "warnings"}
    ann = tool.annotations
    assert ann is not None and (ann.read_only_hint, ann.idempotent_hint, ann.destructive_hint, ann.open_world_hint) == (
        True, False, False, False)


async def test_inspect_lists_filters_and_refuses_over_mcp(isolated_env: Path) -> None:
    async with (agent_link_mcp({"AGENT_LINK_ADDRESS": "team:alice"}) as alice,
                agent_link_mcp({"AGENT_LINK_ADDRESS": "team:carol"}) as carol,
                agent_link_mcp({"AGENT_LINK_ADDRESS": "team:auditor", "AGENT_LINK_INSPECT_ALL": "1"}) as auditor,
                agent_link_mcp({}) as anon):
        assert (await alice.call(NAME))["messages"] == []
        m1 = (await alice.call("message_agent", {"to": "team:bob", "message": "first", "anticipation": "reply"}))["messageId"]
        m2 = (await alice.call("message_agent", {"to": "team:bob", "message": "second"}))["messageId"]
        c1 = (await carol.call("message_agent", {"to": "team:bob", "message": "carol to bob"}))["messageId"]

        mine = await alice.call(NAME)
        assert [m["id"] for m in mine["messages"]] == [m2, m1] and mine["callerAddress"] == "team:alice"  # newest first
        assert "envelope" not in mine["messages"][0] and "body" not in mine["messages"][0]
        assert [m["id"] for m in (await alice.call(NAME, {"pendingAck": True}))["messages"]] == [m1]
        assert [m["id"] for m in (await alice.call(NAME, {"undelivered": True, "limit": 1}))["messages"]] == [m2]
        assert (await alice.call(NAME, {"replyToMessageId": m1}))["messages"] == []
        assert len((await alice.call(NAME, {"since": "2000-01-01T00:00:00Z"}))["messages"]) == 2
        assert (await alice.call(NAME, {"since": "2999-01-01T00:00:00+00:00"}))["messages"] == []

        # scope all: only with AGENT_LINK_INSPECT_ALL
        refused = await alice.call(NAME, {"scope": "all"})
        assert refused["error"]["code"] == "permission_denied" and refused["error"]["details"] == {"reason": "inspect_all_disabled"}
        everything = await auditor.call(NAME, {"scope": "all"})
        assert [m["id"] for m in everything["messages"]] == [c1, m2, m1]
        assert (await auditor.call(NAME))["messages"] == []  # scope caller: the auditor has no mail
        from_carol = await auditor.call(NAME, {"scope": "all", "fromSessionId": "team:carol", "includeBodies": True})
        assert [m["id"] for m in from_carol["messages"]] == [c1] and "carol to bob" in from_carol["messages"][0]["envelope"]
        nobody = await anon.call(NAME)
        assert nobody["messages"] == [] and nobody["callerAddress"] is None and nobody["note"]

        # invalid_arguments: a bad since, its removed number form (the hint says what to give), a limit out of range
        for since in ("yesterday", "1700000000000", "2020-01-01T00:00:00"):
            bad = await alice.call(NAME, {"since": since})
            assert bad["error"]["code"] == "invalid_arguments" and [e["path"] for e in bad["error"]["details"]["errors"]] == ["since"]
        for epoch in (1700000000000, 1.7e12):
            removed = (await alice.call(NAME, {"since": epoch}))["error"]
            assert [(e["path"], e["rule"]) for e in removed["details"]["errors"]] == [("since", "removed")]
            assert removed["details"]["removed"][0]["argument"] == "since" and "ISO 8601" in removed["details"]["removed"][0]["replacement"]
            assert "since as a number was removed: give an ISO 8601 string" in removed["hint"]
        for args, rule in (({"limit": 501}, "maximum"), ({"limit": 0}, "minimum")):
            out = (await alice.call(NAME, args))["error"]
            assert [(e["path"], e["rule"]) for e in out["details"]["errors"]] == [("limit", rule)]
        assert (await alice.call(NAME, {"limit": 500}))["ok"]
        unknown = (await alice.call(NAME, {"bogus": 1}))["error"]
        assert [(e["path"], e["rule"]) for e in unknown["details"]["errors"]] == [("bogus", "unknown_property")]
        runaway = (await alice.call(NAME, {"fromSessionId": "s" * 100_000}))["error"]
        assert [(e["path"], e["rule"]) for e in runaway["details"]["errors"]] == [("fromSessionId", "maxLength")]
