"""The SQLite state database shared by every process in WAL mode: connection, permissions, one short ``BEGIN IMMEDIATE``
transaction per change, :class:`Migration` records applied once each, and the refusals that keep acknowledged mail
(docs/storage.md, "The database file" and "WAL size"). Light standard modules only: the hook fast path uses it.
"""

from __future__ import annotations

import contextlib
import errno as errno_mod
import os
import sqlite3
import time

from agent_link_core import wake
from agent_link_core.errors import AgentLinkError
from agent_link_core.json_files import ensure_private_dir, read_json_object, state_io_error, write_json_object

TYPE_CHECKING = False  # no typing/pathlib/dataclasses at run time: the hook path imports this
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import Any

BUSY_TIMEOUT_MS = 10_000
WAL_LIMIT_BYTES = 64 * 1024 * 1024
SCHEMA_MIGRATIONS_SQL = (
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    " owner TEXT NOT NULL, version INTEGER NOT NULL, applied_at INTEGER NOT NULL,"
    " PRIMARY KEY (owner, version))"
)
# SQLite's primary result codes (https://www.sqlite.org/rescode.html)
SQLITE_BUSY, SQLITE_LOCKED, SQLITE_READONLY, SQLITE_IOERR, SQLITE_CORRUPT, SQLITE_FULL, SQLITE_CANTOPEN, SQLITE_NOTADB = 5, 6, 8, 10, 11, 13, 14, 26
STORAGE_FAILURES = frozenset({SQLITE_BUSY, SQLITE_LOCKED, SQLITE_READONLY, SQLITE_IOERR, SQLITE_CORRUPT, SQLITE_FULL, SQLITE_NOTADB})


class Migration:
    """One schema step of ``owner`` (a plugin name, ``core`` for the core): ``version`` 1, 2, ... applied in order, each once per
    database; ``sql``: ``;``-separated statements run in one transaction."""

    __slots__ = ("owner", "version", "sql")

    def __init__(self, owner: str, version: int, sql: str) -> None:
        self.owner, self.version, self.sql = owner, version, sql

    def __repr__(self) -> str:  # in a failed migration's traceback
        return f"Migration({self.owner!r}, {self.version!r})"


CORE_MIGRATIONS: tuple[Migration, ...] = (
    Migration("core", 1, """
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
        """),
    # (core 2 made the contacts table, now the listings plugin's: databases keep theirs)
    Migration("core", 3, """
        CREATE TABLE status_transitions (
            message_id TEXT NOT NULL REFERENCES messages (id),
            status TEXT NOT NULL,           -- unresolved | expired
            at INTEGER NOT NULL,
            PRIMARY KEY (message_id, status)
        );
        CREATE INDEX messages_to_open ON messages (to_addr, open);
        """),
    Migration("core", 4, """
        -- the reminder sweep's candidates: delivered, open reply/action mail
        CREATE INDEX messages_remindable ON messages (recipient)
            WHERE open = 1 AND delivered_at IS NOT NULL AND anticipation != 'fyi';
        """),
)


def now_ms() -> int:
    """Wall-clock time in epoch milliseconds."""
    return time.time_ns() // 1_000_000


def _result_code(exc: BaseException) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF  # extended codes carry the primary code in the low byte
    text = str(exc).lower()
    for needle, primary in (("locked", SQLITE_BUSY), ("malformed", SQLITE_CORRUPT), ("not a database", SQLITE_NOTADB),
                            ("disk is full", SQLITE_FULL), ("disk i/o", SQLITE_IOERR), ("readonly", SQLITE_READONLY)):
        if needle in text:
            return primary
    return None


def is_corruption(exc: BaseException) -> bool:
    """True when SQLite reported the file itself as damaged (not busy, not a full disk)."""
    return _result_code(exc) in (SQLITE_CORRUPT, SQLITE_NOTADB)


def busy_error(path: str, timeout_ms: int | None = None) -> AgentLinkError:
    """``state_busy``: another process held the write lock past the busy timeout (ms)."""
    waited = BUSY_TIMEOUT_MS if timeout_ms is None else timeout_ms
    held = f"held its write lock for more than {waited} ms" if waited > 0 else "holds its write lock"
    name = os.path.basename(path)
    return AgentLinkError("state_busy", f"The agent-link database {name} is busy: another agent-link process {held}. Nothing of this call was stored.",
                          {"path": name, "retryable": True, "retryAfterMs": 1000}, hint="Retry in a moment; the database is fine.")


def database_error(path: str, exc: sqlite3.Error | OSError, busy_timeout_ms: int | None = None) -> AgentLinkError:
    """The error for a failed database operation, by SQLite's (or the OS's) own verdict: ``state_busy`` for a lock timeout;
    ``state_io_error`` with ``details.reason`` ``disk_full``, ``corrupt`` (:func:`corrupt_error`), ``read_only`` or ``io_error``."""
    code = _result_code(exc)
    if isinstance(exc, OSError):
        code = SQLITE_FULL if exc.errno in (errno_mod.ENOSPC, errno_mod.EDQUOT) else SQLITE_IOERR
    if code in (SQLITE_BUSY, SQLITE_LOCKED):
        return busy_error(path, busy_timeout_ms)
    if code == SQLITE_FULL:
        return _io_error(path, "disk_full", "ENOSPC", f"The disk holding the agent-link database {path} is full; nothing of this call was stored.",
                         "Free disk space there, then retry; the database itself is fine.")
    if code in (SQLITE_CORRUPT, SQLITE_NOTADB):
        return corrupt_error(path, str(exc))
    if code == SQLITE_READONLY:
        return _io_error(path, "read_only", type(exc).__name__, f"The agent-link database {path} is read-only for this process ({exc}).",
                         "Give the user running agent-link write access to the file and its folder.")
    folder = os.path.dirname(path) or "."  # SQLite says "unable to open" where it cannot make its journal: said as what it is
    why = f"{exc}: its folder {folder} is not writable" if code == SQLITE_CANTOPEN and not os.access(folder, os.W_OK) else str(exc)
    return _io_error(path, "io_error", type(exc).__name__, f"The agent-link database {path} could not be used ({why}).",
                     "Check the disk and the file's permissions, then retry.")


def disk_full(path: str) -> AgentLinkError | None:
    """The ``disk_full`` refusal when the disk holding the database ``path`` has under 64 KiB free for this user (room
    for the ``-shm`` index, 32 KiB, and a few pages), else None (also when that cannot be told)."""
    try:
        fs = os.statvfs(os.path.dirname(os.path.abspath(path)))
    except OSError:
        return None
    full = fs.f_bavail * fs.f_frsize < 64 << 10
    return database_error(path, OSError(errno_mod.ENOSPC, os.strerror(errno_mod.ENOSPC))) if full else None


def _io_error(path: str, reason: str, errno: str, message: str, hint: str, **details: Any) -> AgentLinkError:
    return AgentLinkError("state_io_error", message, {"path": os.path.basename(path), "errno": errno, "reason": reason, **details}, hint=hint)


def corrupt_error(path: str, found: str) -> AgentLinkError:
    """``state_io_error`` (reason ``corrupt``); the hint gives the exact steps that rebuild the database."""
    return _io_error(path, "corrupt", "SQLITE_CORRUPT", f"SQLite reports the agent-link database {path} as damaged ({found}); writes are "
                     "refused so nothing more is lost, reads still work where they can.",
                     "Stop every agent-link process (close the agent sessions and hosts using it), then rebuild it with the "
                     f"sqlite3 shell (it replaces the file only with a rebuilt one that passes SQLite's check): {recovery_step(path)}; "
                     "start the sessions again.")


def recovery_step(path: str) -> str:
    """The POSIX shell commands rebuilding the damaged database ``path`` with the sqlite3 shell (docs/storage.md)."""
    import shlex

    db, sql, new, old = (shlex.quote(path + suffix) for suffix in ("", ".sql", ".recovered", ".damaged-copy"))
    # the damaged file's -wal and -shm go with it (a stale log would be replayed into the rebuilt file); an earlier copy stays
    return (f"(umask 077; rm -f {new}; {{ sqlite3 {db} .recover > {sql} || sqlite3 {db} .dump > {sql}; }}; "
            f"sed 's/^ROLLBACK; -- due to errors$/COMMIT;/' {sql} | sqlite3 {new}; "
            f"sqlite3 {new} 'PRAGMA integrity_check' | grep -qx ok && sqlite3 {new} 'SELECT count(*) FROM messages' && "
            f"{{ test ! -e {old} || {{ echo 'move the earlier {old} away first' >&2; false; }}; }} && mv {db} {old} && "
            f"for x in -wal -shm; do test ! -e {db}$x || mv {db}$x {old}$x; done && mv {new} {db})")


def not_ours_error(path: str, why: str) -> AgentLinkError:
    """``state_io_error`` (reason ``not_agent_link``): the path holds something else."""
    return _io_error(path, "not_agent_link", "EEXIST", f"{path} is not an agent-link database ({why}); agent-link leaves it untouched.",
                     "Point the database path at an agent-link database or at a path that does not exist yet.")


def record_damage(path: str, identity: tuple[int, int] | None, reason: str) -> None:
    """Write ``<path>.damaged`` naming the damaged file's ``identity`` ``(dev, inode)`` (None: the file at ``path``): all stop writing."""
    try:
        if identity is None:
            st = os.stat(path)
            identity = (st.st_dev, st.st_ino)
        write_json_object(path + ".damaged", {"dev": identity[0], "ino": identity[1], "reason": reason, "at": now_ms()})
    except (OSError, AgentLinkError):
        pass  # the refusal still reaches this caller; other processes find the damage themselves


class Store:
    """A connection to the state database for one process (or one thread) (docs/storage.md, "The database file").

    :param path: database file (folder made 0700, file 0600); an existing file must be an agent-link database (never chmodded otherwise).
    :param migrations: migrations to apply on open (the core's plus plugins').
    :param wal_limit_bytes: WAL size above which a write ends with a ``TRUNCATE`` checkpoint.
    :param busy_timeout_ms: how long a write waits for another process's write lock (default :data:`BUSY_TIMEOUT_MS`).
    :raises AgentLinkError: ``state_io_error`` (reasons ``not_agent_link``, ``orphan_wal`` ...); ``state_busy`` (a migration waited).
    """

    identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the file this connection opened
    _savepoints = 0
    #: the damage marker's stat figures and content when :meth:`damage` last read it
    _marker_read: tuple[tuple[int, ...], dict[str, Any]] | None = None
    #: why a store opened read-only refuses writes (set by the App), said instead of SQLite's words
    refusal: AgentLinkError | None = None

    def __init__(
        self, path: str | os.PathLike[str], migrations: Iterable[Migration] = CORE_MIGRATIONS,
        wal_limit_bytes: int = WAL_LIMIT_BYTES, busy_timeout_ms: int | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.busy_timeout_ms = BUSY_TIMEOUT_MS if busy_timeout_ms is None else busy_timeout_ms
        self.wal_limit_bytes = wal_limit_bytes
        ensure_private_dir(os.path.dirname(self.path) or ".")
        with self._opening():
            if not os.path.lexists(self.path):
                self._create()
            self._check_file()
            self.conn = sqlite3.connect(self.path, timeout=self.busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False)
            st = os.stat(self.path)
            self.identity = (st.st_dev, st.st_ino)
            self.conn.row_factory = sqlite3.Row
            self.conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
            self._check_ours()
            if (st.st_mode & 0o777) != 0o600:
                os.chmod(self.path, 0o600)  # ours: it may have been created by an older version
            self.conn.execute("PRAGMA journal_mode = WAL")
            self.conn.execute("PRAGMA synchronous = NORMAL")
            self.conn.execute("PRAGMA foreign_keys = ON")
            self.conn.execute(f"PRAGMA journal_size_limit = {self.wal_limit_bytes}")
            self.migrate(migrations)

    def _create(self) -> None:
        """Create the database under a temporary name, then link it into place: no process ever sees an empty or half-made file at the path."""
        for leftover in (self.path + "-wal", self.path + "-shm"):
            # the path checked again: a process starting at the same moment may have made the database since
            if os.path.exists(leftover) and os.path.getsize(leftover) > 0 and not os.path.lexists(self.path):
                raise _io_error(
                    self.path, "orphan_wal", "ENOENT", f"{leftover} exists but {os.path.basename(self.path)} does not: the database "
                    "was moved or deleted while agent-link processes had it open, and that WAL file still holds its newest mail.",
                    f"Put the database back at {self.path}. If it is gone and no agent-link process runs any more, "
                    f"keep a copy of {leftover} for recovery and delete it and {self.path}-shm.",
                )
        tmp = f"{self.path}.{os.getpid()}.{time.monotonic_ns()}.new"
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        try:
            os.fchmod(fd, 0o600)  # whatever the umask
            os.close(fd)
            with contextlib.closing(sqlite3.connect(tmp, isolation_level=None)) as conn:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute(SCHEMA_MIGRATIONS_SQL)
            try:
                os.link(tmp, self.path)  # fails if another process created it meanwhile: use theirs
            except FileExistsError:
                pass
            except OSError:  # a file system without hard links
                if not os.path.lexists(self.path):
                    os.rename(tmp, self.path)
        finally:
            for name in (tmp, tmp + "-wal", tmp + "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name)

    def _check_file(self) -> None:
        """Refuse a path that is not a regular, non-empty file by ``stat`` alone (opening it would drop this process's POSIX locks)."""
        if not os.path.isfile(self.path):
            raise not_ours_error(self.path, "it is a directory or a special file")
        if os.path.getsize(self.path) == 0:
            raise not_ours_error(self.path, "it is empty")

    def _check_ours(self) -> None:
        try:
            row = self.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").fetchone()
        except sqlite3.DatabaseError as exc:
            if _result_code(exc) != SQLITE_NOTADB:
                raise
            raise not_ours_error(self.path, "SQLite cannot read it as a database") from exc
        if row is None:
            raise not_ours_error(self.path, "an SQLite file without agent-link's tables")

    @contextlib.contextmanager
    def _opening(self) -> Iterator[None]:
        """On a failure to open: the connection closed, the store's own error raised."""
        try:
            yield
        except BaseException as exc:
            if getattr(self, "conn", None) is not None:
                self.conn.close()
            if isinstance(exc, sqlite3.Error):
                raise database_error(self.path, exc, self.busy_timeout_ms) from exc
            if isinstance(exc, OSError):
                raise state_io_error(self.path, exc) from exc
            raise

    @classmethod
    def open_read_only(cls, path: str | os.PathLike[str]) -> Store:
        """Open an existing database only to read it, changing nothing (:meth:`write` fails); without a ``-shm`` file it is read
        as it stands (``immutable``). ``state_io_error`` when the file is missing, unreadable or not an agent-link database."""
        from urllib.parse import quote

        store = cls.__new__(cls)
        store.path = os.fspath(path)
        store.busy_timeout_ms, store.wal_limit_bytes = BUSY_TIMEOUT_MS, WAL_LIMIT_BYTES
        uri = "file:" + quote(os.path.abspath(store.path))
        with store._opening():
            store._check_file()
            st = os.stat(store.path)
            for params in ("?mode=ro", "?mode=ro&immutable=1"):
                store.conn = sqlite3.connect(uri + params, uri=True, isolation_level=None, check_same_thread=False)
                try:
                    store._check_ours()
                    break
                except sqlite3.OperationalError:
                    store.conn.close()
                    if params.endswith("immutable=1"):
                        raise
            store.conn.row_factory = sqlite3.Row
            store.identity = (st.st_dev, st.st_ino)
        return store

    @classmethod
    def open_existing(cls, path: str | os.PathLike[str], *, busy_timeout_ms: int | None = None) -> Store | None:
        """Open the database only if it exists (the hook's fast path; ``busy_timeout_ms`` as for :class:`Store`); else ``None``."""
        if not os.path.exists(path):
            return None
        return cls(path, busy_timeout_ms=busy_timeout_ms)

    def close(self) -> None:
        """Close the connection, first saving what it still reads beside the path when the path no longer holds this file
        (:meth:`replaced`): the last close of a deleted file would take every acknowledged message with it."""
        if self.identity is not None:
            with contextlib.suppress(Exception):  # closing must not fail; the copy is the best effort left
                self.replaced()
        self.conn.close()

    @property
    def damage_marker(self) -> str:
        """The file recording that SQLite found this database damaged."""
        return self.path + ".damaged"

    def replaced(self) -> AgentLinkError | None:
        """The refusal when the path no longer holds the file this connection writes (deleted, moved, replaced); else None. One ``stat``."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            current = None
        except OSError as exc:
            return state_io_error(self.path, exc)
        else:
            current = (st.st_dev, st.st_ino)
        if current == self.identity:
            return None
        rescued = self._rescue()  # the file written until now is unlinked, moved or about to be
        saved = f" What this process could still read was saved to {rescued}." if rescued else ""
        return _io_error(
            self.path, "replaced", "ESTALE", f"The agent-link database {self.path} was {'deleted or moved away' if current is None else 'replaced'}"
            f" while this process had it open; nothing more is accepted, so nothing acknowledged is lost.{saved}",
            f"Put the original file back at {self.path} (processes continue where they stopped), or restart every "
            "agent-link process (MCP servers, hosts) to use the file now there.", **({"rescuedTo": rescued} if rescued else {}),
        )

    def _rescue(self) -> str | None:
        """Copy what this connection still reads to ``<db>.rescued-<inode>`` (0600), once per inode; None when it cannot."""
        assert self.identity is not None
        target = f"{self.path}.rescued-{self.identity[1]}"
        try:
            os.close(os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            with contextlib.closing(sqlite3.connect(target)) as dest:
                self.conn.backup(dest)
            return target
        except FileExistsError:
            return target
        except (OSError, sqlite3.Error):
            return None

    def damage(self) -> AgentLinkError | None:
        """The refusal recorded for this file by a process that found it damaged, else None."""
        try:  # asked before and after every write: one stat; the file is read again only when it changed
            st = os.stat(self.damage_marker)
            key: tuple[int, ...] = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        except OSError:
            if not os.path.lexists(self.damage_marker):
                return None
            key = ()  # unreadable: read again each time, and it names no file
        if self._marker_read is None or self._marker_read[0] != key or not key:
            self._marker_read = (key, read_json_object(self.damage_marker) or {})  # {}: not a marker record_damage wrote
        found = self._marker_read[1]
        if self.identity is not None and [found.get("dev"), found.get("ino")] != list(self.identity):
            return None  # left by a database that has since been rebuilt
        return corrupt_error(self.path, str(found.get("reason") or "recorded by another process"))

    def failure(self, exc: sqlite3.Error | OSError) -> AgentLinkError:
        """:func:`database_error` for ``exc``; corruption is also recorded (:func:`record_damage`), so every process stops writing."""
        if isinstance(exc, sqlite3.Error) and is_corruption(exc) and self.identity is not None:
            record_damage(self.path, self.identity, str(exc))
        return database_error(self.path, exc, self.busy_timeout_ms)

    def check_writable(self) -> None:
        """Raise the refusal when this file may not take writes now (opened read-only, replaced, damaged)."""
        problem = self.refusal or self.replaced() or self.damage()
        if problem is not None:
            raise problem

    def check_health(self) -> dict[str, Any]:
        """The database part of health: ``ok``, ``integrity`` (quick_check; a failure is recorded as damage), ``walBytes``,
        ``walLimitBytes``, and when not ok ``problem`` (the refusal's ``{code, message, details, hint}``)."""
        problem = self.replaced()
        try:  # SQLite's verdict: ok, or its first complaint
            verdict = str(self.conn.execute("PRAGMA quick_check(1)").fetchone()[0])
        except sqlite3.DatabaseError as exc:
            verdict = str(exc)
        if problem is None and verdict != "ok" and self.identity is not None:
            record_damage(self.path, self.identity, verdict)
        problem = problem or self.damage()
        out: dict[str, Any] = {"ok": problem is None, "integrity": verdict, "walBytes": self.wal_bytes(), "walLimitBytes": self.wal_limit_bytes}
        if problem is not None:
            out["problem"] = problem.to_dict()
        return out

    def wal_bytes(self) -> int:
        """The current size of the WAL file in bytes (0 when absent)."""
        try:
            return os.stat(self.path + "-wal").st_size
        except OSError:
            return 0

    @contextlib.contextmanager
    def write(self, *, wait: bool = True) -> Iterator[sqlite3.Connection]:
        """One short write transaction (``BEGIN IMMEDIATE``), rolled back on any error; inside another write of this connection, a
        savepoint of it (an observer writes in the transaction of the change it records).

        :param wait: False for a note a read makes on the way: ``state_busy`` at once while another process holds the write lock.
        :raises AgentLinkError: :meth:`check_writable`'s refusal; ``state_busy`` past the busy timeout; :func:`database_error`'s.
        """
        if self.conn.in_transaction:
            self._savepoints += 1
            name = f"agent_link_{self._savepoints}"
            self.conn.execute(f"SAVEPOINT {name}")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute(f"ROLLBACK TO {name}")
                self.conn.execute(f"RELEASE {name}")
                raise
            finally:
                self._savepoints -= 1
            self.conn.execute(f"RELEASE {name}")
            return
        self.check_writable()
        try:
            if not wait:
                self.conn.execute("PRAGMA busy_timeout = 0")
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            if not wait and _result_code(exc) in (SQLITE_BUSY, SQLITE_LOCKED):
                raise busy_error(self.path, 0) from exc
            raise self.failure(exc) from exc
        finally:
            if not wait:
                self.conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
        try:
            yield self.conn
            self.conn.execute("COMMIT")
            # replaced while we wrote: the change went to the old file (rescued beside the path), so it is not acknowledged
            self.check_writable()
        except BaseException as exc:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error) and _result_code(exc) in STORAGE_FAILURES:
                raise self.failure(exc) from exc
            raise
        wake.notify(self.path)  # waiters in other processes re-read now, not at their next poll
        if self.wal_bytes() > self.wal_limit_bytes:
            # TRUNCATE waits (busy timeout) for readers to leave old snapshots, then empties the WAL.
            with contextlib.suppress(sqlite3.OperationalError):
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def applied(self) -> set[tuple[str, int]]:
        """``(owner, version)`` of every migration this database has (a cheap read)."""
        self.conn.execute(SCHEMA_MIGRATIONS_SQL)
        return {(r[0], r[1]) for r in self.conn.execute("SELECT owner, version FROM schema_migrations")}

    def migrate(self, migrations: Iterable[Migration]) -> None:
        """Apply pending migrations, each once, in its own transaction; ``sqlite3.Error`` when one's SQL fails (nothing of it is kept)."""
        done = self.applied()
        for migration in sorted(migrations, key=lambda m: (m.owner != "core", m.owner, m.version)):
            if (migration.owner, migration.version) in done:
                continue
            with self.write() as conn:
                # Another process may have applied it while we waited for the write lock.
                if conn.execute("SELECT 1 FROM schema_migrations WHERE owner = ? AND version = ?", (migration.owner, migration.version)).fetchone():
                    continue
                for statement in _split_sql(migration.sql):
                    conn.execute(statement)
                conn.execute("INSERT INTO schema_migrations (owner, version, applied_at) VALUES (?, ?, ?)", (migration.owner, migration.version, now_ms()))


def _split_sql(script: str) -> list[str]:
    """A migration's statements (executescript would commit our transaction)."""
    statements, buf = [], ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            statements.append(buf.strip())
            buf = ""
    return [s for s in (*statements, buf.strip()) if s]
