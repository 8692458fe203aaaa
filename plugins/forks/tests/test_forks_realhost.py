"""Fork jobs against the REAL Codex app-server (pinned) with the stub Responses API.

* a thread with a completed turn is forked with another model (compacted first): the stub sees
  the task with that model and the original's history; the original receives one reconcile
  message (its id echoed as clientId, a ``<fork .../>`` element, the fork's final text) and
  the fork is archived; health and receipts show the job;
* a task turn the stub fails gives one ``failed`` reconcile and an unarchived fork;
* a self-fork waiting for its result gets it in the tool result (``deliveredVia: tool-result``);
* the errors the tool returns for archived threads, unfinished turns, a cwd outside the
  workspace, unknown threads and an unreachable Codex;
* through real MCP client sessions: an ``agent-link mcp`` server is SIGKILLed while the task
  turn runs; two new servers sweep at once and the job is reconciled exactly once;
* a sweeper reconciles a task interrupted while nobody watched, and fails one that never started.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_link_codex.appserver import AppServerClient, AppServerError
from agent_link_testing.codex_host import CodexAppServer
from agent_link_testing.mcp_client import agent_link_mcp
from agent_link_testing.plugin_suites import call_tool
from agent_link_testing.responses_stub import (
    Hold,
    ResponsesStub,
    StubRequest,
    http_error,
    text,
)

from agent_link_core.app import App
from agent_link_core.model import Caller

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(240)]

WAIT_MS = 30_000
ALICE = Caller("test:alice", "config", "test")
TASK = "FORK-TASK: summarise the thread in one line"
ANSWER = "the fork's final answer"
OTHER_PLUGINS = "claude roles"


def text_input(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value, "text_elements": []}]


def is_task(request: StubRequest) -> bool:
    texts = request.user_texts()
    return bool(texts) and TASK in texts[-1]


@pytest.fixture
def stub() -> Iterator[ResponsesStub]:
    """The stub model: the fork's task gets ANSWER, everything else "ok"."""
    with ResponsesStub(responder=lambda r: text(ANSWER) if is_task(r) else None) as server:
        yield server


@pytest.fixture
def host(stub: ResponsesStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[CodexAppServer]:
    """A real app-server; this process's agent-link uses it (no private one)."""
    with CodexAppServer(stub.base_url, root=tmp_path / "codex") as server:
        monkeypatch.setenv("AGENT_LINK_CODEX_SOCK", str(server.socket_path))
        monkeypatch.setenv("CODEX_HOME", str(server.codex_home))
        monkeypatch.setenv("AGENT_LINK_CODEX_AUTOSTART", "0")
        monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", OTHER_PLUGINS)
        yield server


@pytest.fixture
async def raw(host: CodexAppServer) -> AsyncIterator[AppServerClient]:
    """Another client of the app-server (as a person's Codex would be)."""
    async with await AppServerClient.connect_unix(str(host.socket_path), refuse_server_requests=True) as client:
        await client.initialize("someone-else", "0.0.1", timeout_ms=WAIT_MS)
        yield client


@pytest.fixture
async def app(host: CodexAppServer) -> AsyncIterator[App]:
    application = App.create()
    try:
        yield application
    finally:
        await application.aclose()


async def finished_turn(client: AppServerClient, thread_id: str, prompt: str, stub_reply: Any = None,
                        stub: ResponsesStub | None = None) -> dict[str, Any]:
    """Run one turn in ``thread_id`` and return it once it ended. ``interrupted`` counts only
    when the next poll says it too: Codex lists a just-started turn as interrupted for a moment
    (docs/hosts/codex.md §6)."""
    if stub_reply is not None and stub is not None:
        stub.enqueue(stub_reply)
    started = await client.request("turn/start", {"threadId": thread_id, "input": text_input(prompt)}, timeout_ms=WAIT_MS)
    turn_id = started["turn"]["id"]
    deadline = time.monotonic() + WAIT_MS / 1000
    interrupted_once = False
    while time.monotonic() < deadline:
        try:
            page = await client.request("thread/turns/list", {"threadId": thread_id, "limit": 5}, timeout_ms=WAIT_MS)
        except AppServerError:  # observed: unavailable for a moment while a new thread's first turn starts
            page = {"data": []}
        turn = next((t for t in page["data"] if t["id"] == turn_id), None)
        status = turn["status"] if turn is not None else None
        if turn is not None and status != "inProgress" and (status != "interrupted" or interrupted_once):
            return turn
        interrupted_once = status == "interrupted"
        await asyncio.sleep(0.1)
    raise AssertionError(f"turn {turn_id} did not end")


async def original_thread(client: AppServerClient, **params: Any) -> str:
    """A thread whose last turn ("hello original") completed."""
    thread_id = (await client.request("thread/start", params, timeout_ms=WAIT_MS))["thread"]["id"]
    turn = await finished_turn(client, thread_id, "hello original")
    assert turn["status"] == "completed", turn
    return str(thread_id)


async def until(predicate: Any, what: str, timeout_s: float = WAIT_MS / 1000) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def reconcile_rows(app: App, job_id: str) -> list[Any]:
    return app.store.conn.execute("SELECT * FROM messages WHERE json_extract(metadata, '$.forkJobId') = ?", (job_id,)).fetchall()


def archive_state(app: App, job_id: str) -> str | None:
    row = app.store.conn.execute("SELECT state FROM fork_archives WHERE job_id = ?", (job_id,)).fetchone()
    return row[0] if row else None


def receipts(app: App, action: str) -> list[dict[str, Any]]:
    rows = app.store.conn.execute("SELECT data FROM receipts ORDER BY seq").fetchall()
    return [r for r in (json.loads(row[0]) for row in rows) if r["action"] == action]


async def echoed(client: AppServerClient, thread_id: str, client_id: str) -> bool:
    page = await client.request("thread/items/list", {"threadId": thread_id, "limit": 50, "sortDirection": "desc"}, timeout_ms=WAIT_MS)
    return any(e["item"].get("type") == "userMessage" and e["item"].get("clientId") == client_id for e in page["data"])


async def test_fork_round_trip_with_another_model(stub: ResponsesStub, raw: AppServerClient, app: App) -> None:
    original = await original_thread(raw)
    out = await call_tool(app, "fork_codex_thread", {"threadId": f"codex:{original}", "message": TASK, "model": "other-model",
                                                     "effort": "high", "compactFork": "always", "waitForResult": True,
                                                     "timeoutMs": 120_000}, ALICE)
    assert out["ok"], out
    job_id = out["forkJobId"]
    assert out["status"] == "completed" and out["timedOut"] is False, out
    fork_id = out["fork"]["threadId"]
    assert out["fork"]["forkedFromId"] == original and out["fork"]["model"] == "other-model" and out["fork"]["effort"] == "high"
    assert out["compaction"]["reason"] == "always" and out["compaction"]["compacted"] is True
    assert out["output"] is None  # not a self-fork: the answer travels as a message
    # the stub saw the task with the new model, the effort and the original's history
    task = stub.wait_for(is_task, 10)
    assert task.body["model"] == "other-model" and task.body["reasoning"]["effort"] == "high"
    assert task.thread_id == fork_id and any("hello original" in t for t in task.user_texts())
    assert "the final response is the result" in task.user_texts()[-1].lower() or "relays it" in task.user_texts()[-1]
    # exactly one reconcile message, from the caller to the original, with the <fork> element
    [row] = reconcile_rows(app, job_id)
    assert (row["from_addr"], row["recipient"], row["anticipation"]) == ("test:alice", f"codex:{original}", "fyi")
    assert row["body"] == ANSWER and out["reconcile"]["messageId"] == row["id"]
    envelope = app.mailbox.envelope(row)
    assert f'<fork thread="codex:{fork_id}" model="other-model" effort="high" status="completed" />' in envelope
    # pushed into the idle original as a turn whose userMessage echoes the message id
    await until(lambda: app.mailbox.get_row(row["id"])["delivered_via"] == "codex-turn", "the reconcile turn")
    assert await echoed(raw, original, row["id"])
    # the fork is archived (after the reconcile), and it is this job's fork
    await until(lambda: archive_state(app, job_id) == "archived", "the archive")
    fork = (await raw.request("thread/read", {"threadId": fork_id}, timeout_ms=WAIT_MS))["thread"]
    assert "/archived_sessions/" in fork["path"] and fork["threadSource"] == "agent-link-fork"
    # token usage, health, receipts
    assert out["tokenUsage"]["task"]["inputTokens"] > 0 and out["tokenUsage"]["compaction"]["totalTokens"] > 0
    assert app.health()["sections"]["forkJobs"] == {"pending": 0, "running": 0, "stuck": 0, "error": 0, "unreconciled": 0}
    [forked] = receipts(app, "fork_thread")
    assert forked["kind"] == "fork" and forked["target"]["address"] == f"codex:{fork_id}"
    [reconciled] = receipts(app, "reconcile_fork")
    assert reconciled["kind"] == "reconcile" and reconciled["messageId"] == row["id"]
    assert reconciled["details"]["tokenUsage"]["task"]["inputTokens"] > 0
    listed = await call_tool(app, "list_agent_link_receipts", {"kind": "reconcile"}, ALICE)
    assert [r["messageId"] for r in listed["data"]] == [row["id"]]
    assert receipts(app, "archive_thread")[0]["target"]["address"] == f"codex:{fork_id}"


async def test_failed_task_gives_one_failed_reconcile_and_keeps_the_fork(stub: ResponsesStub, raw: AppServerClient, app: App) -> None:
    original = await original_thread(raw)
    stub.responder = lambda r: http_error(400, "the model refused") if is_task(r) else None
    out = await call_tool(app, "fork_codex_thread", {"threadId": original, "message": TASK, "waitForResult": True,
                                                     "timeoutMs": 120_000, "reconcile": {"anticipation": "action"}}, ALICE)
    # Codex ends a turn whose model request got a 400 as failed, with the error
    assert out["ok"] and out["status"] == "failed", out
    status = out["status"]
    [row] = reconcile_rows(app, out["forkJobId"])
    assert row["anticipation"] == "action"
    assert f"ended {status}" in row["body"] and "kept for inspection" in row["body"]
    assert "the model refused" in row["body"]
    assert f'status="{status}"' in app.mailbox.envelope(row)
    assert out["archived"] is False
    assert app.store.conn.execute("SELECT COUNT(*) FROM fork_archives").fetchone()[0] == 0
    fork = (await raw.request("thread/read", {"threadId": out["fork"]["threadId"]}, timeout_ms=WAIT_MS))["thread"]
    assert "/archived_sessions/" not in fork["path"]
    assert app.health()["sections"]["forkJobs"]["error"] == 1
    assert [r["details"]["status"] for r in receipts(app, "reconcile_fork")] == [status]


async def test_self_fork_waiting_gets_the_result_in_the_tool_result(raw: AppServerClient, app: App) -> None:
    original = await original_thread(raw)
    me = Caller(f"codex:{original}", "runtime_context", "codex")
    out = await call_tool(app, "fork_codex_thread", {"threadId": original, "message": TASK, "waitForResult": True,
                                                     "timeoutMs": 120_000, "archiveFork": False}, me)
    assert out["ok"] and out["status"] == "completed", out
    assert out["output"] == ANSWER and out["reconcile"]["deliveredVia"] == "tool-result"
    [row] = reconcile_rows(app, out["forkJobId"])
    assert row["delivered_via"] == "tool-result" and row["from_addr"] == f"codex:{original}"
    assert not await echoed(raw, original, row["id"])  # no turn was started in the caller's own thread
    assert out["archived"] is False and app.store.conn.execute("SELECT COUNT(*) FROM fork_archives").fetchone()[0] == 0


async def test_errors_from_the_real_app_server(stub: ResponsesStub, raw: AppServerClient, app: App, host: CodexAppServer,
                                               tmp_path: Path) -> None:
    async def error(args: dict[str, Any]) -> dict[str, Any]:
        out = await call_tool(app, "fork_codex_thread", {"message": TASK, **args}, ALICE)
        assert out["ok"] is False, out
        return out["error"]

    archived = await original_thread(raw)
    await raw.request("thread/archive", {"threadId": archived}, timeout_ms=WAIT_MS)
    assert (await error({"threadId": archived}))["code"] == "archived"

    failing = await original_thread(raw)
    broken = await finished_turn(raw, failing, "this turn fails", http_error(400, "nope"), stub)
    assert broken["status"] == "failed", broken
    err = await error({"threadId": failing, "lastTurnId": broken["id"]})
    assert err["code"] == "invalid_arguments" and err["details"]["errors"][0]["path"] == "lastTurnId"

    workspace = host.workdir  # the threads' cwd (no repository: the folder itself is the workspace)
    inside = workspace / "sub"
    inside.mkdir(exist_ok=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (workspace / "link-out").symlink_to(outside)
    for cwd in (str(outside), str(workspace / "link-out")):
        err = await error({"threadId": failing, "cwd": cwd})
        assert err["code"] == "permission_denied" and err["details"]["reason"] == "cwd_outside_workspace", err
    assert (await error({"threadId": "0199ffff-0000-7000-8000-000000000000"}))["code"] == "not_found"
    assert (await error({"query": "words no thread has"}))["code"] == "not_found"
    tie = await error({"query": "hello original"})  # every thread here started with it
    assert tie["code"] == "ambiguous" and len(tie["details"]["candidates"]) >= 2
    assert app.store.conn.execute("SELECT COUNT(*) FROM fork_jobs").fetchone()[0] == 0  # nothing started for a refusal
    # Codex refusing the fork itself: the job is recorded as aborted, no reconcile is sent
    refused = await error({"threadId": failing, "modelProvider": "no-such-provider"})
    assert refused["code"] == "upstream_error" and refused["details"]["method"] == "thread/fork"
    [job] = app.store.conn.execute("SELECT * FROM fork_jobs").fetchall()
    assert job["status"] == "aborted" and job["fork_thread"] is None
    assert app.store.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0
    assert app.health()["sections"]["forkJobs"] == {"pending": 0, "running": 0, "stuck": 0, "error": 0, "unreconciled": 0}


async def test_codex_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_CODEX_SOCK", str(tmp_path / "nobody.sock"))
    monkeypatch.setenv("AGENT_LINK_CODEX_AUTOSTART", "0")
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", OTHER_PLUGINS)
    app = App.create()
    try:
        out = await call_tool(app, "fork_codex_thread", {"threadId": "0199ffff-0000-7000-8000-000000000000", "message": TASK}, ALICE)
    finally:
        await app.aclose()
    assert out["ok"] is False and out["error"]["code"] == "codex_unavailable", out


@contextlib.asynccontextmanager
async def server(env: dict[str, str]) -> AsyncIterator[Any]:
    """An ``agent-link mcp`` server and its client; a server that was killed is tolerated at exit."""
    cm = agent_link_mcp(env)
    client = await cm.__aenter__()
    try:
        yield client
    finally:
        with contextlib.suppress(BaseException):
            await cm.__aexit__(None, None, None)


async def test_killed_server_is_swept_exactly_once_by_two_servers(stub: ResponsesStub, raw: AppServerClient, host: CodexAppServer,
                                                                   isolated_env: Path) -> None:
    original = await original_thread(raw)
    hold = Hold(timeout_s=120)
    stub.responder = lambda r: text(ANSWER, hold=hold) if is_task(r) else None
    env = {"AGENT_LINK_ADDRESS": "test:alice", "AGENT_LINK_CODEX_SOCK": str(host.socket_path), "CODEX_HOME": str(host.codex_home),
           "AGENT_LINK_CODEX_AUTOSTART": "0", "AGENT_LINK_DISABLE_PLUGINS": OTHER_PLUGINS, "AGENT_LINK_FORKS_LEASE_MS": "3000",
           "AGENT_LINK_FORKS_SWEEP_MS": "1000"}
    async with server(env) as first:
        tools = await first.tools()
        assert "fork_codex_thread" in tools and tools["fork_codex_thread"].input_schema["additionalProperties"] is False
        bogus = await first.call("fork_codex_thread", {"threadId": original, "message": TASK, "bogus": 1})
        assert bogus["error"]["code"] == "invalid_arguments"
        out = await first.call("fork_codex_thread", {"threadId": original, "message": TASK})
        assert out["ok"] and out["status"] == "running" and out["turn"]["id"], out
        job_id = out["forkJobId"]
        assert await asyncio.to_thread(hold.wait_arrived, 30)  # the task turn is with the model
        app = App.create()
        try:
            owner = app.store.conn.execute("SELECT lease_owner FROM fork_jobs WHERE id = ?", (job_id,)).fetchone()[0]
            os.kill(int(owner.split(":")[1]), signal.SIGKILL)  # the lease names the server's pid
            hold.release()  # the task turn completes while no agent-link server watches
            page = await raw.request("thread/turns/list", {"threadId": out["fork"]["threadId"], "limit": 1}, timeout_ms=WAIT_MS)
            assert page["data"][0]["id"] == out["turn"]["id"]
            await until(lambda: app.health()["sections"]["forkJobs"]["stuck"] == 1, "the lease to expire")
            assert reconcile_rows(app, job_id) == []
            async with server(env) as second, server(env) as third:
                await until(lambda: app.store.conn.execute("SELECT status FROM fork_jobs WHERE id = ?", (job_id,)).fetchone()[0]
                            == "completed", "a sweeper to finish the job", 60)
                await until(lambda: archive_state(app, job_id) == "archived", "the archive")
                health = await second.call("agent_link_health", {})
                assert health["sections"]["forkJobs"]["stuck"] == 0 and await third.call("agent_link_health", {})
            [row] = reconcile_rows(app, job_id)
            assert row["body"] == ANSWER
            [claim] = app.store.conn.execute("SELECT * FROM fork_reconciles WHERE job_id = ?", (job_id,)).fetchall()
            assert claim["generation"] == 1 and claim["message_id"] == row["id"]
            taken = [e for e in app.store.conn.execute("SELECT kind FROM fork_job_events WHERE job_id = ?", (job_id,)) if e[0] == "lease_taken"]
            assert len(taken) == 1  # one of the two sweepers won the lease
            assert len(receipts(app, "reconcile_fork")) == 1 and len(receipts(app, "archive_thread")) == 1
        finally:
            await app.aclose()


async def test_sweeper_reconciles_interrupted_and_never_started_tasks(stub: ResponsesStub, raw: AppServerClient, app: App) -> None:
    from agent_link_forks.jobs import Jobs
    from agent_link_forks.runner import runtime

    original = await original_thread(raw)
    jobs = Jobs(app.store)

    async def orphan(job_id: str, phase: str) -> str:
        """A job whose server died after forking (lease expired), with a real fork."""
        fork = await raw.request("thread/fork", {"threadId": original, "threadSource": "agent-link-fork", "excludeTurns": True},
                                 timeout_ms=WAIT_MS)
        fork_id = fork["thread"]["id"]
        jobs.create(job_id, original_thread=original, created_by="test:alice", caller_source="config",
                    request={"message": TASK, "archiveFork": True, "reconcile": {"anticipation": "fyi"}}, last_turn_id="t",
                    owner="dead-server", lease_ms=60_000)
        with app.store.write() as conn:
            conn.execute("UPDATE fork_jobs SET fork_thread = ?, phase = ?, lease_until = 0 WHERE id = ?", (fork_id, phase, job_id))
        return str(fork_id)

    # a task turn (its userMessage carries the job id) interrupted while nobody watched
    hold = Hold(timeout_s=60)
    stub.responder = lambda r: text(ANSWER, hold=hold, stream_first=True) if is_task(r) else None
    interrupted = "01KAAAAAAAAAAAAAAAAAAAAAF1"
    fork_a = await orphan(interrupted, "starting")
    started = await raw.request("turn/start", {"threadId": fork_a, "input": text_input(TASK), "clientUserMessageId": interrupted},
                                timeout_ms=WAIT_MS)
    assert await asyncio.to_thread(hold.wait_arrived, 30)
    await raw.request("turn/interrupt", {"threadId": fork_a, "turnId": started["turn"]["id"]}, timeout_ms=WAIT_MS)
    # a task that never started (phase "starting", no turn carries the job id)
    never = "01KAAAAAAAAAAAAAAAAAAAAAF2"
    fork_b = await orphan(never, "starting")

    rt = runtime(app)
    assert (await rt.sweep())["taken"] == 2
    await until(lambda: all(len(reconcile_rows(app, j)) == 1 for j in (interrupted, never)), "both reconciles")
    [row_a], [row_b] = reconcile_rows(app, interrupted), reconcile_rows(app, never)
    assert jobs.get(interrupted)["status"] == "interrupted" and jobs.get(interrupted)["task_turn_id"] == started["turn"]["id"]
    assert "ended interrupted" in row_a["body"] and 'status="interrupted"' in app.mailbox.envelope(row_a)
    assert jobs.get(never)["status"] == "failed" and "never started" in row_b["body"] and f"codex:{fork_b}" in row_b["body"]
    assert app.store.conn.execute("SELECT COUNT(*) FROM fork_archives").fetchone()[0] == 0  # both forks are kept
    assert app.health()["sections"]["forkJobs"]["error"] == 2
    assert sorted(r["details"]["status"] for r in receipts(app, "reconcile_fork")) == ["failed", "interrupted"]
    assert await rt.sweep() == {"taken": 0, "completed": 0}  # nothing is done twice
