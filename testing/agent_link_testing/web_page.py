"""Helpers for tests of the agent-link web page: the page server (the real command or a
thread around an App), MCP agents in other processes driven synchronously, the system
Chromium and a page in it, and where screenshots go. The web plugin's fixtures
(plugins/web/tests/conftest.py) are built on these; other plugins' page tests use them too."""

from __future__ import annotations

import asyncio
import concurrent.futures
import http.client
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from agent_link_core.app import App
from agent_link_testing.mcp_client import AgentLinkClient, agent_link_mcp

REPO = Path(__file__).resolve().parents[2]
INSTALL_HINT = "apt-get update && apt-get install -y chromium   (make install runs it when it runs as root)"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
HOST_PLUGINS = "codex claude"  # no test here needs a real host; listing them would look for one
START_BOUND_S = 60.0
STEP_BOUND_MS = 15_000  # bound of one wait in the browser: generous, never a timing assertion


def screenshot_dir() -> Path:
    """Where the run writes its screenshots (``AGENT_LINK_WEB_SCREENSHOTS``, default
    ``test-artifacts/web`` in the repository)."""
    path = Path(os.environ.get("AGENT_LINK_WEB_SCREENSHOTS") or REPO / "test-artifacts" / "web")
    path.mkdir(parents=True, exist_ok=True)
    return path


def chromium_path() -> str:
    """The system Chromium, or a test failure naming the command that installs it."""
    for candidate in (os.environ.get("AGENT_LINK_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
                      shutil.which("chromium-browser")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail(f"The browser tests need Chromium and none was found. Install it with: {INSTALL_HINT}", pytrace=False)


@dataclass
class PageServer:
    """A running page: ``url`` carries the token; ``base`` does not."""

    url: str
    token: str
    port: int
    csrf: str | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def request(self, method: str, path: str, *, host: str | None = None, headers: dict[str, str] | None = None,
                body: bytes | None = None) -> http.client.HTTPResponse:
        """One raw HTTP request (no redirects followed); the response is fully read."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        all_headers = {"Host": host or f"127.0.0.1:{self.port}", **(headers or {})}
        conn.request(method, path, body=body, headers=all_headers)
        response = conn.getresponse()
        response.body = response.read()  # type: ignore[attr-defined]
        conn.close()
        return response

    def cookie(self) -> str:
        return f"agent_link_web_{self.port}={self.token}"


def read_url(process: subprocess.Popen[str]) -> str:
    found: concurrent.futures.Future[str] = concurrent.futures.Future()

    def reader() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            match = re.search(r"(http://127\.0\.0\.1:\d+/\?token=\S+)", line)
            if match and not found.done():
                found.set_result(match.group(1))
        if not found.done():
            found.set_exception(RuntimeError("agent-link web ended without printing its URL"))

    threading.Thread(target=reader, daemon=True).start()
    try:
        return found.result(timeout=START_BOUND_S)
    except (RuntimeError, TimeoutError):
        process.kill()
        _, err = process.communicate(timeout=15)
        raise RuntimeError(f"agent-link web did not start: {err[-2000:]}") from None


@contextmanager
def serve_cli(env: Mapping[str, str]) -> Iterator[PageServer]:
    """``agent-link web --port 0`` in a subprocess with ``env`` until the block ends; then
    SIGTERM, SIGKILL after 15 s.

    :raises RuntimeError: the command ended, or printed no URL within :data:`START_BOUND_S`.
    """
    process = subprocess.Popen([sys.executable, "-m", "agent_link_core", "web", "--port", "0"], env=dict(env),
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


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless system Chromium under Playwright (a ``playwright.sync_api.Browser``), closed
    when the block ends; a test failure naming the install command when there is none."""
    executable = chromium_path()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS, headless=True,
                                              timeout=START_BOUND_S * 1000)
        try:
            yield launched
        finally:
            launched.close()


@contextmanager
def browser_page(browser: Any) -> Iterator[Any]:
    """A fresh context and page of ``browser`` (1440x1000, each wait bounded by
    :data:`STEP_BOUND_MS`); dialogs are recorded in ``page.dialogs`` and dismissed."""
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


class ThreadServer:
    """The page for an App the test built (with extra test plugins), served in a thread."""

    def __init__(self, app: App, act_for: tuple[str, ...] = ()) -> None:
        from agent_link_web.server import WebConfig, allowed_hosts, bind_socket, serve

        self.app = app
        sock = bind_socket("127.0.0.1", 0)
        port = sock.getsockname()[1]
        self.config = WebConfig(person="user:tester", port=port, hosts=allowed_hosts(port, "127.0.0.1"), act_for=act_for)
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        self.stop: asyncio.Event | None = None

        async def main() -> None:
            self.stop = asyncio.Event()
            await serve(app, self.config, sock, started.set, self.stop)

        self.thread = threading.Thread(target=lambda: self.loop.run_until_complete(main()), daemon=True)
        self.thread.start()
        if not started.wait(START_BOUND_S):
            raise RuntimeError("the page server did not start")
        self.page = PageServer(self.config.url(), self.config.token, port, self.config.csrf)

    def run(self, coro: Any) -> Any:
        """Run a coroutine of the App on the server's own event loop (the App is not thread-safe)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=60)

    def close(self) -> None:
        if self.stop is not None:
            self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(timeout=30)
        self.loop.close()


class McpAgent:
    """An ``agent-link mcp`` process with its own address, driven through a real MCP client
    on a background event loop, so a synchronous browser test can call its tools."""

    def __init__(self, env: dict[str, str], address: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        ready: concurrent.futures.Future[AgentLinkClient] = concurrent.futures.Future()
        self._stop = asyncio.Event()

        async def hold() -> None:
            try:
                async with agent_link_mcp({**env, "AGENT_LINK_ADDRESS": address}) as client:
                    ready.set_result(client)
                    await self._stop.wait()
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc)
                raise

        self._held = asyncio.run_coroutine_threadsafe(hold(), self.loop)
        self.client = ready.result(timeout=START_BOUND_S)

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = asyncio.run_coroutine_threadsafe(self.client.call(name, arguments), self.loop).result(timeout=60)
        return result

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self._stop.set)
        try:
            self._held.result(timeout=30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=30)
            self.loop.close()


def run_in_thread(coro_fn: Any) -> Any:
    """``asyncio.run(coro_fn())`` in a thread of its own: Playwright's synchronous API keeps
    an event loop running in the test's thread."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(coro_fn())).result(timeout=120)


def wait_until(predicate: Any, bound_s: float = 15.0) -> Any:
    """Poll ``predicate`` until it returns something truthy (bounded; not a timing check)."""
    deadline = time.monotonic() + bound_s
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.1)
