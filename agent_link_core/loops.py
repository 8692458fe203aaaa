"""The loop guard: what stops agents from messaging each other (or themselves) without end,
each message costing the recipient's model a request. Applied to every new message under the
write lock (:meth:`agent_link_core.sending.Outbox.send`); a retry under a used id is not new.

* to one's own address: ``invalid_arguments`` (path ``to``, rule ``self``);
* the same body, anticipation and reply-to from the same sender to the same recipient within
  ``AGENT_LINK_REPEAT_WINDOW_MS``: ``permission_denied`` (reason ``repeated_message``),
  unless the earlier one never reached its recipient: the send retries that one instead
  (:func:`waiting_repeat`);
* more than ``AGENT_LINK_PAIR_RATE`` messages between two addresses (both ways) within
  ``AGENT_LINK_PAIR_WINDOW_MS``: ``permission_denied`` (reason ``send_rate``).

A window or rate of 0 switches its rule off.
"""

from __future__ import annotations

from agent_link_core.errors import AgentLinkError, invalid_arguments

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from agent_link_core.config import Config
    from agent_link_core.store import Store


def same_recent(store: Store, config: Config, *, sender: str, recipient: str, body: str, anticipation: str,
                reply_to: str | None, now_ms: int) -> list[Any]:
    """The messages the same as this one for the repeat rule, sent within
    ``AGENT_LINK_REPEAT_WINDOW_MS`` of ``now_ms`` (epoch ms), newest first: rows of ``id,
    sent_at, to_addr, reply_by, first_delivered_at, metadata`` (empty when the window is 0)."""
    window_ms = int(config.get("AGENT_LINK_REPEAT_WINDOW_MS"))
    if not window_ms:
        return []
    return store.conn.execute(
        "SELECT id, sent_at, to_addr, reply_by, first_delivered_at, metadata FROM messages WHERE from_addr = ? AND sent_at >= ?"
        " AND recipient = ? AND body = ? AND anticipation = ? AND reply_to IS ? ORDER BY sent_at DESC",
        (sender, now_ms - window_ms, recipient, body, anticipation, reply_to),
    ).fetchall()


def waiting_repeat(same: list[Any], *, to: str, reply_by_ms: int | None, fingerprint: Any) -> str | None:
    """The id of the newest of ``same`` (:func:`same_recent`'s rows) that is identical to this
    message for the idempotency check (also ``to``, reply-by, ``fingerprint``: a dict or
    None) and was never delivered (the caller checks the push outcome), else None."""
    import json

    for row in same:
        if row["to_addr"] != to or row["reply_by"] != reply_by_ms or row["first_delivered_at"] is not None:
            continue
        try:
            stored = json.loads(row["metadata"] or "{}")
        except (ValueError, RecursionError):
            continue
        if isinstance(stored, dict) and (stored.get("fingerprint") or None) == (fingerprint or None):
            return str(row["id"])
    return None


def check_send(store: Store, config: Config, *, sender: str, recipient: str, same: list[Any], now_ms: int,
               known_sender: bool) -> None:
    """Refuse a new message that would start or feed a loop (the module's three rules).

    :param known_sender: False for an unidentified caller (``external``): no self rule.
    :param same: :func:`same_recent`'s rows (the repeat rule refuses when there is one).
    :param now_ms: the send's time, epoch ms.
    :raises AgentLinkError: ``invalid_arguments`` (path ``to``, rule ``self``);
        ``permission_denied`` with ``details.reason`` ``repeated_message`` or ``send_rate``,
        ``details.setting`` naming the variable that allows more.
    """
    if known_sender and sender == recipient:
        raise invalid_arguments(
            [{"path": "to", "rule": "self", "expected": "another agent's address"}],
            f"{recipient} is your own address: a message to yourself would only come back to you as new work.",
        )
    if same:
        earlier, window_ms = same[0], int(config.get("AGENT_LINK_REPEAT_WINDOW_MS"))
        ago_s = max(now_ms - earlier["sent_at"], 0) / 1000
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
        since = now_ms - rate_window_ms
        count = store.conn.execute(
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
