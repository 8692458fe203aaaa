"""The table ``agent-link import-legacy`` keeps (what it imported), apart from the importer.

Every process that opens the database applies the plugins' migrations; this module holds the
legacy table's alone so that opening the database does not import the importer
(:mod:`agent_link_legacy.engine`). Health's ``legacyState`` (:func:`agent_link_legacy.state.legacy_state`)
reads it.
"""

from __future__ import annotations

from agent_link_core.store import Migration

LEGACY_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "legacy",
        1,
        """
        CREATE TABLE legacy_imports (
            importer TEXT NOT NULL,
            path TEXT NOT NULL,             -- absolute path of the original's file
            size INTEGER NOT NULL,          -- bytes, when it was imported
            mtime_ns INTEGER NOT NULL,
            imported_at INTEGER NOT NULL,   -- epoch ms
            counts TEXT NOT NULL,           -- JSON: the importer's counts of that run
            PRIMARY KEY (importer, path, size, mtime_ns)
        );
        """,
    ),
)
