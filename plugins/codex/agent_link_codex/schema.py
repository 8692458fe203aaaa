"""The Codex plugin's tables in the shared agent-link database (owner ``codex``).

* ``codex_endpoints``: app-servers registered by the user (the registry of
  :mod:`agent_link_codex.endpoints`), one row per canonical socket path or URL.
* ``codex_pushes``: one row per message ever pushed into a Codex thread. The primary key
  is the push claim: a second push of the same message cannot be claimed while the first
  one's outcome is open, so one message never starts two turns. States:

  - ``pushing``: claimed, the turn request is on its way;
  - ``confirmed``: the thread's userMessage item echoed the message id as ``clientId``;
  - ``failed``: the push verifiably did not land (rejected, or the thread shows no echo);
    only a row in this state can be claimed again;
  - ``unknown``: the answer was lost and the thread could not be checked; rechecked later,
    never resent blindly;
  - ``accepted`` (version 3): Codex answered the turn request but the echo has not come yet
    (the input waits behind a running tool call or model request); never resent, confirmed
    when the echo arrives.
* ``codex_launches`` (version 2): who launched a thread through ``launch_codex_thread``
  (``launchedBy`` for the override policy) and the model, effort and cwd it started with.
"""

from __future__ import annotations

from agent_link_core.store import Migration

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "codex",
        1,
        """
        CREATE TABLE codex_endpoints (
            id TEXT PRIMARY KEY,                 -- ep_<hex>, from the canonical target
            kind TEXT NOT NULL CHECK (kind IN ('unix', 'ws')),
            target TEXT NOT NULL UNIQUE,         -- canonical socket path or URL
            label TEXT,
            token_file TEXT,
            added_at INTEGER NOT NULL            -- epoch ms
        );
        CREATE TABLE codex_pushes (
            message_id TEXT PRIMARY KEY,
            thread_id TEXT NOT NULL,
            endpoint_id TEXT,
            state TEXT NOT NULL CHECK (state IN ('pushing', 'confirmed', 'failed', 'unknown')),
            action TEXT,                         -- started_turn, steered_active_turn, ...
            turn_id TEXT,
            item_id TEXT,
            owner_pid INTEGER NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 1,
            checks INTEGER NOT NULL DEFAULT 0,   -- unreadable rechecks of an unknown outcome
            error TEXT,
            claimed_at INTEGER NOT NULL,         -- epoch ms
            updated_at INTEGER NOT NULL
        );
        CREATE INDEX codex_pushes_open ON codex_pushes (state, updated_at);
        """,
    ),
    Migration(
        "codex",
        2,
        """
        CREATE TABLE codex_launches (
            thread_id TEXT PRIMARY KEY,
            launched_by TEXT NOT NULL,           -- the launcher's address (external when unknown)
            model TEXT,
            effort TEXT,
            cwd TEXT,
            launched_at INTEGER NOT NULL         -- epoch ms
        );
        """,
    ),
    Migration(
        "codex",
        3,
        # SQLite cannot change a CHECK constraint in place: rebuild codex_pushes with 'accepted'.
        """
        CREATE TABLE codex_pushes_v3 (
            message_id TEXT PRIMARY KEY,
            thread_id TEXT NOT NULL,
            endpoint_id TEXT,
            state TEXT NOT NULL CHECK (state IN ('pushing', 'confirmed', 'failed', 'unknown', 'accepted')),
            action TEXT,
            turn_id TEXT,
            item_id TEXT,
            owner_pid INTEGER NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 1,
            checks INTEGER NOT NULL DEFAULT 0,
            error TEXT,
            claimed_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL
        );
        INSERT INTO codex_pushes_v3 SELECT message_id, thread_id, endpoint_id, state, action, turn_id, item_id, owner_pid,
            attempts, checks, error, claimed_at, updated_at FROM codex_pushes;
        DROP TABLE codex_pushes;
        ALTER TABLE codex_pushes_v3 RENAME TO codex_pushes;
        CREATE INDEX codex_pushes_open ON codex_pushes (state, updated_at);
        """,
    ),
)
