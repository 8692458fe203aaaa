"""Fixtures for the projects plugin's tests.

Unit tests run with the real codex and claude plugins disabled and :class:`FakeCodex` in their
place: it registers the three codex tools this plugin calls through the core's tool table
(``get_codex_thread``, ``resolve_codex_thread``, ``launch_codex_thread``) with scripted
answers, and records every call. Mail to ``codex:<id>`` is then simply stored (no harness owns
the scheme). The real-host tests (``test_projects_realhost.py``) use the real codex plugin.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_link_core import hookimpl
from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError
from agent_link_core.model import Caller
from agent_link_core.tools.registry import ToolCall, ToolSpec, validate_arguments

ORCH = "019a0000-0000-7000-8000-00000000a001"
OTHER = "019a0000-0000-7000-8000-00000000b002"
WORKER = "019a0000-0000-7000-8000-00000000c003"
LOOSE: dict[str, Any] = {"type": "object"}


class FakeCodex:
    """Scripted stand-ins for the codex plugin's tools.

    :attr threads: readable thread ids → thread view (``get_codex_thread`` raises not_found
        for the rest).
    :attr search: ``resolve_codex_thread`` answers by query (default: not_found).
    :attr calls: ``[(tool, arguments)]`` in call order.
    :attr on_launch: awaited inside each ``launch_codex_thread`` (after it is counted in
        ``launched``), to act while a launch is under way or fail it by raising; None: nothing.
    """

    def __init__(self) -> None:
        self.threads: dict[str, dict[str, Any]] = {}
        self.search: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.launched = 0
        self.on_launch: Callable[[], Awaitable[None]] | None = None

    def add(self, tid: str, name: str = "", cwd: str = "/work") -> dict[str, Any]:
        view = {"id": tid, "address": f"codex:{tid}", "name": name, "cwd": cwd, "preview": None}
        self.threads[tid] = view
        return view

    def answer(self, query: str, *scored: tuple[str, int]) -> None:
        """Script the search for ``query``: ``(thread id, score)`` best first; a tie at the top is ambiguous."""
        candidates = [{**self.threads.get(t, {"id": t}), "score": s} for t, s in scored]
        tied = sum(1 for c in candidates if c["score"] == candidates[0]["score"]) if candidates else 0
        status = "not_found" if not candidates else "ambiguous" if tied > 1 else "resolved"
        self.search[query] = {"status": status, "source": "app-server", "best": candidates[0] if status == "resolved" else None,
                              "candidates": candidates, "selection": {"ambiguous": tied > 1, "tiedCount": tied}, "appServerError": None}

    async def _get(self, app: Any, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
        self.calls.append(("get_codex_thread", args))
        tid = args["threadId"].removeprefix("codex:")
        if tid not in self.threads:
            raise AgentLinkError("not_found", f"No Codex thread {tid} is known.", {"id": tid, "candidates": []})
        return {"source": "app-server", "thread": self.threads[tid]}

    async def _resolve(self, app: Any, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
        self.calls.append(("resolve_codex_thread", args))
        return dict(self.search.get(args["query"]) or {"status": "not_found", "source": "app-server", "best": None,
                                                        "candidates": [], "appServerError": None})

    async def _launch(self, app: Any, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
        self.calls.append(("launch_codex_thread", args))
        self.launched += 1
        if self.on_launch is not None:
            await self.on_launch()
        tid = WORKER if self.launched == 1 else f"{WORKER[:-4]}{self.launched:04d}"
        self.add(tid, args.get("name", ""), args.get("cwd", "/work"))
        return {"source": "app-server", "action": "started_thread+named_thread", "threadId": tid, "address": f"codex:{tid}"}

    def searched(self) -> list[dict[str, Any]]:
        return [a for name, a in self.calls if name == "resolve_codex_thread"]

    @hookimpl
    def agent_link_register_tools(self, register: Callable[[ToolSpec], None]) -> None:
        for name, handler in (("get_codex_thread", self._get), ("resolve_codex_thread", self._resolve),
                              ("launch_codex_thread", self._launch)):
            register(ToolSpec(name=name, description="fake", input_schema=LOOSE, output_fields={}, handler=handler))


@pytest.fixture
def fake() -> FakeCodex:
    return FakeCodex()


@pytest.fixture
def make_app(monkeypatch: pytest.MonkeyPatch, fake: FakeCodex) -> Iterator[Callable[..., App]]:
    """``make_app(**env)``: an App of the installed plugins (codex, claude disabled) plus the fake."""
    apps: list[App] = []

    def make(**env: str) -> App:
        monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "codex claude")
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        app = App.create(extra_plugins=(fake,))
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.close()


@pytest.fixture
def app(make_app: Callable[..., App]) -> App:
    return make_app()


@pytest.fixture
def roles_loaded(app: App) -> bool:
    """Whether the roles plugin is installed here (the suite also runs without it)."""
    return "roles" in app.hooks.loaded


def codex_caller(tid: str, turn: str | None = "turn-1") -> Caller:
    """A caller identified from a Codex tool call's ``_meta``."""
    return Caller(f"codex:{tid}", "runtime_context", "codex", turn, "call-1")


EXTERNAL = Caller()
ALICE = Caller("test:alice", "config", "test")


@pytest.fixture
def run() -> Callable[..., Any]:
    """``await run(app, tool, args, caller=ALICE)``: the tool's result object, arguments validated
    as the MCP layer does, the call's warnings included."""

    async def go(app: App, name: str, args: dict[str, Any], caller: Caller = ALICE) -> dict[str, Any]:
        spec = app.hooks.tools()[name]
        try:
            validated, warnings = validate_arguments(spec, args)
            call = ToolCall({}, caller, warnings)
            fields = await spec.handler(app, validated, call)
        except AgentLinkError as exc:
            return {"ok": False, "error": exc.to_dict()}
        out = {"ok": True, **fields}
        if call.warnings:
            out["warnings"] = call.warnings
        return out

    return go


def write_binding(root: Path, thread_id: str, **override: Any) -> Path:
    """Write a valid binding file for ``root`` (fields overridable; None removes one)."""
    fields: dict[str, Any] = {"projectRoot": str(root), "projectId": "shop", "orchestratorThreadId": thread_id,
                              "role": "project_orchestrator", "policyVersion": "v3", "createdAt": "2026-11-30T10:00:00Z",
                              "lastVerifiedAt": "2026-11-30T11:00:00+00:00"}
    for key, value in override.items():
        if value is None:
            fields.pop(key, None)
        else:
            fields[key] = value
    path = root / ".codex" / "project-orchestrator.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(fields))
    return path


def write_roles(state: Path, general: str | None = None, projects: dict[str, str] | None = None,
                enforcement: str | None = None, **others: str) -> None:
    """Write roles.json: the orchestrator role's general holder and project assignments, other roles' holders."""
    roles: dict[str, Any] = {name: {"address": holder} for name, holder in others.items()}
    entry: dict[str, Any] = {}
    if general:
        entry["address"] = general
    if projects:
        entry["projects"] = projects
    if entry:
        roles["orchestrator"] = entry
    table: dict[str, Any] = {"version": 1, "roles": roles}
    if enforcement:
        table["enforcement"] = enforcement
    state.mkdir(parents=True, exist_ok=True)
    (state / "roles.json").write_text(json.dumps(table))


@pytest.fixture
def h() -> Any:
    """Helpers for test modules (they cannot import this conftest under importlib mode):
    thread ids ``ORCH``/``OTHER``/``WORKER``, callers ``ALICE``/``EXTERNAL``,
    ``codex_caller(tid)``, ``write_binding(root, tid, **fields)``, ``write_roles(state, ...)``."""
    from types import SimpleNamespace

    return SimpleNamespace(ORCH=ORCH, OTHER=OTHER, WORKER=WORKER, ALICE=ALICE, EXTERNAL=EXTERNAL, codex_caller=codex_caller,
                           write_binding=write_binding, write_roles=write_roles)


@pytest.fixture
def receipts_loaded(app: App) -> bool:
    """Whether the receipts plugin is installed here."""
    return "receipts" in app.hooks.loaded
