"""The forks plugin imports the original's fork log as finished history (docs/legacy.md)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent_link_core.app import App
from agent_link_legacy.engine import import_legacy
from agent_link_forks.jobs import Jobs
from agent_link_testing.legacy_files import T0, fork_event, write_lines
from agent_link_testing.plugin_suites import app_factory

DONE, LEFT, STOPPED = "01HF0000000000000000000011", "01HF0000000000000000000012", "01HF0000000000000000000013"


@pytest.fixture
def make_app(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., App]]:
    with app_factory(monkeypatch) as make:
        yield make


def created(job: str, at: int) -> dict[str, object]:
    return fork_event("created", job, at, original="codex:orig-1", by="codex:caller-1", launchedBy=None,
                      lastTurnId="turn-1", request={"model": "m", "archiveFork": True, "reconcile": {"anticipation": "fyi"}})


def test_fork_jobs_become_finished_history_once(isolated_env: Path, make_app: Callable[..., App]) -> None:
    write_lines(isolated_env / "forks.jsonl", [
        created(DONE, T0),
        fork_event("forked", DONE, T0 + 10, fork="codex:fork-1", model="m"),
        fork_event("turn-started", DONE, T0 + 20, turnId="turn-9"),
        fork_event("completed", DONE, T0 + 30),
        fork_event("completed", DONE, T0 + 99),  # a later copy of a slot: the first wins
        fork_event("reconciled", DONE, T0 + 40, messageId="01HF0000000000000000000099"),
        created(LEFT, T0 + 100),
        created(STOPPED, T0 + 200),
        fork_event("aborted", STOPPED, T0 + 210, error="thread/fork failed"),
        fork_event("forked", "01HF0000000000000000000077", T0 + 300),  # a job with no created event
        fork_event("exploded", DONE, T0 + 400),
        "[",
    ])
    app = make_app()
    item = next(i for i in import_legacy(app)["importers"] if i["name"] == "forks")
    assert (item["imported"], item["alreadyPresent"], item["unreadable"]) == (3, 0, 3)
    jobs = Jobs(app.store)
    done, left, stopped = jobs.get(DONE), jobs.get(LEFT), jobs.get(STOPPED)
    assert done and left and stopped
    assert (done["status"], done["original_thread"], done["fork_thread"], done["finished_at"]) == ("completed", "orig-1", "fork-1", T0 + 30)
    assert done["created_by"] == "codex:caller-1" and done["task_turn_id"] == "turn-9"
    assert left["status"] == "aborted" and "not resumed" in left["result"]["error"]
    assert stopped["status"] == "aborted" and stopped["result"]["error"] == "thread/fork failed"
    assert [e["kind"] for e in jobs.events(DONE)] == ["created", "forked", "turn-started", "completed", "completed", "reconciled"]
    # nothing is left for the sweeper: no resumable job, no reconcile or archive to send
    assert jobs.claimable(0, now=T0 + 10**12) == []
    assert jobs.unfinished_reconciles(now=T0 + 10**12) == []
    assert jobs.counts(now=T0 + 10**12)["unreconciled"] == 0
    before = sorted(tuple(r) for r in app.store.conn.execute("SELECT * FROM fork_jobs"))
    again = next(i for i in import_legacy(app)["importers"] if i["name"] == "forks")
    assert (again["imported"], again["alreadyPresent"]) == (0, 3)
    assert sorted(tuple(r) for r in app.store.conn.execute("SELECT * FROM fork_jobs")) == before
    assert json.loads(app.store.conn.execute("SELECT request FROM fork_jobs WHERE id = ?", (LEFT,)).fetchone()[0])["archiveFork"] is False


def test_an_original_that_is_no_thread_id_is_refused_and_lower_case_job_ids_are_accepted(
        isolated_env: Path, make_app: Callable[..., App]) -> None:
    lower = "01hf0000000000000000000021"
    bad = {"not an address": "codex:NOT AN ADDRESS", "another harness": "claude:session-1", "missing": None, "a list": ["x"]}
    write_lines(isolated_env / "forks.jsonl", [
        *[fork_event("created", f"01HF00000000000000000000{3 + i}0", T0, original=original, by="codex:caller-1")
          for i, original in enumerate(bad.values())],
        fork_event("created", lower, T0, original="orig-2", by="codex:caller-1"),
        fork_event("forked", lower, T0 + 1, fork="codex:fork-2"),
        fork_event("completed", lower, T0 + 2),
        fork_event("reconciled", lower, T0 + 3, messageId="01hf0000000000000000000098"),
    ])
    app = make_app()
    item = next(i for i in import_legacy(app)["importers"] if i["name"] == "forks")
    assert (item["imported"], item["unreadable"]) == (1, len(bad))
    assert all("is not a Codex thread id" in b["error"] for b in item["badLines"])
    job = Jobs(app.store).get(lower.upper())
    assert job and (job["original_thread"], job["fork_thread"], job["status"]) == ("orig-2", "fork-2", "completed")
    assert app.store.conn.execute("SELECT COUNT(*) FROM fork_jobs").fetchone()[0] == 1
    reconcile = app.store.conn.execute("SELECT message_id FROM fork_reconciles WHERE job_id = ?", (lower.upper(),)).fetchone()
    assert reconcile[0] == "01HF0000000000000000000098"
