"""The receipts plugin's settings and database schema, and its view of the App."""

from __future__ import annotations

from agent_link_core.lazy import Struct
from agent_link_core.config import Config, Setting
from agent_link_core.store import Migration, Store

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App

OWNER = "receipts"
LOG_SETTING = "AGENT_LINK_RECEIPT_LOG"
INFER_SETTING = "AGENT_LINK_INFER_RECEIPT_ORIGIN"

SETTINGS: tuple[Setting, ...] = (
    Setting(LOG_SETTING, "path", None, aliases=("CODEX_AGENT_LINK_RECEIPT_LOG", "CLAUDE_AGENT_LINK_RECEIPT_LOG"),
            doc="also append every receipt to this JSONL file (the database stays the record)"),
    Setting(INFER_SETTING, "flag", True, doc="fill a receipt's origin from the environment when the call gives none"),
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        OWNER,
        1,
        """
        CREATE TABLE receipts (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,  -- insertion order: newest first = seq DESC
            id TEXT NOT NULL UNIQUE,
            event_key TEXT UNIQUE,          -- one receipt per event that could be reported twice
            action TEXT NOT NULL,
            kind TEXT,
            host TEXT,
            message_id TEXT,
            target_address TEXT,
            target_id TEXT,                 -- the id part of target_address
            target_kind TEXT,               -- the harness of the target
            origin_thread_id TEXT,
            search_text TEXT NOT NULL,      -- case-folded haystack for the text query
            data TEXT NOT NULL              -- the receipt as JSON
        );
        -- Exact filters on many-valued columns are indexed with seq, so "newest first, up to
        -- the limit" reads only matching rows. Few-valued columns (action, kind, host,
        -- target_kind) are not: walking seq backwards finds their matches quickly anyway.
        CREATE INDEX receipts_by_message ON receipts (message_id, seq);
        CREATE INDEX receipts_by_target ON receipts (target_address, seq);
        CREATE INDEX receipts_by_target_id ON receipts (target_id, seq);
        CREATE INDEX receipts_by_origin ON receipts (origin_thread_id, seq);
        """,
    ),
    Migration(
        OWNER,
        2,
        """
        -- How far message_events have been checked for receipts a process without plugins
        -- (the hook fast path) could not write; see ledger.repair.
        CREATE TABLE receipts_repair (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            last_seq INTEGER NOT NULL
        );
        -- From the first event: receipts that exist already are recognised by their event key.
        INSERT INTO receipts_repair (id, last_seq) VALUES (1, 0);
        """,
    ),
    Migration(
        OWNER,
        3,
        """
        -- Listed in time order, not insertion order: a repaired receipt is inserted after newer ones.
        ALTER TABLE receipts ADD COLUMN created_at TEXT NOT NULL DEFAULT '';  -- the receipt's createdAt (ISO, ms, Z)
        UPDATE receipts SET created_at = coalesce(json_extract(data, '$.createdAt'), '');
        CREATE INDEX receipts_by_time ON receipts (created_at, seq);
        """,
    ),
)


class ReceiptsContext(Struct, frozen=True):
    """Where receipts are read and written.

    :param config: parsed settings (the core's and this plugin's), read at App creation.
    :param store: the App's connection to the state database.
    """

    config: Config
    store: Store


def from_app(app: App) -> ReceiptsContext:
    """The App's settings and store, as the receipts plugin uses them."""
    return ReceiptsContext(app.config, app.store)
