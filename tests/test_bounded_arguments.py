"""An argument naming an agent (an address, a bare id, a role, words of a title) is bounded,
whichever plugin declares the tool: a runaway value is refused as ``invalid_arguments``
naming the field, instead of being resolved and echoed back whole (a 100 KB ``to`` once came
back twice in a ``not_found`` answer)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_link_core.app import App
from agent_link_core.tools import schemas
from agent_link_testing.mcp_client import agent_link_mcp
from tests.test_tool_id_schemas import _properties

#: argument names that name an agent or a session to be resolved, or words to find one by
AGENT_NAMING = {"to", "agent", "query", "threadId", "target", "fromSessionId", "toSessionId"}


@pytest.mark.installed_plugins
def test_every_argument_naming_an_agent_is_bounded(isolated_env: Path) -> None:
    app = App.create()
    try:
        tools = app.hooks.tools()
    finally:
        app.close()
    checked, unbounded = 0, []
    for name, spec in tools.items():
        for path, prop in _properties(spec.input_schema):
            if path in AGENT_NAMING and "string" in str(prop.get("type")) and "enum" not in prop:
                checked += 1
                # an address pattern bounds it already
                if prop.get("maxLength", float("inf")) > schemas.AGENT_QUERY["maxLength"] and "pattern" not in prop:
                    unbounded.append(f"{name}.{path}")
    assert checked >= 10 and unbounded == []


@pytest.mark.anyio
@pytest.mark.parametrize(("tool", "arguments", "field"), [
    ("message_agent", {"to": "team:" + "b" * 100_000, "message": "x"}, "to"),
    ("resolve_agent", {"query": "q" * 100_000}, "query"),
    ("wait_for_agent", {"agent": "a" * 100_000, "timeoutMs": 10}, "agent"),
    ("agent_link_mailbox_inspect", {"fromSessionId": "s" * 100_000}, "fromSessionId"),
])
@pytest.mark.installed_plugins("waits", "conversations")
async def test_a_runaway_agent_name_is_refused_not_echoed(tool: str, arguments: dict[str, object], field: str) -> None:
    env = {"AGENT_LINK_ADDRESS": "test:alice", "AGENT_LINK_DISABLE_PLUGINS": "codex claude"}
    async with agent_link_mcp(env) as client:
        result = await client.call(tool, arguments)
    assert result["ok"] is False and result["error"]["code"] == "invalid_arguments"
    assert [(e["path"], e["rule"]) for e in result["error"]["details"]["errors"]] == [(field, "maxLength")]
    assert len(str(result)) < 2000  # the value is not echoed back
