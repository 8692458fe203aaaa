"""The loop guard: what stops two agents (or one agent and itself) from messaging each other
without end, each message costing the recipient's model another request.

Checked before a new message is stored (:meth:`agent_link_core.sending.Outbox.send`, so every tool,
command and plugin that sends gets it); a retry under a used message id is not a new message
and is not checked. Three rules, each refusal naming what to change:

* a message to one's own address is refused (``invalid_arguments``, path ``to``, rule
  ``self``): it would come back to the sender as new work;
* a message identical to one the same sender sent the same recipient within
  ``AGENT_LINK_REPEAT_WINDOW_MS`` (same body, same anticipation, answering the same message)
  is refused (``permission_denied``, reason ``repeated_message``): agents that acknowledge
  each other's acknowledgements repeat themselves. An identical earlier message that never
  reached its recipient is no part of a loop: the send retries it instead
  (:func:`waiting_repeat`, :meth:`agent_link_core.sending.Outbox.send`);
* more than ``AGENT_LINK_PAIR_RATE`` messages between two addresses (both ways counted)
  within ``AGENT_LINK_PAIR_WINDOW_MS`` is refused (``permission_denied``, reason ``send_rate``).

``AGENT_LINK_REPEAT_WINDOW_MS`` or ``AGENT_LINK_PAIR_RATE`` at 0 switches its rule off.
"""

from __future__ import annotations

from agent_link_core.errors import AgentLinkError, invalid_arguments

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any
    from agent_link_core.config import Config
    from agent_link_core.store import Store

def same_recent(store: Store, config: Config, *, sender: str, recipient: str, body: str, anticipation: str,
                reply_to: str | None, now_ms: int) -> list[Any]:
    """The messages the same as this one for the repeat rule (sender, recipient, body,
    anticipation, reply-to) sent within ``AGENT_LINK_REPEAT_WINDOW_MS``, newest first: the
    rows (``id, sent_at, to_addr, reply_by, first_delivered_at, metadata``) both
    :func:`waiting_repeat` and :func:`check_send` judge, read with one statement. Empty when
    the window is 0.

    :param now_ms: the send's time, epoch ms.
    """
    window_ms = int(config.get("AGENT_LINK_REPEAT_WINDOW_MS"))
    if not window_ms:
        return []
    return store.conn.execute(
        "SELECT id, sent_at, to_addr, reply_by, first_delivered_at, metadata FROM messages WHERE from_addr = ? AND sent_at >= ?"
        " AND recipient = ? AND body = ? AND anticipation = ? AND reply_to IS ? ORDER BY sent_at DESC",
        (sender, now_ms - window_ms, recipient, body, anticipation, reply_to),
    ).fetchall()


def waiting_repeat(same: list[Any], *, to: str, reply_by_ms: int | None, fingerprint: Any) -> str | None:
    """The id of the newest message the same as this one (every field the idempotency check
    compares: those of :func:`same_recent`, and to, reply-by, fingerprint) that was never
    delivered (``first_delivered_at`` unset; the caller checks the push outcome), else None.

    :param same: :func:`same_recent`'s rows for this message.
    :param fingerprint: the new message's ``metadata["fingerprint"]`` (a dict) or None.
    """
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

    :param sender: the sender's address; ``known_sender`` False (an unidentified caller,
        ``external``) skips the self rule, since it has no mailbox of its own.
    :param same: :func:`same_recent`'s rows for this message (the repeat rule refuses it when
        there is one).
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
