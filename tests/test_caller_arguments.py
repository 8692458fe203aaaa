"""``Harness.caller_arguments``: arguments a host's side adds to every tool call to name the
caller reach ``identify_caller`` as meta and never the tool's validation; a harness that
declares them badly is refused at registration."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_core.harness import Harness
from agent_link_core.model import Caller
from agent_link_core.tools.registry import run_tool
from agent_link_testing.harnesses import HarnessPlugin

pytestmark = pytest.mark.anyio


class NamingHarness(Harness):
    name = "naming"
    caller_arguments = ("_namingCaller",)

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def identify_caller(self, meta: Mapping[str, Any], env: Mapping[str, str]) -> Caller | None:
        self.seen.append(dict(meta))
        named = meta.get("_namingCaller")
        return Caller(f"naming:{named}", "runtime_context", "naming") if isinstance(named, str) else None


def make_app(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> App:
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "")
    return App.create(extra_plugins=(("naming", HarnessPlugin(harness)),))


async def test_a_declared_caller_argument_goes_to_identify_caller_not_to_the_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    harness = NamingHarness()
    app = make_app(harness, monkeypatch)
    try:
        spec = app.hooks.tools()["message_agent"]
        result = await run_tool(app, spec, {"to": "test:bob", "message": "hi", "_namingCaller": "one"}, {"progressToken": 1})
        assert result["ok"], result
        assert {"_namingCaller": "one", "progressToken": 1} in harness.seen
        row = app.store.conn.execute("SELECT from_addr FROM messages").fetchone()
        assert row["from_addr"] == "naming:one"
        # an argument no harness declared is still an error of the tool's schema
        refused = await run_tool(app, spec, {"to": "test:bob", "message": "hi", "_otherCaller": "one"}, {})
        assert not refused["ok"] and refused["error"]["code"] == "invalid_arguments", refused
    finally:
        await app.aclose()


@pytest.mark.parametrize("declared", [("noUnderscore",), ["_aList"], ("_",), (1,)])
def test_a_harness_declaring_caller_arguments_badly_is_refused(declared: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    harness = NamingHarness()
    harness.caller_arguments = declared
    app = make_app(harness, monkeypatch)
    assert "naming" not in app.harnesses
    [problem] = [p for p in app.hooks.boundary.report() if p["plugin"] == "naming"]
    assert "caller_arguments" in problem["error"], problem
