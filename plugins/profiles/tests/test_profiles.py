"""The ``AGENT_LINK_TOOLS`` setting: which MCP tools the server offers (agent_link_profiles.profiles),
and ``agent_link_tools``, which reaches the others (agent_link_profiles.gateway)."""

from __future__ import annotations

import pytest
from agent_link_testing.mcp_client import agent_link_mcp
from agent_link_testing.tool_app import call_tool

from agent_link_core.app import App
from agent_link_core.tools.core_tools import CORE_TOOLS
from agent_link_profiles.profiles import CORE_OWNER, MESSAGING_OWNERS, effective_profile, select_tools

TOOLS = {"agent_link_health": 1, "message_agent": 2, "codex_thing": 3, "roles_thing": 4}
OWNERS = {"agent_link_health": CORE_OWNER, "message_agent": CORE_OWNER, "codex_thing": "codex", "roles_thing": "roles"}


@pytest.mark.parametrize(("value", "offered"), [
    (None, ["agent_link_health", "message_agent", "codex_thing", "roles_thing"]),
    ("", ["agent_link_health", "message_agent", "codex_thing", "roles_thing"]),
    ("all", ["agent_link_health", "message_agent", "codex_thing", "roles_thing"]),
    ("messaging", ["agent_link_health", "message_agent"]),
    ("codex", ["agent_link_health", "message_agent", "codex_thing"]),
    ("roles_thing", ["agent_link_health", "roles_thing"]),
    ("codex, roles_thing", ["agent_link_health", "message_agent", "codex_thing", "roles_thing"]),
    # a profile that names nothing known would leave an agent without tools: all are offered
    ("nonsense", ["agent_link_health", "message_agent", "codex_thing", "roles_thing"]),
    ("roles_thing mesaging", ["agent_link_health", "roles_thing"]),
])
def test_profiles(value: str | None, offered: list[str]) -> None:
    assert list(select_tools(TOOLS, OWNERS, value)) == offered


def test_an_unknown_item_is_logged_and_warned_of(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    select_tools(TOOLS, OWNERS, "mesaging")
    assert "mesaging" in caplog.text
    for value, warned in (("agent_link_tools mesaging", True), ("agent_link_tools messaging", False)):
        monkeypatch.setenv("AGENT_LINK_TOOLS", value)
        app = App.create()
        try:
            section = app.health()["sections"]["toolProfile"]
        finally:
            app.close()
        assert section["profile"] == value
        if warned:
            [warning] = section["warnings"]
            assert warning["code"] == "unknown_tool_profile_item" and warning["details"] == {"items": ["mesaging"]}
            assert "the tools the other items name" in section["summary"]
        else:
            assert section["warnings"] == [] and "summary" not in section


@pytest.mark.anyio
async def test_a_misspelt_profile_keeps_the_tools_and_health_says_so() -> None:
    async with agent_link_mcp({"AGENT_LINK_TOOLS": "mesaging", "AGENT_LINK_ADDRESS": "team:alice"}) as client:
        assert {"message_agent", "read_agent_link_inbox"} <= set(await client.tools())
        health = await client.call("agent_link_health")
    assert [w["code"] for w in health["sections"]["toolProfile"]["warnings"]] == ["unknown_tool_profile_item"]
    assert "every tool is offered" in health["sections"]["toolProfile"]["summary"]


@pytest.mark.anyio
async def test_profile_through_a_real_mcp_session(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENT_LINK_LOAD_PLUGINS")  # the codex and receipts profiles need those plugins
    app = App.create()
    try:
        core = {name for name, owner in app.hooks.tool_owners().items() if owner in MESSAGING_OWNERS}
    finally:
        app.close()
    assert {spec.name for spec in CORE_TOOLS} | {"get_agent_link_conversation"} <= core
    async with agent_link_mcp({"AGENT_LINK_TOOLS": "messaging"}) as client:
        assert set(await client.tools()) == core | {"agent_link_tools"}
        hidden = await client.call("list_agent_link_receipts")
        assert hidden["ok"] is False and hidden["error"]["code"] == "unknown_tool"
        # installed but left out of this list: said so, with the way to it (it said "There is no tool named")
        assert hidden["error"]["message"] == "'list_agent_link_receipts' is installed but this server does not offer it."
        assert "call it through agent_link_tools" in hidden["error"]["hint"]
        assert (await client.call("no_such_tool"))["error"]["message"] == "There is no tool named 'no_such_tool'."
    async with agent_link_mcp({"AGENT_LINK_TOOLS": "codex"}) as client:
        offered = set(await client.tools())
        assert core < offered and "list_agent_link_receipts" not in offered


def test_messaging_lists_the_conversations_plugin_s_tool_as_when_the_core_had_it() -> None:
    tools, owners = {**TOOLS, "get_agent_link_conversation": 5}, {**OWNERS, "get_agent_link_conversation": "conversations"}
    assert list(select_tools(tools, owners, "messaging")) == ["agent_link_health", "message_agent", "get_agent_link_conversation"]
    assert list(select_tools(tools, owners, "codex")) == ["agent_link_health", "message_agent", "codex_thing",
                                                          "get_agent_link_conversation"]


class _Config:
    def __init__(self, value: str | None) -> None:  # the App's config, as effective_profile reads it
        self.sources = {} if value is None else {"AGENT_LINK_TOOLS": "AGENT_LINK_TOOLS"}
        self.value = value

    def get(self, name: str) -> str | None:
        return self.value if self.value is not None else "all"


@pytest.mark.parametrize(("value", "host", "profile"), [
    (None, None, "all"),            # a plain MCP client
    (None, "somehost", "messaging"),  # a server a host plugin declared
    ("all", "somehost", "all"),     # the person's setting wins
    ("roles", None, "roles"),
])
def test_the_default_profile_depends_on_who_started_the_server(value: str | None, host: str | None, profile: str) -> None:
    assert effective_profile(_Config(value), host) == profile


HOSTED = {"AGENT_LINK_HOST": "filehost", "AGENT_LINK_LOAD_PLUGINS": "filehost profiles", "AGENT_LINK_ADDRESS": "team:alice"}


@pytest.mark.anyio
async def test_a_host_lists_the_messaging_tools_and_reaches_the_others_through_agent_link_tools() -> None:
    async with agent_link_mcp(HOSTED) as client:
        listed = await client.tools()
        assert "agent_link_tools" in listed and "message_agent" in listed and "filehost_sessions" not in listed
        listed_tool = listed["agent_link_tools"]
        assert listed_tool.input_schema["additionalProperties"] is False
        # not read-only and destructive: it calls the tools a host's list leaves out, the role-admin ones too
        assert listed_tool.annotations.read_only_hint is False and listed_tool.annotations.destructive_hint is True
        assert set(listed_tool.output_schema["properties"]) >= {"ok", "tools", "tool", "result"}

        names = await client.call("agent_link_tools")
        assert names["ok"] is True
        assert {t["name"]: t["plugin"] for t in names["tools"]} == {"filehost_sessions": "filehost"}
        described = await client.call("agent_link_tools", {"name": "filehost_sessions"})
        assert described["tool"]["inputSchema"]["properties"]["includeArchived"]["type"] == "boolean"
        called = await client.call("agent_link_tools", {"name": "filehost_sessions", "arguments": {}})
        assert called["ok"] is True and called["result"]["ok"] is True and "sessions" in called["result"]


@pytest.mark.anyio
async def test_agent_link_tools_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    """In this process (the test above goes through a real server)."""
    for name, value in HOSTED.items():
        monkeypatch.setenv(name, value)
    app = App.create()
    try:
        unknown = await call_tool(app, "agent_link_tools", name="no_such_tool")
        assert unknown["ok"] is False and unknown["error"]["code"] == "unknown_tool"
        listed = await call_tool(app, "agent_link_tools", name="message_agent")  # in tools/list already
        assert listed["ok"] is False and listed["error"]["code"] == "unknown_tool"
        nameless = await call_tool(app, "agent_link_tools", arguments={})
        assert nameless["ok"] is False and nameless["error"]["code"] == "invalid_arguments"
        bad = await call_tool(app, "agent_link_tools", name="filehost_sessions", arguments={"includeArchived": "x"})
        assert bad["ok"] is False and bad["error"]["code"] == "invalid_arguments" and "result" not in bad, bad
        assert bad["error"]["details"]["tool"] == "filehost_sessions" and bad["error"]["message"].startswith("filehost_sessions: ")
        assert [e["path"] for e in bad["error"]["details"]["errors"]] == ["arguments.includeArchived"]
        wrong = await call_tool(app, "agent_link_tools", name=3)
        assert wrong["ok"] is False and wrong["error"]["code"] == "invalid_arguments"
    finally:
        await app.aclose()
