"""Conversations: the tree of messages joined by ``reply_to``, from its root (the message
that answers nothing), oldest first. A reader sees only the part its
:class:`~agent_link_core.mailbox.Visibility` allows, and is told how much is hidden.

Other plugins (the web page) may use :func:`conversation_of`, :func:`conversation`,
:func:`recent_conversations`, :func:`conversation_ids`, :func:`root_of` and :func:`roots_of`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agent_link_core.mailbox import Mailbox, Visibility, batches

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App
    from agent_link_core.model import Caller
    from agent_link_core.tools.registry import ToolCall

MAX_MESSAGES = 500
MAX_DEPTH = 1000


def root_of(conn: sqlite3.Connection, message_id: str) -> str:
    """The first message of the conversation ``message_id`` belongs to (itself when it
    answers nothing). A ``reply_to`` pointing at an unknown id ends the walk there."""
    return roots_of(conn, [message_id]).get(message_id, message_id)


def roots_of(conn: sqlite3.Connection, message_ids: list[str]) -> dict[str, str]:
    """:func:`root_of` of many messages: ``{message id: root id}`` for the ids that exist."""
    roots: dict[str, str] = {}
    for chunk, marks in batches(list(dict.fromkeys(message_ids))):
        for row in conn.execute(
            "WITH RECURSIVE up(start, id, reply_to, depth) AS ("
            f" SELECT id, id, reply_to, 0 FROM messages WHERE id IN ({marks})"
            " UNION SELECT up.start, m.id, m.reply_to, up.depth + 1 FROM messages m JOIN up ON m.id = up.reply_to"
            " WHERE up.depth < ?)"
            " SELECT start, id FROM (SELECT start, id, ROW_NUMBER() OVER (PARTITION BY start ORDER BY depth DESC) AS n"
            " FROM up) WHERE n = 1",
            (*chunk, MAX_DEPTH),
        ):
            roots[row[0]] = row[1]
    return roots


def thread_rows(conn: sqlite3.Connection, root_id: str, limit: int = MAX_MESSAGES) -> list[sqlite3.Row]:
    """Every message of the conversation starting at ``root_id``, oldest first (at most
    ``limit``; UNION makes a ``reply_to`` cycle end instead of looping)."""
    return conn.execute(
        "WITH RECURSIVE down(id) AS (SELECT ? UNION SELECT m.id FROM messages m JOIN down ON m.reply_to = down.id)"
        " SELECT m.* FROM messages m JOIN down ON m.id = down.id ORDER BY m.sent_at, m.rowid LIMIT ?",
        (root_id, limit + 1),
    ).fetchall()


def conversation_ids(conn: sqlite3.Connection, root_ids: Sequence[str], limit: int = MAX_MESSAGES) -> dict[str, list[str]]:
    """The message ids of the conversations starting at each of ``root_ids``, each oldest first
    and at most ``limit + 1`` long (as :func:`thread_rows`), in one query for them all."""
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


def conversation(mailbox: Mailbox, visibility: Visibility, message_id: str, *, envelopes: bool = True) -> dict[str, Any]:
    """The conversation of ``message_id`` as ``visibility`` may see it.

    :param envelopes: add each message's ``<agent-link-message>`` envelope (the only form in
        which a body reaches a model).
    :returns: ``{"messageId", "rootId", "messages": [message view (+ envelope)],
        "hiddenCount", "truncated"}``; views are :meth:`Mailbox.to_view` without the body.
    :raises AgentLinkError: ``invalid_arguments`` (not a ULID), ``not_found``,
        ``permission_denied`` (reason ``not_participant``) when the reader may not see
        ``message_id`` itself.
    """
    row = mailbox.require(message_id)
    visibility.require(row, f"the conversation of {row['id']}")
    root = root_of(mailbox.store.conn, row["id"])
    rows = thread_rows(mailbox.store.conn, root)
    truncated = len(rows) > MAX_MESSAGES
    rows = rows[:MAX_MESSAGES]
    shown = [r for r in rows if visibility.allows(r)]
    messages = mailbox.to_views(shown)
    for view in messages:
        view.pop("bodyBytes", None)
    if envelopes:
        for view, envelope in zip(messages, mailbox.envelopes(shown), strict=True):
            view["envelope"] = envelope
    return {"messageId": row["id"], "rootId": root, "messages": messages, "hiddenCount": len(rows) - len(shown),
            "truncated": truncated}


def conversation_of(app: App, caller: Caller, message_id: str) -> dict[str, Any]:
    """The conversation of a message the caller sent or received (any message with
    ``AGENT_LINK_INSPECT_ALL``), oldest first, each message with its envelope
    (:func:`conversation`'s answer).

    :raises AgentLinkError: ``not_found``, ``invalid_arguments``, ``permission_denied``.
    """
    visibility = app.mailbox.visible_to(caller.address, all_mail=bool(app.config.get("AGENT_LINK_INSPECT_ALL")))
    return conversation(app.mailbox, visibility, message_id)


async def handle(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """The ``get_agent_link_conversation`` tool's handler: :func:`conversation_of` the caller."""
    return conversation_of(app, call.caller, args["messageId"])


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
