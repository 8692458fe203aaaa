"""The fork jobs' tables in the shared agent-link database (owner ``forks``).

* ``fork_jobs``: one row per job; ``status`` running → completed | failed | interrupted, or
  aborted when Codex refused the fork itself (the tool call reported the error). ``phase``
  says how far a running job got: ``created``, ``forked``, ``compacting``, ``starting`` (the
  task's ``turn/start`` may have been sent), ``turn_started``, ``finished``. The lease
  (``lease_owner``, ``lease_until`` epoch ms, ``lease_generation``) names the one process
  watching the job; a sweeper takes over an expired lease.
* ``fork_job_events``: what happened to a job, in order (``agent-link forks show``).
* ``fork_reconciles``: the one reconcile of a job (PRIMARY KEY ``job_id``), with its message
  id (UNIQUE) and body written before the message is stored, so whoever finishes a claim
  another process left stores the very same message; ``generation`` counts takeovers.
* ``fork_archives``: the one archive attempt of a job's fork (PRIMARY KEY ``job_id``).
"""

from __future__ import annotations

from agent_link_core.store import Migration

OWNER = "forks"

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        OWNER,
        1,
        """
        CREATE TABLE fork_jobs (
            id TEXT PRIMARY KEY,                -- ULID; the task turn's clientUserMessageId
            original_thread TEXT NOT NULL,
            created_by TEXT NOT NULL,           -- the caller's address: the reconcile's sender
            caller_source TEXT NOT NULL,
            created_at INTEGER NOT NULL,        -- epoch ms
            updated_at INTEGER NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'interrupted', 'aborted')),
            phase TEXT NOT NULL,
            request TEXT NOT NULL,              -- JSON: the tool's settings for the fork and the task
            last_turn_id TEXT,
            fork_thread TEXT UNIQUE,
            fork TEXT,                          -- JSON: {model, effort, cwd, forkedFromId, threadSource}
            compaction TEXT,                    -- JSON: the compaction decision and its outcome
            task_turn_id TEXT,
            result TEXT,                        -- JSON: {error, output, tokenUsage}
            lease_owner TEXT,
            lease_until INTEGER NOT NULL DEFAULT 0,
            lease_generation INTEGER NOT NULL DEFAULT 0,
            finished_at INTEGER
        );
        CREATE INDEX fork_jobs_status ON fork_jobs (status, lease_until);
        CREATE INDEX fork_jobs_created ON fork_jobs (created_at);
        CREATE TABLE fork_job_events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            job_id TEXT NOT NULL REFERENCES fork_jobs (id),
            kind TEXT NOT NULL,
            at INTEGER NOT NULL,
            data TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX fork_job_events_job ON fork_job_events (job_id, seq);
        CREATE TABLE fork_reconciles (
            job_id TEXT PRIMARY KEY REFERENCES fork_jobs (id),
            message_id TEXT NOT NULL UNIQUE,
            status TEXT NOT NULL,               -- the job's outcome the reconcile reports
            body TEXT NOT NULL,
            claimed_by TEXT NOT NULL,
            claimed_at INTEGER NOT NULL,
            generation INTEGER NOT NULL DEFAULT 1,
            stored_at INTEGER,
            delivered_via TEXT
        );
        CREATE TABLE fork_archives (
            job_id TEXT PRIMARY KEY REFERENCES fork_jobs (id),
            fork_thread TEXT NOT NULL UNIQUE,
            state TEXT NOT NULL,                -- archiving | archived | kept | failed
            at INTEGER NOT NULL,
            detail TEXT
        );
        """,
    ),
)
