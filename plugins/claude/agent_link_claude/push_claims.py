"""Push claims: a message is written to a session's inbox socket by one process at a time.

A claim is a ``push_claimed`` event in the message's ``message_events`` (its data: the
holder, ``{"pid", "procStart", ...}``), closed by a ``push_settled`` event with what the
push came to. Taken atomically across processes (one write transaction), so two processes,
or a resend after a crash, never write the same message at once; a claim whose process died
is taken over (settled as ``orphaned`` first).
"""

from __future__ import annotations

import json
from typing import Any

from agent_link_core.mailbox import Mailbox


def claim_push(mailbox: Mailbox, message_id: str, holder: dict[str, Any], *, replacing: int | None = None) -> dict[str, Any] | None:
    """Take the message's push claim for ``holder`` (JSON-able) when no claim is open, or
    when the open one is ``replacing`` (its ``seq``: a claim whose process the caller found dead).

    :returns: None when the claim is now ours; else the open claim's ``{"seq", "at" (ms),
        "holder"}`` (the caller decides from ``holder`` whether its process lives).
    """
    with mailbox.store.write() as conn:
        last = conn.execute(
            "SELECT seq, kind, at, data FROM message_events WHERE message_id = ?"
            " AND kind IN ('push_claimed', 'push_settled') ORDER BY seq DESC LIMIT 1", (message_id,)).fetchone()
        if last is not None and last["kind"] == "push_claimed":
            if replacing is None or last["seq"] != replacing:
                return {"seq": last["seq"], "at": last["at"], "holder": json.loads(last["data"] or "{}")}
            mailbox.record_event(message_id, "push_settled", None, None, {"outcome": "orphaned", "claim": replacing})
        mailbox.record_event(message_id, "push_claimed", None, None, holder)
    return None


def settle_push(mailbox: Mailbox, message_id: str, outcome: str, data: dict[str, Any] | None = None) -> None:
    """Close the open push claim with what the push came to (``outcome``: ``delivered``,
    ``pushed``, ``failed``, ``held`` ...); a later :func:`claim_push` may take it again."""
    mailbox.record_event(message_id, "push_settled", None, None, {"outcome": outcome, **(data or {})})


def last_push_settled(mailbox: Mailbox, message_id: str) -> dict[str, Any] | None:
    """The data of the message's newest ``push_settled`` event (``{"outcome", ...}``), or
    None when no push of it was ever settled."""
    row = mailbox.store.conn.execute(
        "SELECT data FROM message_events WHERE message_id = ? AND kind = 'push_settled' ORDER BY seq DESC LIMIT 1",
        (message_id,)).fetchone()
    return json.loads(row["data"] or "{}") if row is not None else None
