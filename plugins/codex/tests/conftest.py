"""Fixtures for the codex plugin's tests (async tests run on anyio's pytest plugin, asyncio backend).

The real-host tests share ``stub`` (a :class:`~agent_link_testing.responses_stub.ResponsesStub` with its default
answers) and ``host`` (a real Codex app-server on it, :func:`~agent_link_testing.codex_host.host_env`); a file whose
model answers otherwise defines its own ``stub``.

Besides the backend this offers two small helpers that need no real Codex:

* :func:`write_rollout` (fixture ``make_rollout``) writes a rollout transcript in the Codex 0.169.0 layout
  (docs/hosts/codex.md §8) for the transcript fallback;
* :class:`MiniAppServer` (fixtures ``mini``, ``mini_server``) is a tiny app-server on a Unix socket (WebSocket, JSON without a
  ``jsonrpc`` field) that answers ``initialize`` and whatever a test scripts.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection, unix_serve
from websockets.exceptions import ConnectionClosed

from agent_link_testing.codex_host import CodexAppServer, host_env
from agent_link_testing.responses_stub import ResponsesStub


@pytest.fixture
def anyio_backend() -> str:
    """Run ``@pytest.mark.anyio`` tests on asyncio (the app-server client is asyncio-based)."""
    return "asyncio"


@pytest.fixture
def stub() -> Iterator[ResponsesStub]:
    """The stub model server (Responses API), answering with its default reply."""
    with ResponsesStub() as server:
        yield server


@pytest.fixture
def host(stub: ResponsesStub, tmp_path: Path, isolated_env: Path) -> Iterator[CodexAppServer]:
    """A real Codex app-server on :func:`stub`, under ``tmp_path/codex``, its hooks using the test's state dir."""
    with CodexAppServer(stub.base_url, root=tmp_path / "codex", env=host_env(isolated_env)) as server:
        yield server


def write_rollout(
    home: Path, thread_id: str, *, cwd: str = "/work/project", messages: list[tuple[str, str, str | None]] = (),
    archived: bool = False, lifecycle: str | None = "task_complete", source: str = "vscode", name: str | None = None,
    history_base: dict[str, Any] | None = None, first_ordinal: int = 0, day: str = "2026/11/30",
) -> Path:
    """Write a rollout for ``thread_id``; ``messages`` are ``(role, text, client_id)`` with role
    ``user`` or ``agent``. Returns the file path."""
    folder = home / "archived_sessions" if archived else home / "sessions" / day
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"rollout-2026-11-30T04-00-00-{thread_id}.jsonl"
    meta: dict[str, Any] = {"id": thread_id, "session_id": thread_id, "timestamp": "2026-11-30T04:00:00.000Z", "cwd": cwd,
                            "originator": "test", "cli_version": "0.169.0", "source": source, "model_provider": "mock"}
    if history_base is not None:
        meta["history_base"] = history_base
        meta["forked_from_id"] = history_base["thread_id"]
    lines = [{"timestamp": "2026-11-30T04:00:00.000Z", "ordinal": first_ordinal, "type": "session_meta", "payload": meta}]
    ordinal = first_ordinal
    for i, (role, text, client_id) in enumerate(messages):
        ordinal += 1
        item: dict[str, Any]
        if role == "user":
            item = {"type": "UserMessage", "id": f"u{i}", "client_id": client_id, "content": [{"type": "text", "text": text}]}
        else:
            item = {"type": "AgentMessage", "id": f"a{i}", "content": [{"type": "Text", "text": text}]}
        lines.append({"timestamp": "2026-11-30T04:00:01.000Z", "ordinal": ordinal, "type": "event_msg",
                      "payload": {"type": "item_completed", "thread_id": thread_id, "turn_id": f"t{i}", "item": item}})
    if lifecycle:
        ordinal += 1
        lines.append({"timestamp": "2026-11-30T04:00:02.000Z", "ordinal": ordinal, "type": "event_msg",
                      "payload": {"type": lifecycle, "turn_id": "t-last"}})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    if name is not None:
        with open(home / "session_index.jsonl", "a") as fh:
            fh.write(json.dumps({"id": thread_id, "thread_name": name, "updated_at": "2026-11-30T04:00:00Z"}) + "\n")
    return path


Handler = Callable[[str, dict[str, Any]], Any]


class MiniAppServer:
    """A scripted app-server on a Unix socket.

    ``handlers`` maps a method to ``(method, params) -> result`` (raise :class:`MiniError` for
    an error answer); ``initialize`` is built in. Every request is recorded in :attr:`requests`.
    """

    def __init__(self, path: Path, handlers: dict[str, Handler] | None = None, codex_home: str = "/nowhere") -> None:
        self.path = path
        self.handlers = dict(handlers or {})
        self.codex_home = codex_home
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.connections: list[ServerConnection] = []
        #: MCP start-up reports sent, ``(thread id, server name, status)`` in order
        self.mcp_reports: list[tuple[str, str, str]] = []
        self._server: Any = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> MiniAppServer:
        self._server = await unix_serve(self._serve, str(self.path), compression=None)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()
        await self._server.wait_closed()

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification to every connection."""
        for conn in list(self.connections):
            try:
                await conn.send(json.dumps({"method": method, "params": params}))
            except ConnectionClosed:
                continue

    def report_mcp_startup(self, thread_id: str, name: str = "agent-link", after_s: float = 0.05) -> None:
        """From a handler: send the start-up reports of MCP server ``name`` on ``thread_id``
        (``starting``, then ``ready``) ``after_s`` seconds later, so after the handler's answer,
        as Codex can (its thread listener sends them, a task apart from the request's)."""
        async def report() -> None:
            await asyncio.sleep(after_s)
            for status in ("starting", "ready"):
                self.mcp_reports.append((thread_id, name, status))
                await self.notify("mcpServer/startupStatus/updated", {"threadId": thread_id, "name": name, "status": status, "error": None})

        task = asyncio.ensure_future(report())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def reports_seen_by(self, method: str) -> list[list[tuple[str, str, str]]]:
        """Make each ``method`` request first note the MCP start-up reports sent so far (a
        copy of :attr:`mcp_reports`), then run the handler scripted now. Returns the list the
        notes go to, one per request in order. Raises KeyError when ``method`` has no handler."""
        seen: list[list[tuple[str, str, str]]] = []
        handler = self.handlers[method]

        async def noting(name: str, params: dict[str, Any]) -> Any:
            seen.append(list(self.mcp_reports))
            result = handler(name, params)
            return await result if asyncio.iscoroutine(result) else result

        self.handlers[method] = noting
        return seen

    async def _serve(self, conn: ServerConnection) -> None:
        self.connections.append(conn)
        try:
            async for raw in conn:
                msg = json.loads(raw)
                if "id" not in msg or "method" not in msg:
                    continue
                method, params = msg["method"], msg.get("params") or {}
                self.requests.append((method, params))
                if method == "initialize":
                    reply: dict[str, Any] = {"id": msg["id"], "result": {"userAgent": "mini/0.169.0", "codexHome": self.codex_home}}
                elif method in self.handlers:
                    try:
                        result = self.handlers[method](method, params)
                        if asyncio.iscoroutine(result):
                            result = await result
                        reply = {"id": msg["id"], "result": result}
                    except MiniError as exc:
                        reply = {"id": msg["id"], "error": {"code": exc.code, "message": str(exc)}}
                else:
                    reply = {"id": msg["id"], "error": {"code": -32600, "message": f"Invalid request: unknown variant `{method}`"}}
                await conn.send(json.dumps(reply))
        except ConnectionClosed:
            pass


class MiniError(Exception):
    """Makes :class:`MiniAppServer` answer with this message and ``code`` (default ``-32600``,
    Codex's usual; ``-32001`` is its "overloaded")."""

    def __init__(self, message: str, code: int = -32600) -> None:
        super().__init__(message)
        self.code = code


@pytest.fixture
def short_tmp() -> Any:
    """A short temporary directory (Unix socket paths must stay under ~100 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="alc-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def mini(short_tmp: Path) -> AsyncIterator[MiniAppServer]:
    """A :class:`MiniAppServer` at ``<short_tmp>/mini.sock`` (no scripted methods)."""
    async with MiniAppServer(short_tmp / "mini.sock") as server:
        yield server


@pytest.fixture
def make_rollout() -> Callable[..., Path]:
    """:func:`write_rollout` (test modules cannot import conftest under importlib mode)."""
    return write_rollout


@pytest.fixture
def mini_server() -> type[MiniAppServer]:
    """The :class:`MiniAppServer` class, for tests that need several or custom handlers."""
    return MiniAppServer


@pytest.fixture
def mini_error() -> type[MiniError]:
    """The :class:`MiniError` class."""
    return MiniError
