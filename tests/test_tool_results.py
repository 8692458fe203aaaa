"""A plugin tool's result is checked against its declared output schema before it leaves: MCP
clients refuse structuredContent that does not validate against outputSchema (the SDK client
raises), so a bad result becomes an internal_error naming the plugin, never a crash or a
malformed answer, and the plugin problem shows in health."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_testing.dists import install_dist
from agent_link_testing.mcp_client import agent_link_mcp

pytestmark = pytest.mark.anyio

# The faulty plugin: each tool declares {count: integer} and returns something else.
FAULTY = '''
from agent_link_core import hookimpl
from agent_link_core.tools.registry import ToolSpec

RESULTS = {
    "faulty_good": {"count": 3},
    "faulty_types": {"count": "three"},
    "faulty_list": [1, 2],
    "faulty_warnings": {"count": 1, "warnings": "not a list"},
    "faulty_warning_shape": {"count": 1, "warnings": [{"text": "no code, no message"}]},
}


def handler(name):
    async def run(app, args, call):
        return RESULTS[name]
    return run


@hookimpl
def agent_link_register_tools(register):
    for name in RESULTS:
        register(ToolSpec(name, "A tool of the faulty example plugin.", {"type": "object", "properties": {}, "additionalProperties": False},
                          {"count": {"type": "integer"}}, handler(name), read_only=True))
'''
BAD = {  # tool -> where its result breaks the schema
    "faulty_types": [{"path": "count", "rule": "type"}],
    "faulty_list": [{"path": "", "rule": "type"}],
    "faulty_warnings": [{"path": "warnings.0", "rule": "type"}],
    "faulty_warning_shape": [{"path": "warnings.0", "rule": "required"}],
}


@pytest.fixture
def site(tmp_path: Path) -> Path:
    install_dist(tmp_path / "site", "agent_link_faulty", {"plugin.py": FAULTY}, entry_name="faulty",
                 entry_module="agent_link_faulty.plugin")
    return tmp_path / "site"


def check_refusal(result: dict[str, Any], tool: str) -> None:
    assert result["ok"] is False, result
    error = result["error"]
    assert error["code"] == "internal_error" and set(error) == {"code", "message", "details", "hint"}
    assert error["details"] == {"cause": "output_schema", "plugin": "faulty", "errors": BAD[tool]}
    assert "faulty" in error["message"] and tool in error["message"] and "faulty" in error["hint"]


async def test_a_result_its_schema_refuses_is_an_internal_error_naming_the_plugin(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(site))
    import agent_link_faulty.plugin as faulty  # type: ignore[import-not-found]

    from agent_link_core.tools.registry import run_tool

    app = App.create(extra_plugins=(("faulty", faulty),))
    try:
        tools = app.hooks.tools()
        assert (await run_tool(app, tools["faulty_good"], {}, {})) == {"ok": True, "count": 3}
        for tool in BAD:
            check_refusal(await run_tool(app, tools[tool], {}, {}), tool)
        problems = [p for p in app.health()["plugins"]["problems"] if p["plugin"] == "faulty"]
        assert {p["hook"] for p in problems} == {f"tool {tool}" for tool in BAD} and not any(p["disabled"] for p in problems)
        assert (await run_tool(app, tools["faulty_good"], {}, {}))["ok"] is True  # the plugin keeps serving
        # the core's own tools pass the same check
        sent = await run_tool(app, tools["message_agent"], {"to": "test:bob", "message": "hi"}, {})
        assert sent["ok"] is True, sent
    finally:
        app.close()


async def test_through_a_real_mcp_client_a_bad_result_is_an_error_object(site: Path) -> None:
    """The SDK client validates structuredContent against outputSchema and raises on a
    mismatch: the server must never send one."""
    env = {"PYTHONPATH": str(site), "AGENT_LINK_LOAD_PLUGINS": "faulty", "AGENT_LINK_ADDRESS": "test:alice"}
    async with agent_link_mcp(env) as client:
        assert {"faulty_good", *BAD} <= set(await client.tools())
        assert await client.call("faulty_good") == {"ok": True, "count": 3}
        for tool in BAD:
            check_refusal(await client.call(tool), tool)
        health = await client.call("agent_link_health")
        assert {p["hook"] for p in health["plugins"]["problems"] if p["plugin"] == "faulty"} == {f"tool {t}" for t in BAD}


def test_unknown_tool_names_a_listed_tool_that_reaches_the_others() -> None:
    """A registered tool the server leaves out: ``unknown_tool`` says so and names the listed tool that reaches it
    (``ToolSpec.reaches_unlisted``), or tools/list without one; a name nobody registered is no tool."""
    from agent_link_core.tools.registry import ToolSpec, unknown_tool

    async def handler(app: Any, args: dict[str, Any], call: Any) -> dict[str, Any]:
        return {}

    plain = ToolSpec("plain", "d", {"type": "object"}, {}, handler)
    gateway = ToolSpec("gate", "d", {"type": "object"}, {}, handler, reaches_unlisted=True)
    for listed, hint in (({"plain": plain}, "tools/list names those it offers"), ({"plain": plain, "gate": gateway}, "call it through gate")):
        error = unknown_tool("hidden", listed, ("plain", "gate", "hidden"))["error"]
        assert error["message"] == "'hidden' is installed but this server does not offer it."
        assert error["details"] == {"name": "hidden", "listed": False}
        assert error["hint"] == f"This server's tool list leaves it out; {hint}."
    error = unknown_tool("nothing", {"gate": gateway}, ("gate",))["error"]
    assert error == {"code": "unknown_tool", "message": "There is no tool named 'nothing'.", "details": {"name": "nothing"},
                     "hint": "tools/list names the tools this server offers."}
