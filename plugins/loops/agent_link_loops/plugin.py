"""Entry point of the agent-link loops plugin: the loop guard, what stops agents from messaging
each other (or themselves) without end, each message costing the recipient's model a request.
Applied to every new message by ``agent_link_before_store``, inside the write transaction that
stores it, so what concurrent sends stored counts too; a retry under a used id is not new.

* to one's own address: ``invalid_arguments`` (path ``to``, rule ``self``);
* the same body, anticipation and reply-to from the same sender to the same recipient within
  ``AGENT_LINK_REPEAT_WINDOW_MS``: ``permission_denied`` (reason ``repeated_message``),
  unless the earlier one never reached its recipient: the send retries that one instead
  (:func:`waiting_repeat`);
* more than ``AGENT_LINK_PAIR_RATE`` messages between two addresses (both ways) within
  ``AGENT_LINK_PAIR_WINDOW_MS``: ``permission_denied`` (reason ``send_rate``).

A window or rate of 0 switches its rule off. Every send imports this module: it imports only
the standard library and core modules a send has loaded already.
"""

from __future__ import annotations

from agent_link_core import hookimpl
from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.store import now_ms

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable
    from typing import Any

    from agent_link_core.app import App
    from agent_link_core.config import Config, Setting
    from agent_link_core.records import OutgoingMessage, SendContext


@hookimpl
def agent_link_register_settings(register: Callable[[Setting], None]) -> None:
    from agent_link_core.config import Setting
    from agent_link_loops import AGENT_LINK_SETTINGS

    for spec in AGENT_LINK_SETTINGS[__name__]:
        register(Setting(**spec))


@hookimpl
def agent_link_before_store(message: OutgoingMessage, context: SendContext, conn: sqlite3.Connection, app: App) -> str | None:
    """Apply the rules to a new message (raising to refuse); the id of a queued message it
    repeats (the send retries that one), else None."""
    at = now_ms()
    same = same_recent(conn, app.config, message, at)
    if same and not context.chosen_id:
        repeat = waiting_repeat(same, message)
        if repeat is not None and app.mailbox.push_outcome(repeat) == "queued":
            return repeat
    check_send(conn, app.config, message, same, at)
    return None


def same_recent(conn: sqlite3.Connection, config: Config, message: OutgoingMessage, now: int) -> list[Any]:
    """The messages the same as ``message`` for the repeat rule (sender, recipient, body,
    anticipation, reply-to), sent within ``AGENT_LINK_REPEAT_WINDOW_MS`` of ``now`` (epoch ms),
    newest first: rows of ``id, sent_at, to_addr, reply_by, first_delivered_at, metadata``
    (empty when the window is 0)."""
    window_ms = int(config.get("AGENT_LINK_REPEAT_WINDOW_MS"))
    if not window_ms:
        return []
    return conn.execute(
        "SELECT id, sent_at, to_addr, reply_by, first_delivered_at, metadata FROM messages WHERE from_addr = ? AND sent_at >= ?"
        " AND recipient = ? AND body = ? AND anticipation = ? AND reply_to IS ? ORDER BY sent_at DESC",
        (message.sender.address, now - window_ms, message.recipient, message.body, message.anticipation, message.reply_to),
    ).fetchall()


def waiting_repeat(same: list[Any], message: OutgoingMessage) -> str | None:
    """The id of the newest of ``same`` (:func:`same_recent`'s rows) that is identical to
    ``message`` for the idempotency check (also ``to``, reply-by, ``metadata["fingerprint"]``)
    and was never delivered (the caller checks the push outcome), else None."""
    import json

    fingerprint = message.metadata.get("fingerprint") or None
    for row in same:
        if row["to_addr"] != message.to or row["reply_by"] != message.reply_by_ms or row["first_delivered_at"] is not None:
            continue
        try:
            stored = json.loads(row["metadata"] or "{}")
        except (ValueError, RecursionError):
            continue
        if isinstance(stored, dict) and (stored.get("fingerprint") or None) == fingerprint:
            return str(row["id"])
    return None


def check_send(conn: sqlite3.Connection, config: Config, message: OutgoingMessage, same: list[Any], now: int) -> None:
    """Refuse a new message that would start or feed a loop (the module's three rules).

    :param same: :func:`same_recent`'s rows (the repeat rule refuses when there is one).
    :param now: the send's time, epoch ms.
    :raises AgentLinkError: ``invalid_arguments`` (path ``to``, rule ``self``; not for an
        unidentified caller, ``external``); ``permission_denied`` with ``details.reason``
        ``repeated_message`` or ``send_rate``, ``details.setting`` naming the variable that
        allows more.
    """
    sender, recipient = message.sender.address, message.recipient
    if message.sender.known and sender == recipient:
        raise invalid_arguments(
            [{"path": "to", "rule": "self", "expected": "another agent's address"}],
            f"{recipient} is your own address: a message to yourself would only come back to you as new work.",
        )
    if same:
        earlier, window_ms = same[0], int(config.get("AGENT_LINK_REPEAT_WINDOW_MS"))
        ago_s = max(now - earlier["sent_at"], 0) / 1000
        raise AgentLinkError(
            "permission_denied",
            f"You sent {recipient} this same message {ago_s:.1f} s ago ({earlier['id']}); repeating it looks like a "
            f"loop of agents answering each other, so it was not sent.",
            {"reason": "repeated_message", "setting": "AGENT_LINK_REPEAT_WINDOW_MS", "windowMs": window_ms,
             "earlierMessageId": earlier["id"]},
            hint=f"Nothing more needs saying if it only acknowledges. To repeat it on purpose, wait {window_ms // 1000} s or "
                 "change the words; AGENT_LINK_REPEAT_WINDOW_MS sets the window (0 allows repeats).",
        )
    limit = int(config.get("AGENT_LINK_PAIR_RATE"))
    if limit:
        rate_window_ms = int(config.get("AGENT_LINK_PAIR_WINDOW_MS"))
        since = now - rate_window_ms
        count = conn.execute(
            "SELECT (SELECT COUNT(*) FROM messages WHERE from_addr = ? AND sent_at >= ? AND recipient = ?)"
            " + (SELECT COUNT(*) FROM messages WHERE from_addr = ? AND sent_at >= ? AND recipient = ?)",
            (sender, since, recipient, recipient, since, sender),
        ).fetchone()[0]
        if count >= limit:
            raise AgentLinkError(
                "permission_denied",
                f"{count} messages went between {sender} and {recipient} in the last {rate_window_ms // 1000} s, the most "
                f"AGENT_LINK_PAIR_RATE allows; a runaway exchange costs the recipient's model a request per message, so this one was not sent.",
                {"reason": "send_rate", "setting": "AGENT_LINK_PAIR_RATE", "limit": limit, "windowMs": rate_window_ms,
                 "count": count},
                hint=f"Stop answering acknowledgements, or send again in {rate_window_ms // 1000} s; raise AGENT_LINK_PAIR_RATE "
                     "(0 switches the limit off) if such bursts are meant.",
            )
