"""Fixtures for the web page's tests: the page server (the real ``agent-link web`` command, or
in a thread around an App the test builds), MCP agents in other processes, and a real
headless Chromium driven by Playwright.

The browser is the system's Chromium (Debian package ``chromium``, which ``make install``
installs when run as root). Without it the browser tests fail, naming the command that
installs it; they never skip.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_link_testing.web_page import HOST_PLUGINS, McpAgent, PageServer, browser_page, chromium, serve_cli


@pytest.fixture
def own_env(isolated_env: Path) -> dict[str, str]:
    """The environment of every process of a test: its state dir, host harnesses off, the
    page's person ``user:tester`` seeing only their own mail (the default)."""
    return {**os.environ, "AGENT_LINK_DISABLE_PLUGINS": HOST_PLUGINS, "AGENT_LINK_WEB_USER": "tester"}


@pytest.fixture
def web_env(own_env: dict[str, str]) -> dict[str, str]:
    """:func:`own_env` with ``AGENT_LINK_INSPECT_ALL=1``: the page shows every agent's mail,
    as the owner watching their agents sets it up."""
    return {**own_env, "AGENT_LINK_INSPECT_ALL": "1"}


@pytest.fixture
def cli_server(web_env: dict[str, str]) -> Iterator[PageServer]:
    """``agent-link web --port 0`` in a subprocess, showing every agent's mail; stopped (then
    killed) at the end."""
    with serve_cli(web_env) as server:
        yield server


@pytest.fixture
def own_cli_server(own_env: dict[str, str]) -> Iterator[PageServer]:
    """``agent-link web --port 0`` without ``AGENT_LINK_INSPECT_ALL``: the person's own mail only."""
    with serve_cli(own_env) as server:
        yield server


@pytest.fixture
def mcp_agent(web_env: dict[str, str]) -> Iterator[Any]:
    """``mcp_agent(address)``: start an MCP agent process; all are closed at the end."""
    started: list[McpAgent] = []

    def start(address: str) -> McpAgent:
        agent = McpAgent(web_env, address)
        started.append(agent)
        return agent

    yield start
    for agent in started:
        agent.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless system Chromium under Playwright (one per test module)."""
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser context and page; dialogs are recorded in ``page.dialogs`` and dismissed."""
    with browser_page(browser) as tab:
        yield tab
