"""Fork job rules that need no Codex: the compaction decision, reconcile bodies and the 64 KiB
cut, the ``<fork/>`` envelope element, the exactly-once claims (two processes racing), the
health counts, the tool's argument errors and the ``agent-link forks`` commands."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_link_forks.jobs import MAX_RECONCILE_GENERATIONS, RECONCILE_STALE_MS, Jobs
from agent_link_forks.runner import (
    compaction_decision,
    cut_body,
    reconcile_body,
    runtime,
)
from agent_link_testing.plugin_suites import app_factory, call_tool
from click.testing import CliRunner

from agent_link_core.app import App
from agent_link_core.cli import build_cli
from agent_link_core.envelope import MAX_BODY_BYTES
from agent_link_core.records import OutgoingMessage
from agent_link_core.model import Caller
from agent_link_core.store import now_ms

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

ALICE = Caller("test:alice", "config", "test")
ORIGINAL = "01a22d06-e7ff-7032-a5a7-17d62d49ca7b"
FORK = "01a22d06-ea2b-7df2-af95-3ca4759a5fd6"


@pytest.fixture
def make_app(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Callable[..., App]]:
    """Apps of the installed plugins with Codex unreachable (no app-server, no autostart)."""
    monkeypatch.setenv("AGENT_LINK_CODEX_SOCK", str(tmp_path / "nobody.sock"))
    monkeypatch.setenv("AGENT_LINK_CODEX_AUTOSTART", "0")
    with app_factory(monkeypatch, disabled="claude roles") as make:
        yield make


def add_job(jobs: Jobs, job_id: str, *, status: str = "running", owner: str = "me", **columns: Any) -> None:
    jobs.create(job_id, original_thread=ORIGINAL, created_by="test:alice", caller_source="config",
                request={"message": "task", "archiveFork": True, "reconcile": {"anticipation": "fyi"}}, last_turn_id="t1",
                owner=owner, lease_ms=60_000)
    fork = FORK[:-2] + job_id[-2:].lower()  # one fork per job (fork_thread is UNIQUE)
    sets = {"fork_thread": fork, "fork": json.dumps({"model": "m2", "effort": "high"}), **columns}
    with jobs.store.write() as conn:
        conn.execute(f"UPDATE fork_jobs SET {', '.join(f'{k} = ?' for k in sets)} WHERE id = ?", (*sets.values(), job_id))
    if status != "running":
        assert jobs.finish(job_id, owner, status, {"error": "boom" if status == "failed" else None, "output": "the answer"})


def test_compaction_decision() -> None:
    records = [{"last": {"inputTokens": 600}, "modelContextWindow": 1000}]
    assert compaction_decision("never", records)["reason"] == "never" and not compaction_decision("never", records)["compact"]
    assert compaction_decision("always", [])["compact"] and compaction_decision("always", [])["reason"] == "always"
    over = compaction_decision("auto", records)
    assert (over["compact"], over["reason"], over["inputTokens"], over["modelContextWindow"]) == (True, "over_threshold", 600, 1000)
    under = compaction_decision("auto", [{"last": {"inputTokens": 500}, "modelContextWindow": 1000}])
    assert (under["compact"], under["reason"]) == (False, "under_threshold")
    unknown = compaction_decision("auto", [])
    assert (unknown["compact"], unknown["reason"], unknown["windowBasis"]) == (False, "usage_unknown", None)


def test_reconcile_bodies_and_the_64_kib_cut() -> None:
    small = "é" * 10
    assert cut_body(small, "codex:f") == small
    big = "é" * MAX_BODY_BYTES  # 2 bytes each: twice the limit
    cut = cut_body(big, "codex:f")
    assert len(cut.encode("utf-8")) <= MAX_BODY_BYTES and "agent-link cut this text" in cut and "codex:f" in cut
    assert cut.startswith("é" * 100) and "\ufffd" not in cut
    job = {"id": "J1", "status": "completed", "fork_thread": FORK, "result": {"output": None}}
    assert "without a final answer" in reconcile_body(job) and FORK in reconcile_body(job)
    failed = reconcile_body({**job, "status": "interrupted", "result": {"error": "stopped", "output": "half"}})
    assert "ended interrupted" in failed and "Error: stopped" in failed and "kept for inspection" in failed and "half" in failed
    assert "No fork thread was created" in reconcile_body({**job, "status": "failed", "fork_thread": None, "result": {}})


async def test_fork_element_in_the_reconcile_envelope(make_app: Callable[..., App]) -> None:
    app = make_app()
    for mid, fork, expected in (
        ("01KAAAAAAAAAAAAAAAAAAAAAA1", {"thread": f"codex:{FORK}", "model": 'm"2', "effort": "high", "status": "completed"},
         f'<fork thread="codex:{FORK}" model="m&quot;2" effort="high" status="completed" />'),
        ("01KAAAAAAAAAAAAAAAAAAAAAA2", {"thread": "claude:x", "status": "completed"}, None),
    ):
        row, _ = app.mailbox.store_message(OutgoingMessage(id=mid, sender=ALICE, to=f"codex:{ORIGINAL}", recipient=f"codex:{ORIGINAL}",
                                                           body="result", anticipation="fyi", reply_by_ms=None, reply_to=None,
                                                           metadata={"fork": fork}))
        envelope = app.mailbox.envelope(row)
        if expected is None:
            assert "<fork" not in envelope
        else:
            assert expected in envelope.splitlines()


async def test_claims_are_exactly_once(make_app: Callable[..., App]) -> None:
    one, two = Jobs(make_app().store), Jobs(make_app().store)
    add_job(one, "01KAAAAAAAAAAAAAAAAAAAAAB1", status="completed")
    first = one.claim_reconcile("01KAAAAAAAAAAAAAAAAAAAAAB1", "me", "01KAAAAAAAAAAAAAAAAAAAAAM1", "completed", "body one")
    assert first is not None and first["generation"] == 1
    assert two.claim_reconcile("01KAAAAAAAAAAAAAAAAAAAAAB1", "other", "01KAAAAAAAAAAAAAAAAAAAAAM2", "completed", "body two") is None
    # a stale unstored claim is taken over, keeping the first message id and body; bounded
    for generation in range(2, MAX_RECONCILE_GENERATIONS + 2):
        with one.store.write() as conn:
            conn.execute("UPDATE fork_reconciles SET claimed_at = ?", (now_ms() - RECONCILE_STALE_MS - 1,))
        taken = two.claim_reconcile("01KAAAAAAAAAAAAAAAAAAAAAB1", f"other{generation}", "01KAAAAAAAAAAAAAAAAAAAAAM3", "completed", "x")
        if generation <= MAX_RECONCILE_GENERATIONS:
            assert taken is not None and (taken["generation"], taken["message_id"], taken["body"]) == (
                generation, "01KAAAAAAAAAAAAAAAAAAAAAM1", "body one")
        else:
            assert taken is None
    assert one.claim_archive("01KAAAAAAAAAAAAAAAAAAAAAB1", FORK)
    assert not two.claim_archive("01KAAAAAAAAAAAAAAAAAAAAAB1", FORK)
    # leases: of two sweepers seeing the same expired lease, one takes it
    add_job(one, "01KAAAAAAAAAAAAAAAAAAAAAB2", task_turn_id="turn-1", lease_until=0)
    [job] = one.claimable(900_000)
    assert [one.take_over(job, "a", 60_000), two.take_over(job, "b", 60_000)] == [True, False]
    assert one.claimable(900_000) == []


async def test_two_processes_completing_at_once_store_one_reconcile(make_app: Callable[..., App]) -> None:
    first, second = make_app(), make_app()
    add_job(Jobs(first.store), "01KAAAAAAAAAAAAAAAAAAAAAC1", status="failed")
    await asyncio.gather(runtime(first).complete("01KAAAAAAAAAAAAAAAAAAAAAC1"), runtime(second).complete("01KAAAAAAAAAAAAAAAAAAAAAC1"))
    rows = first.store.conn.execute("SELECT * FROM messages").fetchall()
    assert len(rows) == 1 and rows[0]["recipient"] == f"codex:{ORIGINAL}" and "ended failed" in rows[0]["body"]
    assert Jobs(first.store).reconcile("01KAAAAAAAAAAAAAAAAAAAAAC1")["stored_at"] is not None
    assert first.store.conn.execute("SELECT COUNT(*) FROM fork_archives").fetchone()[0] == 0  # failed forks are kept
    # the sweep finds nothing more to do, in either process
    assert await runtime(second).sweep() == {"taken": 0, "completed": 0}


async def test_health_counts(make_app: Callable[..., App]) -> None:
    app = make_app()
    jobs = Jobs(app.store)
    add_job(jobs, "01KAAAAAAAAAAAAAAAAAAAAAD1")  # forked, task not started
    add_job(jobs, "01KAAAAAAAAAAAAAAAAAAAAAD2", task_turn_id="t")  # watched
    add_job(jobs, "01KAAAAAAAAAAAAAAAAAAAAAD3", task_turn_id="t", lease_until=0)  # nobody watches
    add_job(jobs, "01KAAAAAAAAAAAAAAAAAAAAAD4", status="interrupted")
    assert app.health()["sections"]["forkJobs"] == {"pending": 1, "running": 1, "stuck": 1, "error": 1, "unreconciled": 1}


async def test_tool_argument_errors(make_app: Callable[..., App]) -> None:
    app = make_app()

    async def code(args: dict[str, Any], app: App = app) -> str:
        out = await call_tool(app, "fork_codex_thread", args, ALICE)
        assert out["ok"] is False, out
        return str(out["error"]["code"])

    assert await code({"threadId": ORIGINAL, "message": "x", "bogus": 1}) == "invalid_arguments"
    assert await code({"message": "x"}) == "invalid_arguments"  # neither threadId nor query
    assert await code({"threadId": ORIGINAL, "query": "q", "message": "x"}) == "invalid_arguments"
    assert await code({"threadId": ORIGINAL, "message": "x", "reconcile": {"replyBy": "2099-01-01T00:00:00Z"}}) == "invalid_arguments"
    assert await code({"threadId": ORIGINAL, "message": "x", "compactFork": "sometimes"}) == "invalid_arguments"
    assert await code({"threadId": ORIGINAL, "message": "x" * (MAX_BODY_BYTES + 1)}) == "body_too_large"
    assert await code({"threadId": ORIGINAL, "message": "x"}) == "codex_unavailable"
    without_codex = make_app(AGENT_LINK_DISABLE_PLUGINS="codex claude roles")
    assert await code({"threadId": ORIGINAL, "message": "x"}, without_codex) == "unsupported"


async def test_a_retried_fork_starts_no_second_fork(make_app: Callable[..., App]) -> None:
    """issue 29: the same messageId (the fork job's id) and arguments return the first job
    (duplicate) without asking Codex (unreachable here); other arguments are refused."""
    app = make_app()
    key = "01J00000000000000000000009"
    request = {"message": "task", "model": None, "modelProvider": None, "serviceTier": None, "effort": None, "cwd": None,
               "compactFork": "auto", "archiveFork": True, "reconcile": {"anticipation": "fyi", "replyByMs": None},
               "waitForResult": False, "receipt": {}}
    runtime(app).jobs.create(key, original_thread=ORIGINAL, created_by="test:alice", caller_source="config", request=request,
                             last_turn_id="t1", owner="me", lease_ms=60_000)
    out = await call_tool(app, "fork_codex_thread", {"threadId": ORIGINAL, "message": "task", "messageId": key.lower()}, ALICE)
    assert out["ok"] and out["duplicate"] is True and out["forkJobId"] == key, out
    out = await call_tool(app, "fork_codex_thread", {"threadId": ORIGINAL, "message": "another task", "effort": "high",
                                                     "messageId": key}, ALICE)
    assert out["error"]["code"] == "invalid_arguments" and out["error"]["details"]["differs"] == ["message", "effort"]
    out = await call_tool(app, "fork_codex_thread", {"threadId": ORIGINAL, "message": "task", "lastTurnId": "t2", "messageId": key}, ALICE)
    assert out["error"]["details"]["differs"] == ["lastTurnId"]
    assert [job["id"] for job in runtime(app).jobs.recent()] == [key]


def test_forks_cli(make_app: Callable[..., App], monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app()
    jobs = Jobs(app.store)
    add_job(jobs, "01KAAAAAAAAAAAAAAAAAAAAAE1", status="completed")
    add_job(jobs, "01KAAAAAAAAAAAAAAAAAAAAAE2", task_turn_id="turn-x")
    cli = build_cli()
    runner = CliRunner()
    human = runner.invoke(cli, ["forks", "list"])
    assert human.exit_code == 0 and "01KAAAAAAAAAAAAAAAAAAAAAE1" in human.output and "JOB" in human.output
    listed = json.loads(runner.invoke(cli, ["forks", "list", "--json", "--status", "running"]).output)
    assert [j["id"] for j in listed["jobs"]] == ["01KAAAAAAAAAAAAAAAAAAAAAE2"] and listed["jobs"][0]["fork"].startswith("codex:01a22d06")
    shown = json.loads(runner.invoke(cli, ["forks", "show", "01kaaaaaaaaaaaaaaaaaaaaae1", "--json"]).output)
    assert shown["job"]["status"] == "completed" and [e["kind"] for e in shown["events"]] == ["created", "completed"]
    assert "completed" in runner.invoke(cli, ["forks", "show", "01KAAAAAAAAAAAAAAAAAAAAAE1"]).output
    missing = runner.invoke(cli, ["forks", "show", "01KAAAAAAAAAAAAAAAAAAAAAZZ"])
    assert missing.exit_code == 1 and "no fork job" in missing.output
    assert runner.invoke(cli, ["forks", "list", "--status", "weird"]).exit_code == 2


def test_forks_show_escapes_what_codex_or_an_agent_wrote(make_app: Callable[..., App]) -> None:
    app = make_app()
    jobs = Jobs(app.store)
    add_job(jobs, "01KAAAAAAAAAAAAAAAAAAAAAE3", fork=json.dumps({"model": "m\x1b[2J\u202e2", "effort": "high"}))
    assert jobs.finish("01KAAAAAAAAAAAAAAAAAAAAAE3", "me", "failed", {"error": "boom\a\nforged: line"})
    assert jobs.claim_archive("01KAAAAAAAAAAAAAAAAAAAAAE3", "fork-e3")
    jobs.archive_done("01KAAAAAAAAAAAAAAAAAAAAAE3", "failed", "no\u202e such\nthread")
    shown = CliRunner().invoke(build_cli(), ["forks", "show", "01KAAAAAAAAAAAAAAAAAAAAAE3"]).output
    assert all(line.isprintable() for line in shown.splitlines()), shown
    assert "m\\u{001B}[2J\\u{202E}2" in shown and "boom\\u{0007}\\u{000A}forged: line" in shown
    assert "no\\u{202E} such\\u{000A}thread" in shown


class TurnSequence:
    """CodexThreads stand-in whose ``find_turn`` answers the given statuses in order (then the last)."""

    def __init__(self, statuses: list[str]) -> None:
        self.statuses = statuses
        self.polls = 0

    async def find_turn(self, thread_id: str, *, turn_id: str | None = None, client_id: str | None = None) -> dict[str, Any]:
        status = self.statuses[min(self.polls, len(self.statuses) - 1)]
        self.polls += 1
        return {"id": turn_id, "status": status, "items": []}


@pytest.mark.parametrize(("statuses", "ended", "polls"), [
    # Codex lists a turn it has just started as interrupted for a moment (docs/hosts/codex.md §6)
    (["interrupted", "inProgress", "completed"], "completed", 3),
    (["interrupted", "interrupted"], "interrupted", 2),
    (["inProgress", "failed"], "failed", 2),
])
async def test_watch_takes_interrupted_only_when_it_persists(
    make_app: Callable[..., App], monkeypatch: pytest.MonkeyPatch, statuses: list[str], ended: str, polls: int,
) -> None:
    from agent_link_forks import runner

    app = make_app()
    rt = runtime(app)
    add_job(rt.jobs, "01KAAAAAAAAAAAAAAAAAAAAAW1", owner=rt.owner, task_turn_id="turn-1")
    fake = TurnSequence(statuses)
    finished: list[str] = []

    async def finish_turn(job: dict[str, Any], turn: dict[str, Any]) -> None:
        finished.append(turn["status"])

    monkeypatch.setattr(runner, "POLL_MS", 1)
    monkeypatch.setattr(runner.Runtime, "threads", property(lambda self: fake))
    monkeypatch.setattr(rt, "finish_turn", finish_turn)
    await asyncio.wait_for(rt.watch("01KAAAAAAAAAAAAAAAAAAAAAW1"), 10)
    assert (finished, fake.polls) == ([ended], polls)
    await app.aclose()
