"""The presence record ``agent-link mcp`` makes before its start-up front answers ``initialize``: a peer told of the
address must find it served while the full server still loads. Declared in the entry-point group
``agent_link_mcp_start`` (:func:`agent_link_core.discovery.mcp_start`); imports the core's configuration and address
rules only, never the store or the plugins."""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from agent_link_core.store import Store

#: the upsert every record uses: a pid, once recorded, is kept until another process serves the address
UPSERT = ("INSERT INTO presence (address, first_seen, last_seen, pid, source) VALUES (?, ?, ?, ?, ?)"
          " ON CONFLICT (address) DO UPDATE SET last_seen = excluded.last_seen,"
          " pid = COALESCE(excluded.pid, pid), source = CASE WHEN excluded.pid IS NULL THEN source ELSE excluded.source END")
START_BUSY_MS = 200  # the start-up record's wait for another writer, before it leaves it to the server
# (address, its row before or None) that record_at_start wrote in this process
_started: tuple[str, tuple[Any, ...] | None] | None = None


def record_at_start(env: Mapping[str, str] | None = None) -> None:
    """Note that this ``agent-link mcp`` serves its ``AGENT_LINK_ADDRESS`` before its start-up front answers ``initialize``
    (a peer told of it must find it served). Creates nothing: a missing database or table, a bad setting or any error
    leaves it to the full server, which records it again (:func:`agent_link_presence.plugin.agent_link_server_tasks`)."""
    try:
        from agent_link_core.addresses import is_address
        from agent_link_core.config import load_config

        config = load_config(env)
        address = config.get("AGENT_LINK_ADDRESS")
        if not address or not is_address(address) or not os.path.isfile(config.db_path):
            return
        import sqlite3
        import time

        conn = sqlite3.connect(config.db_path, timeout=START_BUSY_MS / 1000, isolation_level=None)
        try:
            if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'presence'").fetchone():
                conn.execute("BEGIN IMMEDIATE")
                before = conn.execute("SELECT last_seen, pid, source FROM presence WHERE address = ?", (address,)).fetchone()
                now = time.time_ns() // 1_000_000
                conn.execute(UPSERT, (address, now, now, os.getpid(), "mcp"))
                conn.execute("COMMIT")
                global _started
                _started = (address, tuple(before) if before is not None else None)
        finally:
            conn.close()
    except Exception as exc:  # the full server records it anyway; starting must not fail for this
        import logging

        logging.getLogger(__name__).debug("presence not recorded at start: %s", exc)


def undo_start_record(store: Store) -> None:
    """Take back what :func:`record_at_start` noted in this process (the full server found it serves a harness's session,
    not the configured address). :raises AgentLinkError: as ``store.write()`` does (busy, damaged)."""
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
