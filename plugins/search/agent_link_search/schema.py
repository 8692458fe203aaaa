"""The tables the search plugin owns (owner ``search``), apart from the search code so that
opening the database does not import it.

* ``message_fts``: an FTS5 *external-content* index over the core's ``messages`` (columns
  ``body``, ``from_addr``, ``to_addr``, ``recipient``; its rowid is the message's rowid).
  Triggers on ``messages`` keep it in step inside the transaction that changes the row, in
  every process (the triggers live in the database file, so a process that does not load this
  plugin still indexes what it stores). Migration 1 rebuilds it, so a database created before
  the plugin was installed is indexed when it is first opened with it.
* ``session_titles``: the titles sessions were last listed with
  (:func:`agent_link_search.index.note_session_titles`).

The migration's owner and number are those the core used when search was part of it, so a
database the core indexed is not indexed again.
"""

from __future__ import annotations

from agent_link_core.store import Migration

SEARCH_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "search",
        1,
        """
        CREATE VIRTUAL TABLE message_fts USING fts5(
            body, from_addr, to_addr, recipient,
            content = 'messages', content_rowid = 'rowid', columnsize = 0,
            tokenize = 'unicode61 remove_diacritics 2'
        );
        INSERT INTO message_fts (message_fts, rank) VALUES ('automerge', 16);
        CREATE TRIGGER message_fts_insert AFTER INSERT ON messages BEGIN
            INSERT INTO message_fts (rowid, body, from_addr, to_addr, recipient)
            VALUES (new.rowid, new.body, new.from_addr, new.to_addr, new.recipient);
        END;
        CREATE TRIGGER message_fts_delete AFTER DELETE ON messages BEGIN
            INSERT INTO message_fts (message_fts, rowid, body, from_addr, to_addr, recipient)
            VALUES ('delete', old.rowid, old.body, old.from_addr, old.to_addr, old.recipient);
        END;
        CREATE TRIGGER message_fts_update AFTER UPDATE OF body, from_addr, to_addr, recipient ON messages BEGIN
            INSERT INTO message_fts (message_fts, rowid, body, from_addr, to_addr, recipient)
            VALUES ('delete', old.rowid, old.body, old.from_addr, old.to_addr, old.recipient);
            INSERT INTO message_fts (rowid, body, from_addr, to_addr, recipient)
            VALUES (new.rowid, new.body, new.from_addr, new.to_addr, new.recipient);
        END;
        INSERT INTO message_fts (message_fts) VALUES ('rebuild');
        CREATE VIRTUAL TABLE session_titles USING fts5(
            address UNINDEXED, title, seen_at UNINDEXED, tokenize = 'unicode61 remove_diacritics 2'
        );
        """,
    ),
)
