"""The ``presence`` table: which plain addresses a process served and when, the live ones as sessions, and the addresses
a send to a never-served one is pointed to (a typo's fix)."""

from __future__ import annotations

from collections.abc import Collection

from agent_link_core.addresses import address_scheme, is_address
from agent_link_core.model import Session
from agent_link_core.store import Migration, Store, now_ms

from agent_link_presence import RECENT_MS, pid_alive
from agent_link_presence.startup import UPSERT

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from typing import Any

#: the table, under the id it had when it was the core's (existing databases keep it)
MIGRATIONS = (
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
MAX_SUGGESTIONS = 3


def record(store: Store, address: str, source: str, pid: int | None = None) -> None:
    """Note that ``address`` was served just now by ``source`` (``mcp`` with the server's ``pid``, or ``inbox``). A pid,
    once recorded, is kept until another process serves the address, so a CLI read never hides a running server.

    :raises AgentLinkError: as ``store.write()`` does (busy, damaged, read-only)."""
    if not is_address(address):
        return
    now = now_ms()
    with store.write() as conn:
        conn.execute(UPSERT, (address, now, now, pid, source))


def seen(store: Store, address: str) -> bool:
    """True when some process has ever served ``address``."""
    return served_row(store.conn, address) is not None


def _read(conn: sqlite3.Connection, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
    """The rows of a read of the table; none where the database has no table (this plugin disabled or not loaded on a
    database it never opened: the plugins reading it through here then see no address served)."""
    import sqlite3

    try:
        return conn.execute(sql, args).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise


def served_row(conn: sqlite3.Connection, address: str) -> tuple[int, int | None] | None:
    """``(last served, epoch ms; the serving pid or None)`` of ``address``, read through ``conn`` (inside a write
    transaction too), or None when no process ever served it (or the table is missing)."""
    rows = _read(conn, "SELECT last_seen, pid FROM presence WHERE address = ?", (address,))
    return (int(rows[0][0]), rows[0][1]) if rows else None


def served_addresses(conn: sqlite3.Connection, limit: int = 1_000_000) -> list[str]:
    """Every address a process served, the most recently served first, at most ``limit`` (none when the table is missing)."""
    return [r[0] for r in _read(conn, "SELECT address FROM presence ORDER BY last_seen DESC LIMIT ?", (limit,))]


def live_sessions(store: Store, *, skip_schemes: Collection[str], only: str | None = None) -> list[Session]:
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
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'contacts'").fetchone():  # the listings plugin's
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
    typo's fix; a bare id such as ``teambob`` too). ``harnesses``: the installed harnesses' names (their sessions are
    reachable)."""
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
