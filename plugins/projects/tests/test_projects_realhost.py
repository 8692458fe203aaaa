"""The project tools on the REAL Codex app-server (pinned) against the stub model.

* A worker launched with ``launch_project_worker`` (orchestrator found through the project's
  binding file) gets the worker prompt as its first turn, in the project root, with the
  requested effort; its stub model calls
  ``return_project_work_result`` through agent-link's MCP server (configured in that
  CODEX_HOME, the caller known from ``_meta`` only); the orchestrator thread receives the
  structured result as a turn, and the task message ends ``done``; the worker's
  ``leasePaths`` are leased for its thread until then, and end with the task.
* A real Codex thread registers a dependency handoff (callback = its runtime thread); the
  receipt carries the handoff tags, and ``check_coordination_obligations`` says
  ``needs_handoff`` before and ``satisfied`` after.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from agent_link_codex.appserver import AppServerClient
from agent_link_testing.codex_host import CodexAppServer, McpServerConfig
from agent_link_testing.plugin_suites import call_tool
from agent_link_testing.responses_stub import (
    Reply,
    ResponsesStub,
    StubRequest,
    mcp_tool_call,
)

from agent_link_core.app import App
from agent_link_core.model import Caller

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(240)]

WAIT_MS = 60_000
WAIT_S = WAIT_MS / 1000
ENVELOPE_ID = re.compile(r'<agent-link-message id="([0-9A-HJKMNP-TV-Z]{26})"')
ALICE = Caller("test:alice", "config", "test")


def text_input(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value, "text_elements": []}]


def host_for(stub: ResponsesStub, root: Path, state: Path) -> CodexAppServer:
    """A real app-server whose threads have agent-link (all plugins but claude) as MCP server."""
    socket = root / "app-server.sock"
    # AGENT_LINK_TOOLS=all: a host's default lists the messaging tools only (agent_link_tools reaches the rest)
    server_env = {"AGENT_LINK_STATE_DIR": str(state), "AGENT_LINK_HOST": "codex", "AGENT_LINK_CODEX_AUTOSTART": "0",
                  "AGENT_LINK_TOOLS": "all",
                  "AGENT_LINK_CODEX_SOCK": str(socket), "CODEX_HOME": str(root / "codex-home"),
                  "AGENT_LINK_DISABLE_PLUGINS": "claude"}
    servers = {"agent-link": McpServerConfig(command=sys.executable, args=["-m", "agent_link_core", "mcp"], env=server_env,
                                             startup_timeout_sec=60, tool_timeout_sec=120)}
    return CodexAppServer(stub.base_url, root=root, socket_path=socket, mcp_servers=servers, startup_timeout_s=60)


def local_app(monkeypatch: pytest.MonkeyPatch, host: CodexAppServer) -> App:
    monkeypatch.setenv("AGENT_LINK_CODEX_SOCK", str(host.socket_path))
    monkeypatch.setenv("CODEX_HOME", str(host.codex_home))
    monkeypatch.setenv("AGENT_LINK_CODEX_AUTOSTART", "0")
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "claude")
    return App.create()


async def mcp_ready(sub: Any) -> None:
    """Wait until Codex reports agent-link's MCP server ready."""
    await sub.wait_for(lambda n: n.method == "mcpServer/startupStatus/updated" and n.params.get("name") == "agent-link"
                       and n.params.get("status") == "ready", timeout_ms=WAIT_MS)


class WorkerModel:
    """The stub model: a worker's first request (the task) answers with a call to
    return_project_work_result naming the task message; everything else gets "ok"."""

    def __init__(self, orchestrator: str, project: Path) -> None:
        self.orchestrator = orchestrator
        self.project = project

    def __call__(self, request: StubRequest) -> Reply | None:
        last = request.last_input or {}
        if last.get("type") == "function_call_output" or not request.contains("Return path:"):
            return None
        ids = [m for t in request.texts() for m in ENVELOPE_ID.findall(t)]
        return mcp_tool_call("agent_link", "return_project_work_result", {
            "threadId": self.orchestrator, "projectId": "shop", "projectRoot": str(self.project), "resultStatus": "done", "summary": "Added the export endpoint.",
            "changedPaths": ["src/export.py"], "testsRun": ["pytest tests/test_export.py"], "blockers": [],
            "nextSteps": ["review"], "details": {"endpoint": "/export"}, "replyToMessageId": ids[-1],
        })


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "shop"
    root.mkdir()
    return root


async def test_worker_returns_its_result_to_the_orchestrator_thread(tmp_path: Path, isolated_env: Path, project: Path,
                                                                     monkeypatch: pytest.MonkeyPatch, h: Any) -> None:
    with ResponsesStub() as stub, host_for(stub, tmp_path / "codex", isolated_env) as host:
        async with await AppServerClient.connect_unix(host.socket_path, refuse_server_requests=True) as raw:
            await raw.initialize("someone-else", "0.0.1", timeout_ms=WAIT_MS)
            async with raw.subscription() as sub:
                orchestrator = (await raw.request("thread/start", {"cwd": str(project)}, timeout_ms=WAIT_MS))["thread"]["id"]
                await mcp_ready(sub)
            await raw.request("thread/name/set", {"threadId": orchestrator, "name": "shop orchestrator"}, timeout_ms=WAIT_MS)
            stub.responder = WorkerModel(orchestrator, project)
            h.write_binding(project, orchestrator)
            app = local_app(monkeypatch, host)
            try:
                as_orchestrator = Caller(f"codex:{orchestrator}", "runtime_context", "codex")
                launched = await call_tool(app, "launch_project_worker", {
                    "projectRoot": str(project), "task": "Add an export endpoint.", "workerRole": "export worker",
                    "instructions": "Keep it small.", "effort": "low", "leasePaths": ["src/export.py"],
                }, as_orchestrator)
                assert launched["ok"], launched
                assert launched["resolution"]["source"] == "binding" and launched["resolution"]["threadId"] == orchestrator
                worker, task_id = launched["workerThreadId"], launched["taskMessageId"]
                assert launched["launchResult"]["delivery"] == "delivered", launched["launchResult"]
                assert launched["launchResult"]["thread"]["cwd"] == str(project)
                # its file is leased for it (the leases plugin, through agent_link_claim_paths) until its task is resolved
                assert [(x["holder"], x["path"]) for x in launched["leases"]] == [(f"codex:{worker}", "src/export.py")]
                # the worker's model saw the prompt, with the return path naming the orchestrator
                first = await asyncio.to_thread(stub.wait_for, lambda r: r.thread_id == worker and r.contains("Return path:"), WAIT_S)
                assert first.contains(f"Orchestrator thread: {orchestrator}") and first.contains("Task:\nAdd an export endpoint.")
                assert first.contains(f'projectId "shop", projectRoot "{project}"')
                assert first.contains("Leased for you (exclusive, until this task message is resolved): src/export.py.")
                # effort travels on the first turn, granted to the launcher
                assert first.body["reasoning"]["effort"] == "low"
                assert launched["launchResult"]["taskMessage"]["switches"][0]["grantedBy"] == "launcher"
                # the task message ends done, and its note is the structured result; watched through its
                # status, not a wait: a wait of the orchestrator would take the note itself (read there,
                # so never also pushed as a turn: tests/test_one_path_per_message.py)
                status = app.status(as_orchestrator, task_id)
                for _ in range(int(WAIT_S * 10)):
                    if status["status"] != "pending":
                        break
                    await asyncio.sleep(0.1)
                    status = app.status(as_orchestrator, task_id)
                assert status["status"] == "done" and status["resolution"]["by"] == f"codex:{worker}", status
                # resolved by the worker's own agent-link MCP server: its leases ended with the task
                assert app.store.conn.execute("SELECT COUNT(*) FROM leases").fetchone()[0] == 0
                # the orchestrator thread got the result as a turn
                seen = await asyncio.to_thread(stub.wait_for, lambda r: r.thread_id == orchestrator and r.contains("Project worker result"),
                                               WAIT_S)
                body = next(t for t in seen.texts() if "Project worker result" in t)
                payload = json.loads(body[body.index("{"):body.rindex("}") + 1].replace("&quot;", '"'))
                assert payload["status"] == "done" and payload["workerThreadId"] == worker
                assert payload["projectId"] == "shop" and payload["projectRoot"] == str(project)
                assert payload["changedPaths"] == ["src/export.py"] and payload["details"] == {"endpoint": "/export"}
                assert f'from="codex:{worker}"' in body and 'fromVerified="true"' in body
            finally:
                await app.aclose()


class HandoffModel:
    """The stub model: a turn asking for the handoff answers with register_dependency_handoff."""

    def __init__(self, target: str) -> None:
        self.target = target

    def __call__(self, request: StubRequest) -> Reply | None:
        last = request.last_input or {}
        if last.get("type") == "function_call_output" or not request.contains("REGISTER-THE-HANDOFF"):
            return None
        return mcp_tool_call("agent_link", "register_dependency_handoff", {
            "dependencyName": "Schema v2", "readinessContract": "The v2 schema is published in schema/v2.json.",
            "targetThreadId": self.target, "callbackThreadId": "some-other-thread", "deadline": "2026-12-01T12:00:00Z",
        })


async def test_handoff_from_a_real_thread_satisfies_its_obligation(tmp_path: Path, isolated_env: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    with ResponsesStub() as stub, host_for(stub, tmp_path / "codex", isolated_env) as host:
        async with await AppServerClient.connect_unix(host.socket_path, refuse_server_requests=True) as raw:
            await raw.initialize("someone-else", "0.0.1", timeout_ms=WAIT_MS)
            async with raw.subscription() as sub:
                origin = (await raw.request("thread/start", {}, timeout_ms=WAIT_MS))["thread"]["id"]
                await mcp_ready(sub)
            owner = (await raw.request("thread/start", {}, timeout_ms=WAIT_MS))["thread"]["id"]
            stub.responder = HandoffModel(owner)
            app = local_app(monkeypatch, host)
            try:
                words = f"I'm blocked on thread {owner} until it publishes the v2 schema."
                # The origin thread checks its own obligations (receipts follow the visibility rule).
                as_origin = Caller(f"codex:{origin}", "runtime_context", "codex")
                before = await call_tool(app, "check_coordination_obligations", {"text": words, "originThreadId": origin}, as_origin)
                assert before["ok"] and before["status"] == "needs_handoff", before
                assert before["nextRequiredAction"]["tool"] == "register_dependency_handoff"
                async with raw.subscription(thread_id=origin) as items:
                    await raw.request("turn/start", {"threadId": origin, "input": text_input("REGISTER-THE-HANDOFF")}, timeout_ms=WAIT_MS)
                    done = await items.wait_for(lambda n: n.method == "item/completed" and n.params["item"]["type"] == "mcpToolCall",
                                                timeout_ms=WAIT_MS)
                item = done.params["item"]
                assert (item["tool"], item["status"]) == ("register_dependency_handoff", "completed"), item
                result = item["result"]["structuredContent"]
                assert result["ok"], result
                # the callback is the calling thread (from _meta); the supplied one is recorded as a mismatch
                assert result["dependency"]["callbackThreadId"] == origin
                assert result["dependency"]["callbackMismatch"]["supplied"] == "some-other-thread"
                assert result["target"] == {**result["target"], "kind": "thread", "threadId": owner}
                assert result["receiptTags"] == ["dependency-handoff", "dependency:schema-v2", f"callback:{origin}"]
                # the owner thread got the handoff as a turn
                await asyncio.to_thread(stub.wait_for, lambda r: r.thread_id == owner and r.contains("Dependency: Schema v2"), WAIT_S)
                receipts = await call_tool(app, "list_agent_link_receipts", {"originThreadId": origin, "query": "dependency-handoff"}, as_origin)
                sent = [r for r in receipts["data"] if r["action"] == "message_thread"]
                assert sent and sent[0]["purpose"] == "Dependency handoff: Schema v2"
                assert set(sent[0]["tags"]) >= {"dependency-handoff", "dependency:schema-v2", f"callback:{origin}"}
                assert sent[0]["cleanupRecommendation"] == "keep_as_evidence" and sent[0]["target"]["id"] == owner
                after = await call_tool(app, "check_coordination_obligations", {"text": words, "originThreadId": origin}, as_origin)
                assert after["status"] == "satisfied", after
                by_name = await call_tool(app, "check_coordination_obligations", {
                    "text": "Waiting for the schema agent to publish v2 before I continue.", "originThreadId": origin,
                    "dependencyName": "schema v2"}, as_origin)
                assert by_name["status"] == "satisfied", by_name
                # Anyone else sees none of that thread's handoffs.
                stranger = await call_tool(app, "check_coordination_obligations", {"text": words, "originThreadId": origin}, ALICE)
                assert stranger["status"] == "needs_handoff" and stranger["receipts"] == [], stranger
            finally:
                await app.aclose()
