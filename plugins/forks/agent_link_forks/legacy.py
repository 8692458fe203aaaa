"""Importing the original's fork log ``<state dir>/forks.jsonl`` (``agent-link import-legacy``,
docs/legacy.md).

Each line is an event ``{type, jobId, at, ...}``; a job is the fold of its events, the first
event of each kind winning. A job becomes a ``fork_jobs`` row under its own id (so it is
never imported twice) with its events in ``fork_job_events``. Imported jobs are history, never
work: a job the original left running is stored ``aborted`` (nothing here resumes another
program's job), and a finished one gets a reconcile and archive record marked ``imported``,
so this plugin's sweeper never sends a second reconcile message or archives a fork.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from typing import Any

from agent_link_core.addresses import address_scheme, is_address
from agent_link_legacy.contract import ID_CHARS_RE_TEXT, LegacyContext, LegacyImporter, LegacyOutcome, existing, ulid_upper

EVENT_TYPES = ("created", "forked", "compacted", "turn-started", "completed", "failed", "interrupted",
               "reconcile-written", "reconciled", "archived", "aborted")
OUTCOMES = ("completed", "failed", "interrupted")
IMPORTED = "legacy-import"
THREAD_ID = re.compile(ID_CHARS_RE_TEXT)  # a Codex thread id, as the fork tools accept it


class ForksImporter(LegacyImporter):
    """The forks plugin's importer (name ``forks``)."""

    name = "forks"
    order = 60

    def paths(self, ctx: LegacyContext) -> list[str]:
        return [os.path.join(ctx.source_dir, "forks.jsonl")]

    def run(self, ctx: LegacyContext, outcome: LegacyOutcome) -> None:
        for path in existing(self.paths(ctx)):
            jobs: dict[str, dict[str, Any]] = {}
            try:
                for lineno, event in ctx.read_jsonl(path, outcome):
                    kind, job_id, at = event.get("type"), ulid_upper(event.get("jobId")), event.get("at")
                    if kind not in EVENT_TYPES:
                        outcome.bad(path, lineno, f"unknown fork event type {kind!r}")
                    elif job_id is None:
                        outcome.bad(path, lineno, f"fork event with job id {event.get('jobId')!r}, not a ULID")
                    elif not isinstance(at, (int, float)) or isinstance(at, bool):
                        outcome.bad(path, lineno, f"fork event {kind} of job {job_id} without a time")
                    else:
                        job = jobs.setdefault(job_id, {"slots": {}, "events": []})
                        job["slots"].setdefault(kind, event)  # the first event of each kind wins
                        job["events"].append(event)
            except OSError as exc:
                outcome.bad(path, None, f"cannot be read: {exc.strerror or exc}")
                continue
            for job_id, job in jobs.items():
                if "created" not in job["slots"]:
                    outcome.bad(path, None, f"job {job_id} has events but no created event")
                    continue
                original = job["slots"]["created"].get("original")
                if _thread(original) is None:
                    outcome.bad(path, None, f"job {job_id}: original {original!r} is not a Codex thread id")
                    continue
                if ctx.conn.execute("SELECT 1 FROM fork_jobs WHERE id = ?", (job_id,)).fetchone():
                    outcome.present += 1
                    continue
                try:
                    with ctx.app.store.write():  # a savepoint: a job SQLite refuses is left out alone
                        _insert(ctx, job_id, job)
                except (sqlite3.Error, ValueError, TypeError) as exc:
                    outcome.bad(path, None, f"job {job_id} could not be stored: {exc}")
                    continue
                outcome.imported += 1
            outcome.files.append(path)


def _thread(value: Any) -> str | None:
    """A thread id from an address (``codex:<id>``), a bare id or ``{id}``/``{threadId}``;
    None for anything else (another harness's address, text that is no id)."""
    if isinstance(value, dict):
        value = value.get("threadId") or value.get("id") or value.get("thread")
    if not isinstance(value, str) or not value:
        return None
    if ":" in value:
        if not (is_address(value) and address_scheme(value) == "codex"):
            return None
        value = value.split(":", 1)[1]
    return value if THREAD_ID.fullmatch(value) else None


def _ending(slots: dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """``(status, result, the event that ended it)`` of a logged job: its outcome, else ``aborted`` (one left running is
    imported as history, never resumed)."""
    outcome = next((k for k in OUTCOMES if k in slots), None)
    end = slots.get(outcome or "aborted") or {}
    result: dict[str, Any] = {"imported": True}
    if outcome is None and "aborted" not in slots:
        result["error"] = "left running in the original's log; imported as history, not resumed"
    elif isinstance(end.get("error"), (str, dict)):
        result["error"] = end["error"]
    return "aborted" if "aborted" in slots or outcome is None else outcome, result, end


def _insert(ctx: LegacyContext, job_id: str, job: dict[str, Any]) -> None:
    slots = job["slots"]
    created = slots["created"]
    forked = slots.get("forked") or {}
    at = int(created["at"])
    last_at = max(int(e["at"]) for e in job["events"])
    status, result, end = _ending(slots)
    request = dict(created.get("request") or {}) if isinstance(created.get("request"), dict) else {}
    fork_thread = _thread(forked.get("fork") or forked.get("forkThreadId") or forked.get("threadId"))
    if fork_thread is not None and ctx.conn.execute("SELECT 1 FROM fork_jobs WHERE fork_thread = ?", (fork_thread,)).fetchone():
        fork_thread = None  # another job already owns that fork: keep the first
    if fork_thread is None:
        request["archiveFork"] = False  # nothing to archive: the fork's id was never logged
    by = created.get("by") if isinstance(created.get("by"), str) else "external"
    conn = ctx.conn
    conn.execute(
        "INSERT INTO fork_jobs (id, original_thread, created_by, caller_source, created_at, updated_at, status, phase,"
        " request, last_turn_id, fork_thread, fork, task_turn_id, result, lease_until, finished_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, 'finished', ?, ?, ?, ?, ?, ?, 0, ?)",
        (job_id, _thread(created.get("original")) or "", ctx.address(by) or "external", IMPORTED, at, last_at, status,
         json.dumps(request), created.get("lastTurnId") if isinstance(created.get("lastTurnId"), str) else None,
         fork_thread, json.dumps({k: forked[k] for k in ("model", "effort", "cwd") if k in forked}),
         _thread((slots.get("turn-started") or {}).get("turnId")), json.dumps(result), int(end.get("at", last_at))),
    )
    for event in job["events"]:
        data = {k: v for k, v in event.items() if k not in ("type", "jobId", "at")}
        conn.execute("INSERT INTO fork_job_events (job_id, kind, at, data) VALUES (?, ?, ?, ?)",
                     (job_id, event["type"], int(event["at"]), json.dumps({**data, "imported": True}, ensure_ascii=False)))
    reconciled = slots.get("reconciled") or slots.get("reconcile-written") or {}
    raw_message = reconciled.get("messageId")
    message_id = (ulid_upper(raw_message) or raw_message) if isinstance(raw_message, str) else f"{IMPORTED}-{job_id}"
    conn.execute("INSERT OR IGNORE INTO fork_reconciles (job_id, message_id, status, body, claimed_by, claimed_at, stored_at,"
                 " delivered_via) VALUES (?, ?, ?, '', ?, ?, ?, ?)",
                 (job_id, message_id, status, IMPORTED, last_at, last_at, IMPORTED))
    if fork_thread is not None:
        state = "archived" if "archived" in slots else "kept"
        conn.execute("INSERT OR IGNORE INTO fork_archives (job_id, fork_thread, state, at, detail) VALUES (?, ?, ?, ?, ?)",
                     (job_id, fork_thread, state, last_at, "imported from the original's fork log"))
