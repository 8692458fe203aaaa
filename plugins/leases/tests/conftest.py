"""Fixtures for the leases plugin's tests: Apps with the real plugins loaded (host harnesses
disabled, so no host is looked for), a way to call a tool as any caller, and a git project."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_core.model import Caller
from agent_link_testing.plugin_suites import app_factory, call_tool

ALICE = Caller("test:alice", "config", "test")

RunTool = Callable[..., Awaitable[dict[str, Any]]]


@pytest.fixture
def make_app(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., App]]:
    """``make_app(**env)``: an App of the installed plugins (codex and claude disabled) with
    ``env`` set in the process environment."""
    with app_factory(monkeypatch) as make:
        yield make


@pytest.fixture
def app(make_app: Callable[..., App]) -> App:
    """An App of the installed plugins, host harnesses disabled."""
    return make_app()


@pytest.fixture
def run_tool() -> RunTool:
    """``await run_tool(app, name, args, caller=ALICE)``: the tool's result object."""

    async def run(app: App, name: str, args: dict[str, Any], caller: Caller = ALICE) -> dict[str, Any]:
        return await call_tool(app, name, args, caller)

    return run


@pytest.fixture
def repo(tmp_path: Path) -> str:
    """A git project (a ``.git`` directory is all the root lookup needs) with ``src/`` and
    ``docs/``; its resolved path."""
    project = tmp_path / "repo"
    for sub in (".git", "src/pkg", "docs"):
        (project / sub).mkdir(parents=True)
    (project / "src" / "a.py").write_text("")
    return os.path.realpath(project)
