"""The ``message_events`` every change leaves, and the push claims kept in them: a base of
:class:`~agent_link_core.mailbox.Mailbox`. A change's event goes to the
``agent_link_record_event`` observers inside its transaction, to ``agent_link_on_event`` after.
"""

from __future__ import annotations

import json
import sqlite3

from agent_link_core.store import now_ms

TYPE_CHECKING = False  # no typing at run time: the hook fast path imports this (via the mailbox)
if TYPE_CHECKING:
    from typing import Any

    from agent_link_core.config import Config
    from agent_link_core.plugins import Hooks
    from agent_link_core.records import Event
    from agent_link_core.store import Store

#: the events that say how a push stands (the newest one decides ``accepted``), as SQL
PUSH_EVENT_KINDS = "('delivery_unknown', 'delivery_accepted', 'delivery_settled', 'delivered', 'released')"


class MailEvents:
    """Events and push claims over one store; not used alone."""

    store: Store
    config: Config
    hooks: Hooks | None

    if TYPE_CHECKING:
        def get_row(self, message_id: str) -> sqlite3.Row | None: ...

    def record_event(self, message_id: str, kind: str, actor: str | None, via: str | None, data: dict[str, Any]) -> None:
        """Append an audit event that changes no message state (e.g. ``delivery_unknown``)."""
        with self.store.write() as conn:
            self._event(conn, message_id, kind, now_ms(), actor, via, data)

    def push_outcome(self, message_id: str) -> str:
        """How delivery stands for a sender: ``delivered``, ``accepted`` (the host took the
        push and will show it; never pushed again), ``unknown`` (the last push may have
        landed, unconfirmed) or ``queued``."""
        row = self.get_row(message_id)
        if row is not None and row["first_delivered_at"] is not None:
            return "delivered"
        last = self.store.conn.execute(
            f"SELECT kind FROM message_events WHERE message_id = ? AND kind IN {PUSH_EVENT_KINDS} ORDER BY seq DESC LIMIT 1",
            (message_id,),
        ).fetchone()
        return {"delivery_unknown": "unknown", "delivery_accepted": "accepted"}.get(last[0] if last else "", "queued")

    def claim_push(self, message_id: str, holder: dict[str, Any], *, replacing: int | None = None) -> dict[str, Any] | None:
        """Take the message's push claim before a harness writes it to its host, so two
        processes (or a resend after a crash) never push it at once. Atomic across processes:
        ``push_claimed`` with ``holder`` (JSON-able, e.g. ``{"pid", "procStart"}``) is appended
        only when no claim is open, or when the open one is ``replacing`` (its ``seq``: a
        claim whose process the caller found dead; settled as ``orphaned`` first).

        :returns: None when the claim is now ours; else the open claim's ``{"seq", "at" (ms),
            "holder"}`` (the caller decides from ``holder`` whether its process lives).
        """
        with self.store.write() as conn:
            last = conn.execute(
                "SELECT seq, kind, at, data FROM message_events WHERE message_id = ?"
                " AND kind IN ('push_claimed', 'push_settled') ORDER BY seq DESC LIMIT 1", (message_id,)).fetchone()
            at = now_ms()
            if last is not None and last["kind"] == "push_claimed":
                if replacing is None or last["seq"] != replacing:
                    return {"seq": last["seq"], "at": last["at"], "holder": json.loads(last["data"] or "{}")}
                self._event(conn, message_id, "push_settled", at, None, None, {"outcome": "orphaned", "claim": replacing})
            self._event(conn, message_id, "push_claimed", at, None, None, holder)
        return None

    def settle_push(self, message_id: str, outcome: str, data: dict[str, Any] | None = None) -> None:
        """Close the open push claim with what the push came to (``outcome``: a harness's
        word, e.g. ``delivered``, ``pushed``, ``failed``, ``held``); a later
        :meth:`claim_push` may take it again."""
        self.record_event(message_id, "push_settled", None, None, {"outcome": outcome, **(data or {})})

    def last_push_settled(self, message_id: str) -> dict[str, Any] | None:
        """The data of the message's newest ``push_settled`` event (``{"outcome", ...}``), or
        None when no push of it was ever settled."""
        row = self.store.conn.execute(
            "SELECT data FROM message_events WHERE message_id = ? AND kind = 'push_settled' ORDER BY seq DESC LIMIT 1",
            (message_id,)).fetchone()
        return json.loads(row["data"] or "{}") if row is not None else None

    @staticmethod
    def _resolved(conn: sqlite3.Connection, message_id: str) -> bool:
        return conn.execute("SELECT 1 FROM resolutions WHERE message_id = ?", (message_id,)).fetchone() is not None

    @staticmethod
    def _event(
        conn: sqlite3.Connection, message_id: str, kind: str, at: int, actor: str | None, via: str | None, data: dict[str, Any]
    ) -> None:
        conn.execute(
            "INSERT INTO message_events (message_id, kind, at, actor, via, data) VALUES (?, ?, ?, ?, ?, ?)",
            (message_id, kind, at, actor, via, json.dumps(data, ensure_ascii=False)),
        )

    def _stage(
        self, kind: str, message_id: str | None, at_ms: int, actor: str | None, data: dict[str, Any],
        result: dict[str, Any] | None = None,
    ) -> Event | None:
        """Inside the write transaction: the change's event, given to the record observers."""
        if self.hooks is None:
            return None
        from agent_link_core.records import Event

        event = Event(kind, message_id, at_ms, actor, data, result)
        self.hooks.record_event(event)
        return event

    def _publish(self, *events: Event | None) -> None:
        """After the commit: the staged events to the ``agent_link_on_event`` observers."""
        if self.hooks is not None:
            for event in events:
                if event is not None:
                    self.hooks.on_event(event)
