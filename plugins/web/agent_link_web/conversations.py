"""The page's lists of conversations: the newest ones and their messages' ids, in a fixed
number of SQL statements however many there are (issue 32; ``plugins/web/tests/test_web_lists.py``).
Built on the core's conversation walk (:mod:`agent_link_core.conversation`): a conversation is
the tree of messages joined by ``reply_to``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from agent_link_core.conversation import MAX_MESSAGES, roots_of
from agent_link_core.mailbox import Mailbox, Visibility


def conversation_ids(conn: sqlite3.Connection, root_ids: Sequence[str], limit: int = MAX_MESSAGES) -> dict[str, list[str]]:
    """The message ids of the conversations starting at each of ``root_ids``, each oldest first
    and at most ``limit + 1`` long (as :func:`agent_link_core.conversation.thread_rows` gives
    one), in one query for them all: what a list of conversations asks instead of one walk per
    conversation."""
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
    """The conversations with the newest activity, newest first (for overviews).

    Looks at the ``scan`` newest visible messages and groups them by conversation.

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
