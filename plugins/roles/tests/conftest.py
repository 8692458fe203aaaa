"""Fixtures for the roles plugin's tests: Apps with the real plugins loaded (host harnesses
disabled, so no host is looked for) and a way to call a tool as any caller."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_core.model import Caller
from agent_link_testing.plugin_suites import app_factory, call_tool

ADMIN = Caller("test:admin", "config", "test")

RunTool = Callable[..., Awaitable[dict[str, Any]]]


@pytest.fixture
def make_app(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., App]]:
    """``make_app(**env)``: an App of the installed plugins (codex and claude disabled) with
    ``env`` set in the process environment."""
    with app_factory(monkeypatch) as make:
        yield make


@pytest.fixture
def app(make_app: Callable[..., App]) -> App:
    """An App whose server was started with AGENT_LINK_ROLE_ADMIN=1."""
    return make_app(AGENT_LINK_ROLE_ADMIN="1")


@pytest.fixture
def run_tool() -> RunTool:
    """``await run_tool(app, name, args, caller=ADMIN)``: the tool's result object."""

    async def run(app: App, name: str, args: dict[str, Any], caller: Caller = ADMIN) -> dict[str, Any]:
        return await call_tool(app, name, args, caller)

    return run
