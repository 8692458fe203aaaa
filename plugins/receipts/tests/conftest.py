"""Fixtures for the receipts plugin's tests: Apps with the real plugins loaded (host harnesses
disabled, so no host is looked for) and a way to call a tool as any caller."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError
from agent_link_core.model import Caller
from agent_link_core.tools.registry import ToolCall, validate_arguments

ALICE = Caller("test:alice", "config", "test")

RunTool = Callable[..., Awaitable[dict[str, Any]]]


@pytest.fixture
def make_app(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., App]]:
    """``make_app(**env)``: an App of the installed plugins (codex and claude disabled) with
    ``env`` set in the process environment, which the plugins' hooks read too."""
    apps: list[App] = []

    def make(**env: str) -> App:
        monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "codex claude")
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        app = App.create()
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.close()


@pytest.fixture
def app(make_app: Callable[..., App]) -> App:
    """An App of the installed plugins, host harnesses disabled."""
    return make_app()


@pytest.fixture
def run_tool() -> RunTool:
    """``await run_tool(app, name, args, caller=ALICE)``: the tool's result object, arguments
    validated as the MCP layer does, errors as ``{"ok": False, "error": ...}``."""

    async def run(app: App, name: str, args: dict[str, Any], caller: Caller = ALICE) -> dict[str, Any]:
        spec = app.hooks.tools()[name]
        try:
            validated, warnings = validate_arguments(spec, args)
            fields = await spec.handler(app, validated, ToolCall({}, caller, warnings))
        except AgentLinkError as exc:
            return {"ok": False, "error": exc.to_dict()}
        return {"ok": True, **fields}

    return run
