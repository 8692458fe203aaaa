"""The page's reads of the mail the core has no other use for: who wrote with whom lately,
what waits on an answer, and the recent conversations with their messages. Each runs a fixed
number of SQL statements however much mail there is (``tests/test_web_lists.py``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from agent_link_core.conversation import MAX_MESSAGES, roots_of
from agent_link_core.mailbox import Mailbox, Visibility


def recent_correspondents(mailbox: Mailbox, scan: int, visibility: Visibility) -> list[sqlite3.Row]:
    """``(address, at)`` rows of the senders and recipients of the newest ``scan`` sends
    ``visibility`` may see, each with its latest ``sent_at`` (epoch ms), newest first."""
    if visibility.everything:
        return mailbox.store.conn.execute(
            "SELECT address, MAX(sent_at) AS at FROM (SELECT from_addr AS address, sent_at FROM messages"
            " UNION ALL SELECT recipient, sent_at FROM messages ORDER BY sent_at DESC LIMIT ?) GROUP BY address"
            " ORDER BY at DESC",
            (scan,),
        ).fetchall()
    where, params = visibility.sql("messages")
    return mailbox.store.conn.execute(
        f"WITH recent AS (SELECT from_addr, recipient, sent_at FROM messages WHERE {where}"
        " ORDER BY sent_at DESC LIMIT ?) SELECT address, MAX(sent_at) AS at FROM (SELECT from_addr AS address,"
        " sent_at FROM recent UNION ALL SELECT recipient, sent_at FROM recent) GROUP BY address ORDER BY at DESC",
        [*params, scan],
    ).fetchall()


def open_expectations(mailbox: Mailbox, visibility: Visibility, limit: int) -> list[sqlite3.Row]:
    """Open reply/action mail (not fyi) that ``visibility`` may read, oldest first, at most
    ``limit`` rows: what every agent waits on."""
    # No index starts with ``open``: walk the recipients on (recipient, open, sent_at), one
    # seek each, so the cost follows the recipients and the open mail, not all mail stored.
    where, params = visibility.sql("m")
    return mailbox.store.conn.execute(
        "WITH RECURSIVE who(r) AS (SELECT (SELECT MIN(recipient) FROM messages)"
        " UNION ALL SELECT (SELECT MIN(recipient) FROM messages WHERE recipient > who.r) FROM who WHERE who.r IS NOT NULL)"
        " SELECT m.* FROM who JOIN messages m ON m.recipient = who.r AND m.open = 1"
        f" WHERE m.anticipation != 'fyi' AND {where} ORDER BY m.sent_at, m.id LIMIT ?",
        (*params, limit)).fetchall()


def conversation_ids(conn: sqlite3.Connection, root_ids: Sequence[str], limit: int = MAX_MESSAGES) -> dict[str, list[str]]:
    """The message ids of the conversations starting at each of ``root_ids``, each oldest first
    and at most ``limit + 1`` long (as :func:`agent_link_core.conversation.thread_rows`), in
    one query for them all."""
    if not root_ids:
        return {}
    found = conn.execute(
        "WITH RECURSIVE down(root, id) AS (SELECT value, value FROM json_each(?)"
        " UNION SELECT down.root, m.id FROM messages m JOIN down ON m.reply_to = down.id),"
        " ranked AS (SELECT down.root, m.id, ROW_NUMBER() OVER (PARTITION BY down.root ORDER BY m.sent_at, m.rowid) AS n"
        " FROM messages m JOIN down ON m.id = down.id)"
        " SELECT root, id FROM ranked WHERE n <= ? ORDER BY root, n",
        (json.dumps(list(root_ids)), limit + 1),
    ).fetchall()
    out: dict[str, list[str]] = {root: [] for root in root_ids}
    for root, message_id in found:
        out[root].append(message_id)
    return out


def recent_conversations(mailbox: Mailbox, visibility: Visibility, limit: int = 20, scan: int = 400) -> list[dict[str, Any]]:
    """The conversations among the ``scan`` newest visible messages, newest activity first.

    :returns: ``[{"rootId", "lastId", "lastAt" (epoch ms), "count" (messages among those
        scanned), "participants": [addresses]}]``.
    """
    where, params = visibility.sql("messages")
    rows = mailbox.store.conn.execute(
        f"SELECT id, from_addr, recipient, sent_at FROM messages WHERE {where} ORDER BY rowid DESC LIMIT ?",
        (*params, scan),
    ).fetchall()
    groups: dict[str, dict[str, Any]] = {}
    roots = roots_of(mailbox.store.conn, [r["id"] for r in rows])
    for r in rows:
        root = roots.get(r["id"], r["id"])
        group = groups.get(root)
        if group is None:
            if len(groups) >= limit:
                continue
            group = groups[root] = {"rootId": root, "lastId": r["id"], "lastAt": r["sent_at"], "count": 0, "participants": []}
        group["count"] += 1
        for address in (r["from_addr"], r["recipient"]):
            if address not in group["participants"]:
                group["participants"].append(address)
    return list(groups.values())
