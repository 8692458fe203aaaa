"""Fixtures for the web page's tests: the page server (the real ``agent-link web`` command, or
in a thread around an App the test builds), MCP agents in other processes, and a real
headless Chromium driven by Playwright.

The browser is the system's Chromium (Debian package ``chromium``, which ``make install``
installs when run as root). Without it the browser tests fail, naming the command that
installs it; they never skip.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from agent_link_testing.web_page import (
    CHROMIUM_FLAGS,
    HOST_PLUGINS,
    START_BOUND_S,
    STEP_BOUND_MS,
    McpAgent,
    PageServer,
    chromium_path,
    read_url,
)


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
    yield from serve_cli(web_env)


@pytest.fixture
def own_cli_server(own_env: dict[str, str]) -> Iterator[PageServer]:
    """``agent-link web --port 0`` without ``AGENT_LINK_INSPECT_ALL``: the person's own mail only."""
    yield from serve_cli(own_env)


def serve_cli(env: dict[str, str]) -> Iterator[PageServer]:
    """Run ``agent-link web --port 0`` with ``env`` until the generator is closed."""
    process = subprocess.Popen([sys.executable, "-m", "agent_link_core", "web", "--port", "0"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = read_url(process)
        split = urlsplit(url)
        yield PageServer(url, split.query.removeprefix("token="), int(split.port or 0))
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


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
    executable = chromium_path()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS, headless=True,
                                              timeout=START_BOUND_S * 1000)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser context and page; dialogs are recorded in ``page.dialogs`` and dismissed."""
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    tab = context.new_page()
    tab.set_default_timeout(STEP_BOUND_MS)
    tab.dialogs = []

    def on_dialog(dialog: Any) -> None:
        tab.dialogs.append(dialog.message)
        dialog.dismiss()

    tab.on("dialog", on_dialog)
    try:
        yield tab
    finally:
        context.close()


