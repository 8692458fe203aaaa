"""Fork jobs in the database: every state change is one short transaction, and the
exactly-once steps are UNIQUE constraints (:mod:`agent_link_forks.schema`).

Times are epoch ms. JSON columns are decoded by :func:`job_view`.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import uuid
from typing import Any

from agent_link_core.store import Store, now_ms

FINISHED = ("completed", "failed", "interrupted")
#: a reconcile claim left unstored this long is taken over (reference: 60 s)
RECONCILE_STALE_MS = 60_000
#: at most this many claims of one reconcile (the first and four takeovers)
MAX_RECONCILE_GENERATIONS = 5
#: a job taken over more often than this is failed instead of watched again
MAX_LEASE_GENERATIONS = 10


def process_owner() -> str:
    """A lease owner name unique to this process: ``<host>:<pid>:<random>``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _dump(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def _load(value: str | None) -> Any:
    return None if value is None else json.loads(value)


def job_view(row: sqlite3.Row) -> dict[str, Any]:
    """A job row with its JSON columns decoded (keys as the columns are named)."""
    out = dict(zip(row.keys(), tuple(row)))
    for key in ("request", "fork", "compaction", "result"):
        out[key] = _load(out[key])
    return out


class Jobs:
    """Fork job operations over one :class:`~agent_link_core.store.Store`."""

    def __init__(self, store: Store) -> None:
        self.store = store

    # reading -----------------------------------------------------------------------------
    def get(self, job_id: str) -> dict[str, Any] | None:
        """One job (decoded), or None."""
        row = self.store.conn.execute("SELECT * FROM fork_jobs WHERE id = ?", (job_id,)).fetchone()
        return job_view(row) if row is not None else None

    def recent(self, *, status: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """Jobs newest first, optionally of one status."""
        sql, params = "SELECT * FROM fork_jobs", []
        if status:
            sql += " WHERE status = ?"
            params.append(status)
        rows = self.store.conn.execute(sql + " ORDER BY created_at DESC, id DESC LIMIT ?", (*params, limit)).fetchall()
        return [job_view(r) for r in rows]

    def events(self, job_id: str) -> list[dict[str, Any]]:
        """A job's events in order: ``[{kind, at, data}]``."""
        rows = self.store.conn.execute("SELECT kind, at, data FROM fork_job_events WHERE job_id = ? ORDER BY seq", (job_id,))
        return [{"kind": r["kind"], "at": r["at"], "data": json.loads(r["data"])} for r in rows]

    def reconcile(self, job_id: str) -> dict[str, Any] | None:
        """The job's reconcile row (dict), or None."""
        row = self.store.conn.execute("SELECT * FROM fork_reconciles WHERE job_id = ?", (job_id,)).fetchone()
        return dict(row) if row is not None else None

    def archive(self, job_id: str) -> dict[str, Any] | None:
        """The job's archive row (dict), or None."""
        row = self.store.conn.execute("SELECT * FROM fork_archives WHERE job_id = ?", (job_id,)).fetchone()
        return dict(row) if row is not None else None

    def counts(self, now: int | None = None) -> dict[str, int]:
        """Health counts: ``pending`` (running, task not started), ``running`` (task running,
        watched), ``stuck`` (running, nobody holds the lease), ``error`` (ended failed or
        interrupted), ``unreconciled`` (ended, reconcile not stored yet)."""
        now = now_ms() if now is None else now
        row = self.store.conn.execute(
            "SELECT"
            " SUM(status = 'running' AND lease_until >= ? AND task_turn_id IS NULL),"
            " SUM(status = 'running' AND lease_until >= ? AND task_turn_id IS NOT NULL),"
            " SUM(status = 'running' AND lease_until < ?),"
            " SUM(status IN ('failed', 'interrupted'))"
            " FROM fork_jobs",
            (now, now, now),
        ).fetchone()
        unreconciled = self.store.conn.execute(
            "SELECT COUNT(*) FROM fork_jobs j LEFT JOIN fork_reconciles r ON r.job_id = j.id"
            " WHERE j.status IN ('completed', 'failed', 'interrupted') AND r.stored_at IS NULL"
        ).fetchone()[0]
        return {"pending": int(row[0] or 0), "running": int(row[1] or 0), "stuck": int(row[2] or 0),
                "error": int(row[3] or 0), "unreconciled": int(unreconciled)}

    # writing -----------------------------------------------------------------------------
    def _event(self, conn: sqlite3.Connection, job_id: str, kind: str, at: int, data: dict[str, Any]) -> None:
        conn.execute("INSERT INTO fork_job_events (job_id, kind, at, data) VALUES (?, ?, ?, ?)",
                     (job_id, kind, at, json.dumps(data, ensure_ascii=False)))

    def create(self, job_id: str, *, original_thread: str, created_by: str, caller_source: str, request: dict[str, Any],
               last_turn_id: str, owner: str, lease_ms: int) -> None:
        """Insert a running job (phase ``created``) leased to ``owner``."""
        at = now_ms()
        with self.store.write() as conn:
            conn.execute(
                "INSERT INTO fork_jobs (id, original_thread, created_by, caller_source, created_at, updated_at, status, phase,"
                " request, last_turn_id, lease_owner, lease_until, lease_generation)"
                " VALUES (?, ?, ?, ?, ?, ?, 'running', 'created', ?, ?, ?, ?, 1)",
                (job_id, original_thread, created_by, caller_source, at, at, _dump(request), last_turn_id, owner, at + lease_ms),
            )
            self._event(conn, job_id, "created", at, {"by": created_by, "lastTurnId": last_turn_id})

    def update(self, job_id: str, owner: str, event: str, data: dict[str, Any] | None = None, **columns: Any) -> bool:
        """Change a running job's columns (JSON ones encoded) and log ``event``, only while
        ``owner`` holds its lease; False when it does not (another process took over)."""
        encoded = {k: (_dump(v) if k in ("fork", "compaction", "result", "request") else v) for k, v in columns.items()}
        at = now_ms()
        sets = ", ".join(f"{k} = ?" for k in encoded)
        with self.store.write() as conn:
            cur = conn.execute(
                f"UPDATE fork_jobs SET {sets + ', ' if sets else ''}updated_at = ? WHERE id = ? AND lease_owner = ? AND status = 'running'",
                (*encoded.values(), at, job_id, owner),
            )
            if cur.rowcount != 1:
                return False
            self._event(conn, job_id, event, at, data or {})
        return True

    def renew(self, job_id: str, owner: str, lease_ms: int) -> bool:
        """Extend ``owner``'s lease; False when it lost the job."""
        with self.store.write() as conn:
            cur = conn.execute("UPDATE fork_jobs SET lease_until = ? WHERE id = ? AND lease_owner = ? AND status = 'running'",
                               (now_ms() + lease_ms, job_id, owner))
            return cur.rowcount == 1

    def release(self, job_id: str, owner: str) -> None:
        """Give up a lease at once (this process stops watching): a sweeper may take over."""
        with self.store.write() as conn:
            conn.execute("UPDATE fork_jobs SET lease_until = 0 WHERE id = ? AND lease_owner = ? AND status = 'running'",
                         (job_id, owner))

    def claimable(self, start_timeout_ms: int, now: int | None = None, limit: int = 20) -> list[dict[str, Any]]:
        """Running jobs whose lease expired and that a sweeper can finish now: the task turn
        started (or may have), or the job is older than ``start_timeout_ms`` (never started)."""
        now = now_ms() if now is None else now
        rows = self.store.conn.execute(
            "SELECT * FROM fork_jobs WHERE status = 'running' AND lease_until < ?"
            " AND (task_turn_id IS NOT NULL OR phase = 'starting' OR created_at < ?) ORDER BY created_at LIMIT ?",
            (now, now - start_timeout_ms, limit),
        ).fetchall()
        return [job_view(r) for r in rows]

    def take_over(self, job: dict[str, Any], owner: str, lease_ms: int) -> bool:
        """Take an expired lease; True for the one process that wins (its generation moves on)."""
        at = now_ms()
        with self.store.write() as conn:
            cur = conn.execute(
                "UPDATE fork_jobs SET lease_owner = ?, lease_until = ?, lease_generation = lease_generation + 1, updated_at = ?"
                " WHERE id = ? AND status = 'running' AND lease_until < ? AND lease_generation = ?",
                (owner, at + lease_ms, at, job["id"], at, job["lease_generation"]),
            )
            if cur.rowcount != 1:
                return False
            self._event(conn, job["id"], "lease_taken", at, {"owner": owner, "generation": job["lease_generation"] + 1,
                                                             "previousOwner": job["lease_owner"]})
        return True

    def finish(self, job_id: str, owner: str | None, status: str, result: dict[str, Any]) -> bool:
        """Record the job's outcome once (``running`` → ``status``); ``owner`` None finishes
        without a lease (an abort inside the tool call). False when it was already finished
        or another process holds the lease."""
        at = now_ms()
        with self.store.write() as conn:
            sql = ("UPDATE fork_jobs SET status = ?, phase = 'finished', result = ?, finished_at = ?, updated_at = ?"
                   " WHERE id = ? AND status = 'running'")
            params: tuple[Any, ...] = (status, _dump(result), at, at, job_id)
            if owner is not None:
                sql += " AND lease_owner = ?"
                params += (owner,)
            if conn.execute(sql, params).rowcount != 1:
                return False
            self._event(conn, job_id, status, at, {"error": result.get("error")})
        return True

    # reconcile and archive claims --------------------------------------------------------
    def claim_reconcile(self, job_id: str, owner: str, message_id: str, status: str, body: str) -> dict[str, Any] | None:
        """Claim the job's one reconcile. A new claim stores ``message_id``/``body``; an
        unstored claim older than :data:`RECONCILE_STALE_MS` is taken over (at most
        :data:`MAX_RECONCILE_GENERATIONS` claims), keeping the first claim's message id and
        body. Returns the claimed row, or None when another process holds it or it is stored."""
        at = now_ms()
        with self.store.write() as conn:
            cur = conn.execute(
                "INSERT OR IGNORE INTO fork_reconciles (job_id, message_id, status, body, claimed_by, claimed_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (job_id, message_id, status, body, owner, at),
            )
            if cur.rowcount != 1:
                cur = conn.execute(
                    "UPDATE fork_reconciles SET claimed_by = ?, claimed_at = ?, generation = generation + 1"
                    " WHERE job_id = ? AND stored_at IS NULL AND claimed_at < ? AND generation < ? AND claimed_by != ?",
                    (owner, at, job_id, at - RECONCILE_STALE_MS, MAX_RECONCILE_GENERATIONS, owner),
                )
                if cur.rowcount != 1:
                    row = conn.execute("SELECT * FROM fork_reconciles WHERE job_id = ?", (job_id,)).fetchone()
                    # our own unstored claim (a retry in this process) is still ours
                    return dict(row) if row is not None and row["claimed_by"] == owner and row["stored_at"] is None else None
            self._event(conn, job_id, "reconcile_claimed", at, {"owner": owner})
            return dict(conn.execute("SELECT * FROM fork_reconciles WHERE job_id = ?", (job_id,)).fetchone())

    def reconcile_stored(self, job_id: str, owner: str, delivered_via: str | None = None) -> None:
        """Mark the reconcile message stored (and how it reached the original, when known)."""
        at = now_ms()
        with self.store.write() as conn:
            conn.execute("UPDATE fork_reconciles SET stored_at = COALESCE(stored_at, ?), delivered_via = COALESCE(?, delivered_via)"
                         " WHERE job_id = ? AND claimed_by = ?", (at, delivered_via, job_id, owner))
            self._event(conn, job_id, "reconciled", at, {"deliveredVia": delivered_via})

    def note_delivery(self, job_id: str, via: str) -> None:
        """Record how the stored reconcile reached the original thread."""
        with self.store.write() as conn:
            conn.execute("UPDATE fork_reconciles SET delivered_via = ? WHERE job_id = ?", (via, job_id))

    def claim_archive(self, job_id: str, fork_thread: str) -> bool:
        """Claim the one archive attempt of the job's fork; True for the winner."""
        with self.store.write() as conn:
            cur = conn.execute("INSERT OR IGNORE INTO fork_archives (job_id, fork_thread, state, at) VALUES (?, ?, 'archiving', ?)",
                               (job_id, fork_thread, now_ms()))
            return cur.rowcount == 1

    def archive_done(self, job_id: str, state: str, detail: str | None = None) -> None:
        """Record the archive attempt's outcome: ``archived``, ``kept`` (not this job's fork)
        or ``failed``."""
        at = now_ms()
        with self.store.write() as conn:
            conn.execute("UPDATE fork_archives SET state = ?, at = ?, detail = ? WHERE job_id = ?", (state, at, detail, job_id))
            self._event(conn, job_id, f"archive_{state}", at, {"detail": detail})

    def unfinished_reconciles(self, now: int | None = None, limit: int = 20) -> list[dict[str, Any]]:
        """Ended jobs whose reconcile is missing, or unstored and stale, and whose finisher had
        :data:`RECONCILE_STALE_MS` to do it; plus completed ones with a stored reconcile whose
        archive was never attempted."""
        now = now_ms() if now is None else now
        rows = self.store.conn.execute(
            "SELECT j.* FROM fork_jobs j LEFT JOIN fork_reconciles r ON r.job_id = j.id"
            " LEFT JOIN fork_archives a ON a.job_id = j.id"
            " WHERE j.status IN ('completed', 'failed', 'interrupted') AND j.finished_at < ?"
            " AND (r.job_id IS NULL OR (r.stored_at IS NULL AND r.claimed_at < ? AND r.generation < ?)"
            "      OR (j.status = 'completed' AND r.stored_at IS NOT NULL AND a.job_id IS NULL"
            "          AND json_extract(j.request, '$.archiveFork') = 1))"
            " ORDER BY j.finished_at LIMIT ?",
            (now - RECONCILE_STALE_MS, now - RECONCILE_STALE_MS, MAX_RECONCILE_GENERATIONS, limit),
        ).fetchall()
        return [job_view(r) for r in rows]
