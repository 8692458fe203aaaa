"""One path per message: mail that a running wait is about to return is not pushed as well.

A wait returns the message it waited for in its own result; a push of the same message to
the recipient's host (by another process) would give it to the agent twice. So every running
wait is noted in ``active_waits`` (who waits, for what, in which process), and a push in any
process first asks :func:`held`; a held message is left to the wait, which pushes it when it
ends without taking it (:meth:`agent_link_core.waits.Waits.wait`). Rows of dead processes are
ignored, and removed by the next wait of the same address.
"""

from __future__ import annotations

import contextlib
import os

from agent_link_core.store import Migration, now_ms

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from agent_link_core.store import Store

#: no wait runs longer than this (600 s asked for, plus its last poll and the push after it)
MAX_WAIT_MS = 660_000
#: the HELD event's kind: a push was left to a running wait
HELD_EVENT = "held_for_wait"

MIGRATIONS = (
    Migration("core.waits", 1, """
        CREATE TABLE active_waits (
            id INTEGER PRIMARY KEY,
            address TEXT NOT NULL,      -- who waits (the recipient of what it waits for)
            key TEXT NOT NULL,          -- reply:<message id> | from:<address>
            pid INTEGER NOT NULL,
            started_at INTEGER NOT NULL
        );
        CREATE INDEX active_waits_address ON active_waits (address, key);
        """),
)


def begin(store: Store, address: str, key: str) -> int | None:
    """Note a wait of ``address`` for ``key`` (``reply:<id>`` or ``from:<address>``) in this
    process; rows of the same address left by dead processes go.

    :returns: the row id for :func:`end`, or None when the database refused the write (the
        wait runs anyway; pushes elsewhere will not know of it).
    """
    from agent_link_core.errors import AgentLinkError

    try:
        with store.write(wait=False) as conn:
            for row in conn.execute("SELECT id, pid, started_at FROM active_waits WHERE address = ?", (address,)).fetchall():
                if not _live(row):
                    conn.execute("DELETE FROM active_waits WHERE id = ?", (row["id"],))
            cursor = conn.execute("INSERT INTO active_waits (address, key, pid, started_at) VALUES (?, ?, ?, ?)",
                                  (address, key, os.getpid(), now_ms()))
            return int(cursor.lastrowid or 0) or None
    except AgentLinkError:
        return None


def end(store: Store, wait_id: int | None) -> None:
    """Forget the wait :func:`begin` noted (a failed write leaves a row that dies with its process)."""
    from agent_link_core.errors import AgentLinkError

    if wait_id is not None:
        with contextlib.suppress(AgentLinkError), store.write() as conn:
            conn.execute("DELETE FROM active_waits WHERE id = ?", (wait_id,))


def any_live(store: Store, address: str) -> bool:
    """Whether a wait of ``address`` runs in some process (False when the table cannot be
    read): a read skips :func:`held` for each message when nobody waits."""
    import sqlite3

    try:
        found = store.conn.execute("SELECT pid, started_at FROM active_waits WHERE address = ?", (address,)).fetchall()
    except sqlite3.Error:
        return False
    return any(_live(w) for w in found)


def held(store: Store, row: Any) -> bool:
    """Whether a live wait of the message's recipient is about to return it: one waiting for
    the answer to the message it answers, or for any message from its sender."""
    keys = [f"from:{row['from_addr']}"] + ([f"reply:{row['reply_to']}"] if row["reply_to"] else [])
    found = store.conn.execute(
        f"SELECT pid, started_at FROM active_waits WHERE address = ? AND key IN ({', '.join('?' * len(keys))})",
        (row["recipient"], *keys),
    ).fetchall()
    return any(_live(w) for w in found)


def pid_alive(pid: int) -> bool:
    """True when ``pid`` runs: a zombie does not, a process of another user does, a pid of 0
    or below never does. The one copy of this check (host plugins reach it through
    plugins/hostkit); psutil is imported here, off the hook fast path."""
    import psutil

    try:
        return pid > 0 and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.AccessDenied:
        return True
    except psutil.Error:
        return False


def _live(wait: Any) -> bool:
    return now_ms() - int(wait["started_at"]) <= MAX_WAIT_MS and pid_alive(int(wait["pid"]))
