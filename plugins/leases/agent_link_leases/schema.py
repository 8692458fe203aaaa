"""The ``leases`` table's migrations and the plugin's setting names: what the entry module
(:mod:`agent_link_leases.plugin`) registers, apart from the table's code
(:mod:`agent_link_leases.table`) so that registering the plugin imports none of it."""

from __future__ import annotations

from agent_link_core.store import Migration

OWNER = "leases"
TTL_SETTING = "AGENT_LINK_LEASE_TTL_MS"
ADMIN_SETTING = "AGENT_LINK_LEASE_ADMIN"
DEFAULT_TTL_MS = 60 * 60_000
MAX_TTL_MS = 7 * 24 * 60 * 60_000
#: the longest reason (characters) a lease may carry: shown in every conflict and listing
MAX_REASON_CHARS = 1000

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        OWNER,
        1,
        """
        CREATE TABLE leases (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            holder TEXT NOT NULL,           -- the address that claimed it
            root TEXT NOT NULL,             -- the project root, resolved (realpath)
            pattern TEXT NOT NULL,          -- normalised, relative to root (patterns.normalise)
            pattern_key TEXT NOT NULL,      -- pattern as compared (case folded when fold)
            fold INTEGER NOT NULL,          -- root's file system ignores case
            below INTEGER NOT NULL,         -- also covers what is below it
            anchor TEXT NOT NULL,           -- the literal names before the first wildcard, "/"-joined
                                            -- (folded when fold): only leases whose anchors are
                                            -- prefixes of one another can overlap (see anchor())
            exclusive INTEGER NOT NULL,
            reason TEXT,
            created_at INTEGER NOT NULL,    -- epoch ms of the first claim
            expires_at INTEGER NOT NULL,    -- epoch ms
            UNIQUE (holder, root, pattern_key)
        );
        CREATE INDEX leases_by_anchor ON leases (root, anchor);
        CREATE INDEX leases_by_holder ON leases (holder, expires_at);
        """,
    ),
    Migration(
        OWNER,
        2,
        """
        -- a message id: the lease ends when that message is resolved (a project worker's task)
        ALTER TABLE leases ADD COLUMN until_resolved TEXT;
        CREATE INDEX leases_by_task ON leases (until_resolved) WHERE until_resolved IS NOT NULL;
        """,
    ),
    Migration(
        OWNER,
        3,
        """
        -- what another plugin claimed it for (role:<name>, a worker's task message id): a claim
        -- under the same key replaces it, agent_link_release_claims ends it
        ALTER TABLE leases ADD COLUMN claim_key TEXT;
        CREATE INDEX leases_by_key ON leases (claim_key) WHERE claim_key IS NOT NULL;
        """,
    ),
)
