"""The ``message_events`` every change leaves and what happens to a message after delivery (docs/behaviour.md §8): its one
resolution, reminders, nudges, handovers and status transitions; a base of :class:`~agent_link_core.mailbox.Mailbox`. A change's
event goes to the ``agent_link_record_event`` observers inside its transaction, to ``agent_link_on_event`` after the commit."""

from __future__ import annotations

import json
import sqlite3

from agent_link_core.envelope import iso_ms
from agent_link_core.errors import AgentLinkError
from agent_link_core.store import now_ms

TYPE_CHECKING = False  # no typing at run time: the hook fast path imports this (via the mailbox)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from agent_link_core.config import Config
    from agent_link_core.mailbox import MessageState
    from agent_link_core.model import Caller
    from agent_link_core.plugins import Hooks
    from agent_link_core.records import Event, OutgoingMessage
    from agent_link_core.store import Store

STATUS_BY_KIND = {"reply": "replied", "decline": "declined", "done": "done"}
#: the events that say how a push stands (the newest one decides ``accepted``), as SQL
PUSH_EVENT_KINDS = "('delivery_unknown', 'delivery_accepted', 'delivery_settled', 'delivered', 'released')"


class MailFollowUp:
    """Events, resolutions, reminders, nudges, handovers and status transitions; not used alone."""

    store: Store
    config: Config
    hooks: Hooks | None

    if TYPE_CHECKING:
        def get_row(self, message_id: str) -> sqlite3.Row | None: ...
        def require(self, message_id: str) -> sqlite3.Row: ...
        def state(self, row: sqlite3.Row, now: int | None = None) -> MessageState: ...
        def states(self, rows: Sequence[sqlite3.Row], now: int | None = None) -> list[MessageState]: ...
        def _insert_row(self, conn: sqlite3.Connection, msg: OutgoingMessage, at: int) -> sqlite3.Row | None: ...

    def record_event(self, message_id: str, kind: str, actor: str | None, via: str | None, data: dict[str, Any]) -> None:
        """Append an audit event that changes no message state (e.g. ``delivery_unknown``)."""
        with self.store.write() as conn:
            self.record(conn, message_id, kind, now_ms(), actor, data, via=via)

    def push_outcome(self, message_id: str) -> str:
        """How delivery stands for a sender: ``delivered``, ``accepted``, ``unknown`` or ``queued`` (docs/delivery-states.md)."""
        row = self.get_row(message_id)
        if row is not None and row["first_delivered_at"] is not None:
            return "delivered"
        last = self.store.conn.execute(
            f"SELECT kind FROM message_events WHERE message_id = ? AND kind IN {PUSH_EVENT_KINDS} ORDER BY seq DESC LIMIT 1",
            (message_id,),
        ).fetchone()
        return {"delivery_unknown": "unknown", "delivery_accepted": "accepted"}.get(last[0] if last else "", "queued")

    def record(
        self, conn: sqlite3.Connection, message_id: str, kind: str, at: int, actor: str | None, data: dict[str, Any], *,
        via: str | None = None, observed: dict[str, Any] | None = None,
    ) -> Event | None:
        """Inside a write transaction (``conn`` of :meth:`~agent_link_core.store.Store.write`): append the audit event ``kind``
        of ``message_id`` (``at`` epoch ms, ``actor`` an address, ``data`` its JSON fields). With ``observed`` (the fields
        observers get) it also goes to the ``agent_link_record_event`` observers: the returned event is then for
        :meth:`publish` after the commit (None without ``observed`` or without hooks)."""
        conn.execute("INSERT INTO message_events (message_id, kind, at, actor, via, data) VALUES (?, ?, ?, ?, ?, ?)",
                     (message_id, kind, at, actor, via, json.dumps(data, ensure_ascii=False)))
        return None if observed is None else self._stage(kind, message_id, at, actor, observed)

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

    def publish(self, *events: Event | None) -> None:
        """After the commit: the events :meth:`record` staged (None ones skipped) to the ``agent_link_on_event`` observers."""
        if self.hooks is not None:
            for event in events:
                if event is not None:
                    self.hooks.call("agent_link_on_event", event=event)

    def resolve(
        self, message_id: str, caller: Caller, kind: str, *, reason: str | None = None,
        reply: OutgoingMessage | None = None, result: dict[str, Any] | None = None,
    ) -> tuple[dict[str, Any], sqlite3.Row | None]:
        """Resolve a message once, by its recipient (docs/behaviour.md §8), storing ``reply`` (if any) in the same transaction.

        :param kind: ``reply``, ``decline`` or ``done``; ``reason``: the decline reason or the note of ``done``.
        :param result: the reply's send-result fields, handed to observers of its ``sent`` event.
        :returns: ``(resolution view, reply row or None)``.
        :raises AgentLinkError: ``not_found``, ``wrong_recipient``, ``already_resolved``.
        """
        row = self.require(message_id)
        _check_recipient(message_id, row["recipient"], caller)
        at = now_ms()
        before = self.state(row, at)
        late = before.status in ("unresolved", "expired")
        reply_row = None
        with self.store.write() as conn:
            existing = conn.execute("SELECT * FROM resolutions WHERE message_id = ?", (message_id,)).fetchone()
            if existing is not None:
                raise AgentLinkError(
                    "already_resolved",
                    f"Message {message_id} was already resolved ({existing['kind']}).",
                    {"messageId": message_id, "status": STATUS_BY_KIND[existing["kind"]], "resolvedAt": iso_ms(existing["at"])},
                    hint="A message is resolved once; send a new message to add something.",
                )
            # handed over while we were deciding?
            _check_recipient(message_id, conn.execute("SELECT recipient FROM messages WHERE id = ?", (message_id,)).fetchone()[0], caller)
            if reply is not None:
                reply_row = self._insert_row(conn, reply, at)
            conn.execute(
                "INSERT INTO resolutions (message_id, kind, by_addr, at, late, reason, reply_message_id)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (message_id, kind, caller.address, at, int(late), reason, reply.id if reply else None),
            )
            conn.execute(
                # Resolving is itself evidence the recipient saw the message.
                "UPDATE messages SET open = 0, first_delivered_at = COALESCE(first_delivered_at, ?),"
                " delivered_at = COALESCE(delivered_at, ?), acknowledged_at = COALESCE(acknowledged_at, ?)"
                " WHERE id = ?",
                (at, at, at, message_id),
            )
            staged = [
                self._stage("sent", reply_row["id"], at, caller.address, {"to": reply_row["recipient"], "inReplyTo": message_id},
                            result) if reply_row is not None else None,
                self.record(conn, message_id, "resolved", at, caller.address, {"kind": kind, "late": late},
                            observed={"kind": kind, "late": late, "status": STATUS_BY_KIND[kind]}),
            ]
        resolution = {"kind": kind, "by": caller.address, "at": iso_ms(at), "late": late, "replyMessageId": reply.id if reply else None}
        self.publish(*staged)
        return resolution, reply_row

    def due_reminders(self, recipient: str, now: int | None = None) -> list[tuple[sqlite3.Row, MessageState]]:
        """Delivered, unresolved reply/action messages of ``recipient`` whose reminder is due (at ``now``, epoch ms; default the clock)."""
        rows = self.store.conn.execute(
            "SELECT * FROM messages WHERE recipient = ? AND open = 1 AND delivered_at IS NOT NULL"
            " AND anticipation != 'fyi' ORDER BY sent_at",
            (recipient,),
        ).fetchall()
        return [(row, st) for row, st in zip(rows, self.states(rows, now), strict=True) if st.due]

    def reminder_recipients(self) -> list[str]:
        """Recipients holding delivered, open reply/action mail (candidates for reminders)."""
        return [r[0] for r in self.store.conn.execute(
            "SELECT DISTINCT recipient FROM messages WHERE open = 1 AND delivered_at IS NOT NULL AND anticipation != 'fyi' ORDER BY recipient")]

    def record_reminder(self, message_id: str, n: int, via: str, to: str, *, wait: bool = True) -> bool:
        """Claim reminder number ``n`` for a message; True only for the one process that wins. ``wait`` False (a prompt hook):
        ``state_busy`` at once while another process holds the write lock."""
        at = now_ms()
        with self.store.write(wait=wait) as conn:
            cur = conn.execute(
                "INSERT OR IGNORE INTO reminders (message_id, n, at, via, to_addr) VALUES (?, ?, ?, ?, ?)",
                (message_id, n, at, via, to),
            )
            if cur.rowcount != 1:
                return False
            staged = self.record(conn, message_id, "reminded", at, to, {"n": n}, via=via, observed={"n": n, "via": via})
        self.publish(staged)
        return True

    def release_reminder(self, message_id: str, n: int, to: str) -> None:
        """Give back reminder ``n`` that :meth:`record_reminder` claimed but whose text never reached the session (due again; a
        ``reminder_unshown`` event says why). ``state_busy`` / ``state_io_error`` when the write fails."""
        with self.store.write(wait=False) as conn:
            cur = conn.execute("DELETE FROM reminders WHERE message_id = ? AND n = ? AND to_addr = ?", (message_id, n, to))
            if cur.rowcount == 1:
                self.record(conn, message_id, "reminder_unshown", now_ms(), to, {"n": n})

    def claim_nudge_block(self, recipient: str, now: int | None = None, *, wait: bool = True) -> bool:
        """Claim the one blocking nudge (a Stop-hook block) allowed per interval: False when ``recipient`` had one within the
        interval (racing processes still produce one). ``wait`` False: ``state_busy`` at once while another holds the lock."""
        now = now_ms() if now is None else now
        interval = self.config.reminder_interval_ms
        with self.store.write(wait=wait) as conn:
            if self.blocked_recently(recipient, now):
                return False
            cur = conn.execute(
                "INSERT OR IGNORE INTO nudge_blocks (recipient, bucket, at) VALUES (?, ?, ?)",
                (recipient, now // interval, now),
            )
            return cur.rowcount == 1

    def blocked_recently(self, recipient: str, now: int | None = None) -> bool:
        """True when a blocking nudge for ``recipient`` happened within one interval."""
        now = now_ms() if now is None else now
        return self.store.conn.execute(
            "SELECT 1 FROM nudge_blocks WHERE recipient = ? AND at > ?",
            (recipient, now - self.config.reminder_interval_ms),
        ).fetchone() is not None

    def note_transition(self, row: sqlite3.Row, state: MessageState) -> None:
        """Record, once across all processes, that a message became unresolved or expired (the first reader to see it does)."""
        if state.status not in ("unresolved", "expired"):
            return
        if self.store.conn.execute(
            "SELECT 1 FROM status_transitions WHERE message_id = ? AND status = ?", (row["id"], state.status)
        ).fetchone():
            return  # recorded already: a read takes no write lock for it
        at = now_ms()
        try:
            with self.store.write(wait=False) as conn:
                cur = conn.execute(
                    "INSERT OR IGNORE INTO status_transitions (message_id, status, at) VALUES (?, ?, ?)",
                    (row["id"], state.status, at),
                )
                if cur.rowcount != 1:
                    return
                changed = {"status": state.status}
                staged = self.record(conn, row["id"], "status_changed", at, None, changed, observed=changed)
        except AgentLinkError:  # busy, damaged, replaced: a read must not fail; the next reader records it
            return
        self.publish(staged)


def _check_recipient(message_id: str, recipient: str, caller: Caller) -> None:
    if caller.address != recipient:
        raise AgentLinkError(
            "wrong_recipient", f"Only {recipient} can resolve message {message_id}.",
            {"messageId": message_id, "expected": recipient, "caller": caller.address},
            hint="Resolve only messages addressed to you; check read_agent_link_inbox.",
        )
