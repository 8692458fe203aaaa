"""The SQLite state database: connection, permissions, transactions, migrations.

One database file (``<state dir>/agent-link.db`` unless ``AGENT_LINK_MAILBOX_PATH`` names
another) shared by every agent-link process: MCP servers, hooks, the CLI. WAL mode and a
busy timeout let many processes write at once; every change is one short ``BEGIN
IMMEDIATE`` transaction, and exactly-once side effects are UNIQUE constraints. The state
dir is created 0700 and the database 0600 (SQLite gives its -wal/-shm files the same mode).

Schema changes are :class:`Migration` records contributed through ``agent_link_schema``;
each ``(owner, version)`` applies once, in version order, recorded in
``schema_migrations``. The core's own migrations are contributed by
:mod:`agent_link_core.default_plugins` through the same hook.

Only light standard modules are imported: the hook fast path uses this module. Paths are
``str`` or ``os.PathLike``.
"""

from __future__ import annotations

import contextlib
import errno as errno_mod
import os
import sqlite3
import time

from agent_link_core.errors import AgentLinkError

TYPE_CHECKING = False  # no typing/pathlib/dataclasses at run time: the hook path imports this
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

BUSY_TIMEOUT_MS = 10_000


class Migration:
    """One schema step owned by a plugin.

    :param owner: plugin name (``core`` for the core); namespaces the version numbers.
    :param version: 1, 2, ... applied in order, each once per database.
    :param sql: one or more SQL statements, ``;``-separated, run in one transaction.
    """

    __slots__ = ("owner", "version", "sql")

    def __init__(self, owner: str, version: int, sql: str) -> None:
        self.owner, self.version, self.sql = owner, version, sql

    def __repr__(self) -> str:
        return f"Migration({self.owner!r}, {self.version!r})"


CORE_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "core",
        1,
        """
        CREATE TABLE messages (
            id TEXT PRIMARY KEY,
            from_addr TEXT NOT NULL,
            from_source TEXT NOT NULL,
            to_addr TEXT NOT NULL,          -- as addressed (may be indirect, e.g. role:x)
            recipient TEXT NOT NULL,        -- who receives it and may resolve it
            body TEXT NOT NULL,
            body_bytes INTEGER NOT NULL,
            content_hash TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}',
            sent_at INTEGER NOT NULL,       -- epoch ms
            anticipation TEXT NOT NULL CHECK (anticipation IN ('reply', 'action', 'fyi')),
            reply_by INTEGER,               -- epoch ms
            reply_to TEXT,                  -- the message this one answers
            delivered_at INTEGER,
            first_delivered_at INTEGER,
            delivered_via TEXT,
            acknowledged_at INTEGER,
            open INTEGER NOT NULL DEFAULT 1  -- undelivered, or reply/action not yet resolved
        );
        CREATE INDEX messages_recipient_open ON messages (recipient, open, sent_at);
        CREATE INDEX messages_from ON messages (from_addr, sent_at);
        CREATE INDEX messages_reply_to ON messages (reply_to);
        CREATE TABLE message_events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            message_id TEXT NOT NULL REFERENCES messages (id),
            kind TEXT NOT NULL,
            at INTEGER NOT NULL,
            actor TEXT,
            via TEXT,
            data TEXT
        );
        CREATE INDEX message_events_message ON message_events (message_id, seq);
        CREATE TABLE resolutions (
            message_id TEXT PRIMARY KEY REFERENCES messages (id),
            kind TEXT NOT NULL CHECK (kind IN ('reply', 'decline', 'done')),
            by_addr TEXT NOT NULL,
            at INTEGER NOT NULL,
            late INTEGER NOT NULL,
            reason TEXT,
            reply_message_id TEXT
        );
        CREATE TABLE reminders (
            message_id TEXT NOT NULL REFERENCES messages (id),
            n INTEGER NOT NULL,
            at INTEGER NOT NULL,
            via TEXT,
            to_addr TEXT,
            PRIMARY KEY (message_id, n)
        );
        CREATE TABLE nudge_blocks (
            recipient TEXT NOT NULL,
            bucket INTEGER NOT NULL,        -- floor(now / reminder interval)
            at INTEGER NOT NULL,
            PRIMARY KEY (recipient, bucket)
        );
        """,
    ),
    Migration(
        "core",
        2,
        """
        CREATE TABLE contacts (
            alias TEXT PRIMARY KEY,         -- trimmed, lower case
            address TEXT NOT NULL UNIQUE,   -- one alias per session
            project TEXT,
            label TEXT,
            last_seen INTEGER,              -- epoch ms
            created_at INTEGER NOT NULL
        );
        """,
    ),
    Migration(
        "core",
        3,
        """
        CREATE TABLE status_transitions (
            message_id TEXT NOT NULL REFERENCES messages (id),
            status TEXT NOT NULL,           -- unresolved | expired
            at INTEGER NOT NULL,
            PRIMARY KEY (message_id, status)
        );
        CREATE INDEX messages_to_open ON messages (to_addr, open);
        """,
    ),
    Migration(
        "core",
        4,
        """
        -- the reminder sweep's candidates: delivered, open reply/action mail
        CREATE INDEX messages_remindable ON messages (recipient)
            WHERE open = 1 AND delivered_at IS NOT NULL AND anticipation != 'fyi';
        """,
    ),
)


def now_ms() -> int:
    """Wall-clock time in epoch milliseconds."""
    return time.time_ns() // 1_000_000


def ensure_private_dir(path: str | os.PathLike[str]) -> None:
    """Create ``path`` (and parents) with mode 0700 when missing.

    An existing directory is left as it is: it may be shared on purpose (a home directory,
    ``/tmp``), and health reports a state dir others can read.

    :raises AgentLinkError: ``state_io_error`` when it cannot be created.
    """
    try:
        if os.path.isdir(path):
            return
        os.makedirs(path, mode=0o700, exist_ok=True)
        os.chmod(path, 0o700)  # whatever the umask
    except OSError as exc:
        raise state_io_error(path, exc) from exc


def state_io_error(path: str | os.PathLike[str], exc: OSError, state_dir: str | None = None) -> AgentLinkError:
    """An ``AgentLinkError(state_io_error)`` with ``path`` relative to the state dir."""
    shown = os.fspath(path)
    if state_dir is not None and shown.startswith(state_dir.rstrip("/") + "/"):
        shown = os.path.relpath(shown, state_dir)
    code = errno_mod.errorcode.get(exc.errno or 0, str(exc.errno)) if exc.errno else type(exc).__name__
    return AgentLinkError(
        "state_io_error",
        f"Could not use agent-link state at {shown}: {exc.strerror or exc}.",
        {"path": shown, "errno": code},
    )


def database_error(path: str, exc: sqlite3.DatabaseError) -> AgentLinkError:
    """``state_io_error`` for a damaged or unreadable database (SQLite ``DatabaseError``)."""
    return AgentLinkError(
        "state_io_error",
        f"The agent-link database {path} is damaged or unreadable ({exc}).",
        {"path": os.path.basename(path), "errno": type(exc).__name__},
        hint="Move the file aside (keep it for recovery) and retry; agent-link starts a new one.",
    )


def integrity(conn: sqlite3.Connection) -> str:
    """SQLite's ``quick_check`` verdict: ``ok``, or its first complaint."""
    try:
        return str(conn.execute("PRAGMA quick_check(1)").fetchone()[0])
    except sqlite3.DatabaseError as exc:
        return str(exc)


class Store:
    """A connection to the state database for one process (or one thread).

    :param path: database file; its directory is created 0700, the file 0600.
    :param migrations: migrations to apply on open (the core's plus plugins').
    :raises AgentLinkError: ``state_io_error`` when the file cannot be opened or migrated.
    """

    def __init__(self, path: str | os.PathLike[str], migrations: Iterable[Migration] = CORE_MIGRATIONS) -> None:
        self.path = os.fspath(path)
        ensure_private_dir(os.path.dirname(self.path) or ".")
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600)
            os.close(fd)
            if (os.stat(self.path).st_mode & 0o777) != 0o600:
                os.chmod(self.path, 0o600)
            self.conn = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
            )
            self.conn.row_factory = sqlite3.Row
            self.conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self.conn.execute("PRAGMA journal_mode = WAL")
            self.conn.execute("PRAGMA synchronous = NORMAL")
            self.conn.execute("PRAGMA foreign_keys = ON")
            self.migrate(migrations)
        except sqlite3.Error as exc:
            raise AgentLinkError(
                "state_io_error",
                f"The agent-link database at {self.path} could not be opened: {exc}.",
                {"path": os.path.basename(self.path), "errno": type(exc).__name__},
            ) from exc
        except OSError as exc:
            raise state_io_error(self.path, exc) from exc

    @classmethod
    def open_existing(cls, path: str | os.PathLike[str]) -> Store | None:
        """Open the database only if it exists (the hook's fast path); else ``None``."""
        if not os.path.exists(path):
            return None
        return cls(path)

    def close(self) -> None:
        """Close the connection (the database file stays)."""
        self.conn.close()

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One short write transaction (``BEGIN IMMEDIATE``); rolled back on any error."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def migrate(self, migrations: Iterable[Migration]) -> None:
        """Apply pending migrations, each in its own transaction, exactly once.

        :raises sqlite3.Error: when a migration's SQL fails (nothing of it is kept).
        """
        wanted = sorted(migrations, key=lambda m: (m.owner != "core", m.owner, m.version))
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " owner TEXT NOT NULL, version INTEGER NOT NULL, applied_at INTEGER NOT NULL,"
            " PRIMARY KEY (owner, version))"
        )
        done = {(r[0], r[1]) for r in self.conn.execute("SELECT owner, version FROM schema_migrations")}
        for migration in wanted:
            if (migration.owner, migration.version) in done:
                continue
            with self.write() as conn:
                # Another process may have applied it while we waited for the write lock.
                if conn.execute(
                    "SELECT 1 FROM schema_migrations WHERE owner = ? AND version = ?",
                    (migration.owner, migration.version),
                ).fetchone():
                    continue
                for statement in _split_sql(migration.sql):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations (owner, version, applied_at) VALUES (?, ?, ?)",
                    (migration.owner, migration.version, now_ms()),
                )


def _split_sql(script: str) -> list[str]:
    """Split a migration into statements (executescript would commit our transaction)."""
    statements, buf = [], ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                statements.append(buf.strip())
            buf = ""
    if buf.strip():
        statements.append(buf.strip())
    return statements
