"""The opencode plugin's table in the shared agent-link database (owner ``opencode``).

``opencode_pushes``: one row per message ever pushed into an opencode session; the primary key
is the push claim (:class:`agent_link_opencode.delivery.PushClaims`). States: ``pushing``
(claimed, the prompt is on its way), ``confirmed`` (delivered), ``accepted`` (stored in a busy
session, waiting for its next model request), ``failed`` (verifiably not sent; the only state
that can be claimed again), ``unknown`` (sent, never seen in the session; never resent blindly).
"""

from __future__ import annotations

from agent_link_core.store import Migration

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "opencode",
        1,
        """
        CREATE TABLE opencode_pushes (
            message_id TEXT PRIMARY KEY,        -- the agent-link message id (one push claim each)
            session_id TEXT NOT NULL,
            server TEXT NOT NULL,               -- base URL of the server pushed to
            state TEXT NOT NULL CHECK (state IN ('pushing', 'confirmed', 'accepted', 'failed', 'unknown')),
            user_message_id TEXT,               -- opencode's id of the user message holding the envelope
            owner_pid INTEGER NOT NULL,
            error TEXT,
            claimed_at INTEGER NOT NULL,        -- epoch ms
            updated_at INTEGER NOT NULL
        );
        """,
    ),
)
