"""The role tools through real MCP client sessions, and a role handover while a reply is open,
with the sender, the old holder and the new holder each on its own ``agent-link mcp`` process."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from agent_link_testing.mcp_client import AgentLinkClient, agent_link_mcp

ROLE_TOOLS = {"set_agent_role", "clear_agent_role", "list_agent_roles", "get_agent_role",
              "set_agent_override_policy", "get_agent_override_policy"}


def env(address: str, admin: bool = False) -> dict[str, str]:
    out = {"AGENT_LINK_ADDRESS": address, "AGENT_LINK_DISABLE_PLUGINS": "codex claude"}
    if admin:
        out["AGENT_LINK_ROLE_ADMIN"] = "1"
    return out


@pytest.mark.anyio
async def test_role_tools_over_mcp(isolated_env: Path) -> None:
    async with AsyncExitStack() as stack:
        admin: AgentLinkClient = await stack.enter_async_context(agent_link_mcp(env("test:admin", admin=True)))
        peer: AgentLinkClient = await stack.enter_async_context(agent_link_mcp(env("test:peer")))
        tools = await admin.tools()
        assert ROLE_TOOLS <= set(tools)
        assert tools["set_agent_role"].annotations.destructive_hint is True
        assert tools["list_agent_roles"].annotations.read_only_hint is True

        refused = await peer.call("set_agent_role", {"role": "builder", "agent": "test:peer"}, meta={"AGENT_LINK_ROLE_ADMIN": "1"})
        assert refused["error"]["details"] == {"reason": "role_admin_disabled"}  # _meta cannot grant it
        bogus = await peer.call("set_agent_role", {"role": "builder", "agent": "test:peer", "AGENT_LINK_ROLE_ADMIN": "1"})
        assert bogus["error"]["code"] == "invalid_arguments"

        out = await admin.call("set_agent_role", {"role": "builder", "agent": "test:bob", "procedure": "Reply within the hour."})
        assert out["ok"] and out["role"]["address"] == "test:bob" and out["role"]["procedure"]["version"] == 1
        policy = await admin.call("set_agent_override_policy", {"target": "role:builder", "effort": ["role:builder", "*"]})
        assert policy["policy"] == {"effort": ["role:builder", "*"]}

        listed = await peer.call("list_agent_roles")
        assert [r["role"] for r in listed["roles"]] == ["builder"] and listed["admin"] is False
        got = await peer.call("get_agent_role", {"role": "role:builder", "includeProcedure": True})
        assert got["role"]["procedure"]["text"] == "Reply within the hour."
        assert got["overridePolicy"] == {"effort": ["role:builder", "*"]}
        assert (await peer.call("get_agent_override_policy", {"target": "test:bob"}))["effective"] == {"effort": ["role:builder", "*"]}
        resolved = await peer.call("resolve_agent", {"query": "role:builder"})
        assert resolved["best"]["address"] == "test:bob" and resolved["via"] == "role:builder"

        cleared = await admin.call("clear_agent_role", {"role": "builder"})
        assert cleared["cleared"] and cleared["role"]["procedure"]["present"]
        gone = await peer.call("message_agent", {"to": "role:builder", "message": "anyone?"})
        assert gone["error"]["code"] == "not_found" and gone["error"]["details"]["role"] == "role:builder"
        health = await peer.call("agent_link_health")
        assert health["sections"]["roles"]["count"] == 1 and health["sections"]["roles"]["assigned"] == 0
    roles = json.loads((isolated_env / "roles.json").read_text())
    assert roles["roles"]["builder"] == {} and roles["overridePolicy"]["role:builder"] == {"effort": ["role:builder", "*"]}


@pytest.mark.anyio
async def test_handover_while_a_reply_is_open_across_servers(isolated_env: Path) -> None:
    async with AsyncExitStack() as stack:
        alice = await stack.enter_async_context(agent_link_mcp(env("test:alice", admin=True)))
        bob = await stack.enter_async_context(agent_link_mcp(env("test:bob")))
        carol = await stack.enter_async_context(agent_link_mcp(env("test:carol")))

        assert (await alice.call("set_agent_role", {"role": "builder", "agent": "test:bob", "procedure": "Say which commit."}))["ok"]
        sent = await alice.call("message_agent", {"to": "role:builder", "message": "Did the build pass?", "anticipation": "reply"})
        assert sent["ok"] and sent["via"] == "role:builder" and sent["to"] == "test:bob"
        assert sent["roleProcedure"] == {"name": "builder", "version": 1, "textIncluded": True}
        mid = sent["messageId"]

        bob_inbox = await bob.call("read_agent_link_inbox")
        assert [m["id"] for m in bob_inbox["messages"]] == [mid]
        assert 'via="role:builder"' in bob_inbox["renderedBlock"] and "Say which commit." in bob_inbox["renderedBlock"]

        moved = await alice.call("set_agent_role", {"role": "builder", "agent": "test:carol"})
        assert moved["handedOver"] == [mid] and moved["previousAddress"] == "test:bob"

        late = await bob.call("reply_agent_link_message", {"messageId": mid, "message": "yes, abc123"})
        assert late["error"]["code"] == "wrong_recipient" and late["error"]["details"]["expected"] == "test:carol"
        assert (await bob.call("read_agent_link_inbox"))["messages"] == []

        carol_inbox = await carol.call("read_agent_link_inbox")
        assert [m["id"] for m in carol_inbox["messages"]] == [mid]
        assert "Say which commit." in carol_inbox["renderedBlock"]  # carol never saw this procedure version
        status = await alice.call("get_agent_link_message_status", {"messageId": mid})
        assert status["holder"] == "test:carol" and status["via"] == "role:builder" and status["status"] == "pending"

        answer = await carol.call("reply_agent_link_message", {"messageId": mid, "message": "Yes, at def456."})
        assert answer["ok"] and answer["status"] == "replied"
        waited = await alice.call("wait_for_agent", {"agent": "role:builder", "replyToMessageId": mid, "timeoutMs": 5000})
        assert waited["outcome"] == "reply" and "Yes, at def456." in waited["reply"]["envelope"]
        assert 'from="test:carol"' in waited["reply"]["envelope"]
