"""The ``AGENT_LINK_TOOLS`` setting: which MCP tools the server offers (agent_link_core.tool_profiles)."""

from __future__ import annotations

import pytest
from agent_link_testing.mcp_client import agent_link_mcp

from agent_link_core.app import App
from agent_link_core.tool_profiles import CORE_OWNER, select_tools, settings_warnings
from agent_link_core.tools.core_tools import CORE_TOOLS

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


def test_an_unknown_item_is_logged_and_warned_of(caplog: pytest.LogCaptureFixture) -> None:
    select_tools(TOOLS, OWNERS, "mesaging")
    assert "mesaging" in caplog.text
    [warning] = settings_warnings(TOOLS, OWNERS, "codex mesaging")
    assert warning["code"] == "unknown_tool_profile_item" and warning["details"] == {"items": ["mesaging"]}
    assert settings_warnings(TOOLS, OWNERS, "codex messaging") == []


@pytest.mark.anyio
async def test_a_misspelt_profile_keeps_the_tools_and_health_says_so() -> None:
    async with agent_link_mcp({"AGENT_LINK_TOOLS": "mesaging", "AGENT_LINK_ADDRESS": "team:alice"}) as client:
        assert {"message_agent", "read_agent_link_inbox"} <= set(await client.tools())
        health = await client.call("agent_link_health")
    assert [w["code"] for w in health["settings"]["warnings"]] == ["unknown_tool_profile_item"]


@pytest.mark.anyio
@pytest.mark.installed_plugins  # the codex and receipts profiles need those plugins
async def test_profile_through_a_real_mcp_session() -> None:
    app = App.create()
    try:
        core = {name for name, owner in app.hooks.tool_owners().items() if owner == CORE_OWNER}
    finally:
        app.close()
    assert {spec.name for spec in CORE_TOOLS} <= core
    async with agent_link_mcp({"AGENT_LINK_TOOLS": "messaging"}) as client:
        assert set(await client.tools()) == core
        hidden = await client.call("list_agent_link_receipts")
        assert hidden["ok"] is False and hidden["error"]["code"] == "unknown_tool"
    async with agent_link_mcp({"AGENT_LINK_TOOLS": "codex"}) as client:
        offered = set(await client.tools())
        assert core < offered and "list_agent_link_receipts" not in offered
