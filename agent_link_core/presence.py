"""Presence of plain addresses (``AGENT_LINK_ADDRESS``, which no harness lists): which ones a process has served (an
``agent-link mcp`` with its pid, an inbox read) and when. A send to an address nobody ever served is flagged with the
closest known ones (a typo's fix), and the live ones are listed as sessions, so two MCP clients without a host plugin
can find each other."""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping

from agent_link_core.lazy import LazyLogger
from agent_link_core.addresses import address_scheme, is_address
from agent_link_core.model import Session
from agent_link_core.store import Migration, Store, now_ms

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PRESENCE_MIGRATIONS = (
    Migration("presence", 1, """
        CREATE TABLE presence (
            address TEXT PRIMARY KEY,
            first_seen INTEGER NOT NULL,    -- epoch ms
            last_seen INTEGER NOT NULL,     -- epoch ms
            pid INTEGER,                    -- the serving process (an MCP server), else NULL
            source TEXT NOT NULL            -- mcp | inbox
        );
        """),
)
_UPSERT = ("INSERT INTO presence (address, first_seen, last_seen, pid, source) VALUES (?, ?, ?, ?, ?)"
           " ON CONFLICT (address) DO UPDATE SET last_seen = excluded.last_seen,"
           " pid = COALESCE(excluded.pid, pid), source = CASE WHEN excluded.pid IS NULL THEN source ELSE excluded.source END")
START_BUSY_MS = 200  # the start-up record's wait for another writer, before it leaves it to the server
# (address, its row before or None) that record_at_start wrote in this process
_started: tuple[str, tuple[Any, ...] | None] | None = None
# An address read by a short-lived process (a CLI inbox read) counts as live this long.
RECENT_MS = 10 * 60_000
MAX_SUGGESTIONS = 3
log = LazyLogger(__name__)


def record(store: Store, address: str, source: str, pid: int | None = None) -> None:
    """Note that ``address`` was served just now by ``source`` (``mcp`` with the server's ``pid``, or ``inbox``). A pid,
    once recorded, is kept until another process serves the address, so a CLI read never hides a running server."""
    if not is_address(address):
        return
    now = now_ms()
    with store.write() as conn:
        conn.execute(_UPSERT, (address, now, now, pid, source))


def record_at_start(env: Mapping[str, str] | None = None) -> None:
    """Note that this ``agent-link mcp`` serves its ``AGENT_LINK_ADDRESS`` before its start-up front answers ``initialize``
    (a peer told of it must find it served). Standard library only; creates nothing: a missing database, a bad setting
    or any error leaves it to the full server, which records it again."""
    try:
        from agent_link_core.config import load_config

        config = load_config(env)
        address = config.get("AGENT_LINK_ADDRESS")
        if not address or not is_address(address) or not os.path.isfile(config.db_path):
            return
        import sqlite3

        conn = sqlite3.connect(config.db_path, timeout=START_BUSY_MS / 1000, isolation_level=None)
        try:
            if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'presence'").fetchone():
                conn.execute("BEGIN IMMEDIATE")
                before = conn.execute("SELECT last_seen, pid, source FROM presence WHERE address = ?", (address,)).fetchone()
                now = now_ms()
                conn.execute(_UPSERT, (address, now, now, os.getpid(), "mcp"))
                conn.execute("COMMIT")
                global _started
                _started = (address, tuple(before) if before is not None else None)
        finally:
            conn.close()
    except Exception as exc:  # the full server records it anyway; starting must not fail for this
        log.debug("presence not recorded at start: %s", exc)


def undo_start_record(store: Store) -> None:
    """Take back what :func:`record_at_start` noted in this process (the full server found it serves a harness's session,
    not the configured address)."""
    global _started
    if _started is None:
        return
    address, before = _started
    _started = None
    with store.write() as conn:
        if before is None:
            conn.execute("DELETE FROM presence WHERE address = ? AND pid = ?", (address, os.getpid()))
        else:
            conn.execute("UPDATE presence SET last_seen = ?, pid = ?, source = ? WHERE address = ? AND pid = ?",
                         (*before, address, os.getpid()))


def seen(store: Store, address: str) -> bool:
    """True when some process has ever served ``address``."""
    return store.conn.execute("SELECT 1 FROM presence WHERE address = ?", (address,)).fetchone() is not None


def live_sessions(store: Store, *, skip_schemes: set[str], only: str | None = None) -> list[Session]:
    """The live plain addresses as sessions: served by a running MCP server, or read within :data:`RECENT_MS`. Addresses of
    ``skip_schemes`` (harnesses that list their own sessions) are left out; ``only`` keeps one scheme ("all"/None: all)."""
    now = now_ms()
    out = []
    for row in store.conn.execute("SELECT * FROM presence ORDER BY last_seen DESC").fetchall():
        scheme = address_scheme(row["address"])
        if scheme in skip_schemes or scheme == "role" or only not in (None, "all", scheme):
            continue
        running = pid_alive(row["pid"] or 0)
        if not running and now - row["last_seen"] > RECENT_MS:
            continue
        out.append(Session(
            address=row["address"], harness=scheme, id=row["address"].split(":", 1)[1], surface=("address",),
            loaded=running, last_activity_ms=row["last_seen"],
            extra={"presence": {"source": row["source"], "running": running}},
        ))
    return out


def known_addresses(store: Store) -> list[str]:
    """Every address agent-link has seen: served ones, contacts, and mail participants."""
    conn = store.conn
    found = {r[0] for r in conn.execute("SELECT address FROM presence")}
    found |= {r[0] for r in conn.execute("SELECT address FROM contacts")}
    # one index seek per distinct sender (messages_from), not a scan of every message
    found |= {r[0] for r in conn.execute(
        "WITH RECURSIVE senders(a) AS (SELECT min(from_addr) FROM messages UNION ALL"
        " SELECT (SELECT min(from_addr) FROM messages WHERE from_addr > senders.a) FROM senders"
        " WHERE senders.a IS NOT NULL) SELECT a FROM senders WHERE a IS NOT NULL")}
    return sorted(a for a in found if is_address(a))


def reachable_addresses(store: Store, harnesses: Collection[str] = ()) -> list[str]:
    """The :func:`known_addresses` a send reaches: served ones, and those of a harness in ``harnesses`` (an address that
    only signed mail with ``--from`` is left out)."""
    served = {r[0] for r in store.conn.execute("SELECT address FROM presence")}
    return [a for a in known_addresses(store) if a in served or address_scheme(a) in harnesses]


def suggestions(store: Store, address: str, harnesses: Collection[str] = ()) -> list[str]:
    """Up to :data:`MAX_SUGGESTIONS` addresses a send reaches (:func:`reachable_addresses`) closest to ``address`` (a
    typo's fix). ``harnesses``: the installed harnesses' names (their sessions are reachable)."""
    pool = [a for a in reachable_addresses(store, harnesses) if a != address]
    if not pool:  # difflib left unimported
        return []
    import difflib

    scheme, _, ident = address.partition(":")
    # ids compared within the harness: a shared "team:" made "team:erin" look close to "team:frank"
    same = {a.partition(":")[2]: a for a in pool if a.partition(":")[0] == scheme}
    close = [same[i] for i in difflib.get_close_matches(ident, list(same), n=MAX_SUGGESTIONS, cutoff=0.6)]
    if not close:  # a wrong harness with the right id ("tema:bob") still finds "team:bob"
        close = [a for a in pool if a.partition(":")[2] == ident][:MAX_SUGGESTIONS]
    if not close:  # no harness typed apart ("teambob")
        close = difflib.get_close_matches(address, [a for a in pool if a.partition(":")[0] != scheme], n=MAX_SUGGESTIONS, cutoff=0.6)
    return close


def unseen_warning(store: Store, address: str, harnesses: Collection[str] = ()) -> dict[str, Any]:
    """The warning a send to a never-served plain address carries (code ``unknown_address``), with :func:`suggestions`
    (``harnesses``: the installed harness names)."""
    close = suggestions(store, address, harnesses=harnesses)
    message = f"No process has ever served {address}; the message waits until one reads that address."
    if close:
        message += f" Did you mean {' or '.join(close)}?"
    return {"code": "unknown_address", "message": message, "details": {"address": address, "suggestions": close}}


def pid_alive(pid: int) -> bool:
    """True when ``pid`` runs: a zombie does not, a process of another user does, a pid of 0 or below never does. The one
    copy of this check (host plugins reach it through plugins/hostkit); psutil is imported here, off the hook fast path."""
    import psutil

    try:
        return pid > 0 and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.AccessDenied:
        return True
    except psutil.Error:
        return False
