"""The message lifecycle: a row (queued) that only evidence (a confirmed push, an inbox read) moves to delivered, then one
resolution by the recipient, reminders and status transitions; status is computed on read from the clock, no timer runs
(docs/behaviour.md §8). Every change leaves a ``message_events`` row, given to the ``agent_link_record_event`` observers
inside its transaction and to ``agent_link_on_event`` after the commit (docs/storage.md, "Audit records commit with the change")."""

from __future__ import annotations

import _thread
import os
import sqlite3
import sys
import time

from agent_link_core.addresses import ANTICIPATIONS, MESSAGE_ID_WORDS, address_scheme, is_address, is_ulid
from agent_link_core.envelope import FIRST_MS, LAST_MS, MAX_BODY_BYTES, EnvelopeMessage, escape_text, iso_ms, render_envelope, sanitize_text
from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.json_files import dumps, loads
from agent_link_core.store import is_corruption, now_ms

TYPE_CHECKING = False  # no typing/dataclasses at run time: the hook fast path imports this
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from typing import Any

    from agent_link_core.config import Config
    from agent_link_core.model import Caller
    from agent_link_core.plugins import Hooks
    from agent_link_core.records import Event, OutgoingMessage
    from agent_link_core.store import Store

MIN_REPLY_BY_LEAD_MS = 30_000
STATUS_BY_KIND = {"reply": "replied", "decline": "declined", "done": "done"}
#: the events that say how a push stands (the newest one decides ``accepted``), as SQL
PUSH_EVENT_KINDS = "('delivery_unknown', 'delivery_accepted', 'delivery_settled', 'delivered', 'released')"
#: ids per query when a read asks about many messages (:func:`batches`)
STATE_BATCH = 500
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_last_id = [0, 0]  # (epoch ms, 80-bit randomness) of the newest id this process made
_id_lock = _thread.allocate_lock()  # threading's Lock, without importing threading (a CLI command needs no thread)


def batches(ids: Sequence[str]) -> Iterator[tuple[list[str], str]]:
    """``ids`` in chunks of :data:`STATE_BATCH`, each with its ``?, ?, ...`` placeholders."""
    for start in range(0, len(ids), STATE_BATCH):
        chunk = list(ids[start:start + STATE_BATCH])
        yield chunk, ", ".join("?" * len(chunk))


def new_message_id() -> str:
    """A new ULID (48 bits of epoch ms, 80 random bits), increasing within the process (python-ulid's import slows a CLI send)."""
    with _id_lock:
        ms, rand = time.time_ns() // 1_000_000, int.from_bytes(os.urandom(10), "big")
        if ms <= _last_id[0]:
            ms, rand = _last_id[0], _last_id[1] + 1
            if rand >> 80:  # 2**80 ids in one millisecond: borrow the next one
                ms, rand = ms + 1, 0
        _last_id[:] = [ms, rand]
    return _crockford((ms << 80) | rand)


def _crockford(value: int) -> str:
    return "".join(CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


def ulid_of_uuid(value: str) -> str | None:
    """The ULID holding the 128 bits of the UUID ``value`` (any case, hyphens or not; a fixed mapping), or None for a non-UUID."""
    import uuid

    try:
        return _crockford(uuid.UUID(value).int)
    except (ValueError, TypeError, AttributeError):
        return None


def parse_iso_ms(value: str, path: str) -> int:
    """Parse an ISO 8601 timestamp that carries a timezone into epoch ms (``path``: the argument's name, for the error);
    ``invalid_arguments`` (rule ``format``/``timezone`` with an ``example`` of a valid value, ``range``: outside years 1-9999 UTC)."""
    from datetime import datetime

    expected = "ISO 8601 date-time with a timezone"
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise invalid_arguments([{"path": path, "rule": "format", "expected": expected, "example": "2030-01-31T17:00:00Z"}]) from None
    if parsed.tzinfo is None:
        raise invalid_arguments([{"path": path, "rule": "timezone", "expected": expected, "example": "2030-01-31T17:00:00+01:00"}])
    ms = int(parsed.timestamp() * 1000)
    if not FIRST_MS <= ms <= LAST_MS:  # (its zone moved it out of years 1-9999) no reader could show it
        raise invalid_arguments([{"path": path, "rule": "range", "expected": "a time from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z"}])
    return ms


def check_labels(anticipation: str | None, reply_by: str | None, wait_for_reply: bool, now: int) -> tuple[str, int | None]:
    """Validate the labels together (docs/behaviour.md §4; ``now`` in epoch ms) and apply defaults: ``(anticipation,
    reply_by_ms)``, anticipation ``fyi`` or with ``wait_for_reply`` ``reply``; ``invalid_arguments`` listing every failed rule."""
    errors: list[dict[str, Any]] = []
    if anticipation is not None and anticipation not in ANTICIPATIONS:
        errors.append({"path": "anticipation", "rule": "enum", "expected": "reply | action | fyi"})
    label = anticipation or ("reply" if wait_for_reply else "fyi")
    if label == "fyi" and wait_for_reply:
        errors.append({"path": "waitForReply", "rule": "fyi_conflict", "expected": "no waitForReply with anticipation fyi"})
    reply_by_ms = None
    if reply_by is not None:
        if label == "fyi":
            errors.append({"path": "replyBy", "rule": "fyi_conflict", "expected": "no replyBy with anticipation fyi"})
        else:
            try:
                reply_by_ms = parse_iso_ms(reply_by, "replyBy")
            except AgentLinkError as exc:
                errors.extend(exc.details["errors"])
            else:
                if reply_by_ms < now + MIN_REPLY_BY_LEAD_MS:
                    errors.append({"path": "replyBy", "rule": "minimum", "expected": "at least 30 seconds in the future"})
    if errors:
        raise invalid_arguments(errors)
    return label, reply_by_ms


def check_body(body: str) -> str:
    """Sanitize a body and enforce the 64 KiB (UTF-8 bytes) limit: ``body_too_large`` (``limitBytes``, ``actualBytes``) or
    ``invalid_arguments`` for an empty body."""
    clean = sanitize_text(body)
    size = len(clean.encode("utf-8"))
    if size > MAX_BODY_BYTES:
        raise AgentLinkError("body_too_large", f"The message is {size} bytes; the limit is {MAX_BODY_BYTES} bytes (UTF-8).",
                             {"limitBytes": MAX_BODY_BYTES, "actualBytes": size},
                             hint="Shorten the message or send a file path instead of the content.")
    if not clean.strip() or not _shows_something(clean.strip()):
        raise invalid_arguments([{"path": "message", "rule": "minLength", "expected": "a message with visible text (not only spaces, controls or zero-width characters)"}])
    return clean


def _shows_something(text: str) -> bool:
    """Whether ``text`` has a character the envelope keeps (not a control, zero-width, separator or NUL)."""
    if text[0].isprintable():  # the common case, without importing unicodedata
        return True
    import unicodedata

    return any(unicodedata.category(c)[0] not in "CZ" for c in text)


def content_hash(
    sender: str, to: str, body: str, anticipation: str, reply_by_ms: int | None, reply_to: str | None,
    extra: dict[str, Any] | None = None,
) -> str:
    """What makes two sends with one id "the same message" (SHA-256 hex); ``extra``: ``metadata["fingerprint"]``, if any."""
    parts: list[Any] = [sender, to, body, anticipation, reply_by_ms, reply_to]
    if extra:
        parts.append(extra)
    blob = dumps(parts, ensure_ascii=False, sort_keys=True)
    return _sha256(blob.encode("utf-8")).hexdigest()


def _sha256(data: bytes) -> Any:
    # CPython's built-in SHA-256: importing hashlib initialises OpenSSL, about 3 ms of CPU per send
    try:  # the module's name depends on the version (a failed import searches all of sys.path)
        if sys.version_info >= (3, 12):
            from _sha2 import sha256
        else:
            from _sha256 import sha256
    except ImportError:  # a build without it
        from hashlib import sha256
    return sha256(data)


def idempotency_refusal(message_id: str, differs: list[str], path: str, expected: str) -> AgentLinkError:
    """``invalid_arguments`` (rule ``idempotency``, ``details.differs``) for an id used for another message."""
    words = [{"from": "sender", "to": "recipient", "message": "text"}.get(name, name) for name in differs]
    what = f"its {', '.join(words)} {'differs' if len(words) == 1 else 'differ'}" if words else "its content differs"
    return invalid_arguments([{"path": path, "rule": "idempotency", "expected": expected}],
                             f"Message id {message_id} was already used for a different message: {what}.", differs=differs)


def differing_fields(row: sqlite3.Row, msg: OutgoingMessage) -> list[str]:
    """The names of ``msg``'s fields that differ from the stored ``row`` (tool argument names, then fingerprint keys), never
    values: the stored message may be someone else's."""
    given = {"from": ("from_addr", msg.sender.address), "to": ("to_addr", msg.to), "message": ("body", msg.body),
             "anticipation": ("anticipation", msg.anticipation), "replyBy": ("reply_by", msg.reply_by_ms),
             "replyToMessageId": ("reply_to", msg.reply_to)}
    out = [name for name, (column, value) in given.items() if row[column] != value]
    try:
        stored_meta = loads(row["metadata"] or "{}")
    except (ValueError, RecursionError):
        stored_meta = {}
    before = stored_meta.get("fingerprint") if isinstance(stored_meta, dict) else None
    before = before if isinstance(before, dict) else {}
    after = msg.metadata.get("fingerprint") or {}
    out += [key for key in sorted(set(before) | set(after)) if before.get(key) != after.get(key)]
    return out


class Visibility:
    """Which stored messages one reader may see (docs/storage.md, "Who sees what"), in queries (:meth:`sql`) and on rows
    (:meth:`allows`); built by :meth:`Mailbox.visible_to`.

    :param address: the reader's address (None: an unidentified reader, who sees nothing).
    :param everything: all mail, for a reader allowed to see it; ``reason`` says why: ``participant``, ``inspect_all`` or ``person``.
    """

    __slots__ = ("address", "everything", "reason")

    def __init__(self, address: str | None, everything: bool = False, reason: str = "participant") -> None:
        self.address, self.everything, self.reason = address, everything, reason

    def sql(self, table: str = "messages") -> tuple[str, list[Any]]:
        """``(WHERE fragment, parameters)`` for rows of ``messages`` named ``table``: ``("1", [])`` for everything,
        ``("0", [])`` for an unidentified reader."""
        if self.everything:
            return "1", []
        if not self.address:
            return "0", []
        return f"({table}.from_addr = ? OR {table}.to_addr = ? OR {table}.recipient = ?)", [self.address] * 3

    def allows(self, row: Any) -> bool:
        """True when this reader may see the message ``row`` (a row or dict of ``messages``)."""
        return self.everything or (bool(self.address) and self.address in (row["from_addr"], row["to_addr"], row["recipient"]))

    def require(self, row: Any, what: str = "this message") -> None:
        """``permission_denied`` (reason ``not_participant``) unless :meth:`allows` ``row``; ``what``: what was asked for."""
        if not self.allows(row):
            raise AgentLinkError("permission_denied", f"Only the sender or the recipient may read {what}.", {"reason": "not_participant"},
                                 hint=f"You are {self.address or 'unidentified'}; ask as the sender or the recipient.")


class MessageState:
    """The computed view of one message at a moment (times in epoch ms): ``status`` and ``delivery`` as docs/delivery-states.md
    names them (``accepted``: the host took a push it has not shown yet; ``delivery_note`` says so in words)."""

    __slots__ = ("status", "delivery", "reminder_count", "last_reminder_at", "next_due_at", "due", "resolution", "delivery_note")

    def __init__(
        self, status: str | None, delivery: str, reminder_count: int, last_reminder_at: int | None,
        next_due_at: int | None, due: bool, resolution: dict[str, Any] | None, delivery_note: str | None = None,
    ) -> None:
        self.status, self.delivery, self.reminder_count = status, delivery, reminder_count
        self.last_reminder_at, self.next_due_at, self.due, self.resolution = last_reminder_at, next_due_at, due, resolution
        self.delivery_note = delivery_note


class Mailbox:
    """Message operations over one :class:`~agent_link_core.store.Store`; ``hooks`` None on the hook fast path (no events, no plugins)."""

    def __init__(self, store: Store, config: Config, hooks: Hooks | None = None) -> None:
        self.store, self.config, self.hooks = store, config, hooks
        # (id, row) of the message being stored while its ``sent`` observers run (they read it)
        self._storing: tuple[str, sqlite3.Row] | None = None

    def visible_to(self, address: str | None, *, all_mail: bool = False) -> Visibility:
        """The :class:`Visibility` of an agent reading as ``address`` (None or a malformed address sees nothing); ``all_mail``
        (every message) needs ``AGENT_LINK_INSPECT_ALL``, else ``permission_denied`` (reason ``inspect_all_disabled``)."""
        if all_mail:
            if not self.config.get("AGENT_LINK_INSPECT_ALL"):
                raise AgentLinkError("permission_denied", "Reading every mailbox needs AGENT_LINK_INSPECT_ALL=1 in the server's environment.",
                                     {"reason": "inspect_all_disabled"}, hint="Ask for your own mail, or have the machine's user turn the setting on.")
            return Visibility(address, True, "inspect_all")
        return Visibility(address if address and is_address(address) else None)

    def last_event_seq(self) -> int:
        """The newest audit event's sequence number (0 for none): it grows with every committed change."""
        return int(self.store.conn.execute("SELECT COALESCE(MAX(seq), 0) FROM message_events").fetchone()[0])

    def get_row(self, message_id: str) -> sqlite3.Row | None:
        """The stored message ``message_id`` (exact id), or None."""
        storing = self._storing
        if storing is not None and storing[0] == message_id:
            return storing[1]
        return self.store.conn.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()

    def rows(self, ids: Sequence[str]) -> list[sqlite3.Row]:
        """The stored messages ``ids`` (exact ids), in that order, absent ones left out."""
        found: dict[str, sqlite3.Row] = {}
        for chunk, marks in batches(list(dict.fromkeys(ids))):
            for row in self.store.conn.execute(f"SELECT * FROM messages WHERE id IN ({marks})", chunk):
                found[row["id"]] = row
        return [found[i] for i in ids if i in found]

    def stored(self, message_id: str) -> sqlite3.Row:
        """The row of a message known to exist; ``LookupError`` (a bug, not a user error) when it does not."""
        row = self.get_row(message_id)
        if row is None:
            raise LookupError(message_id)
        return row

    def require(self, message_id: str) -> sqlite3.Row:
        """The message row by ULID (any case) or by a UUID chosen with ``--message-id``; ``invalid_arguments`` for an id that is
        neither, ``not_found`` (``details.id``) when absent."""
        message_id = message_id.upper() if isinstance(message_id, str) else message_id
        if isinstance(message_id, str) and not is_ulid(message_id):
            message_id = ulid_of_uuid(message_id) or message_id
        if not is_ulid(message_id):
            raise invalid_arguments([{"path": "messageId", "rule": "pattern", "expected": MESSAGE_ID_WORDS}])
        row = self.get_row(message_id)
        if row is None:
            raise AgentLinkError("not_found", f"No message {message_id} exists.", {"id": message_id, "candidates": []},
                                 hint="Check the id; read_agent_link_inbox lists your open mail.")
        return row

    def state(self, row: sqlite3.Row, now: int | None = None) -> MessageState:
        """Compute status, delivery state and reminder schedule for a message row."""
        return self.states([row], now)[0]

    def new_state(self, row: sqlite3.Row) -> MessageState:
        """:meth:`state` of a message this process has just stored, without a query."""
        return self._state_of(row, None, 0, None, None, now_ms())

    def states(self, rows: Sequence[sqlite3.Row], now: int | None = None) -> list[MessageState]:
        """:meth:`state` of every row (in order) at one moment ``now`` (epoch ms, default the clock), a few queries per batch."""
        now = now_ms() if now is None else now
        conn = self.store.conn
        queued = [row["id"] for row in rows if not row["acknowledged_at"] and not row["first_delivered_at"]]
        resolutions: dict[str, sqlite3.Row] = {}
        reminders: dict[str, tuple[int, int | None]] = {}
        pushes: dict[str, sqlite3.Row] = {}
        for chunk, marks in batches(list(dict.fromkeys(row["id"] for row in rows))):
            for res in conn.execute(f"SELECT * FROM resolutions WHERE message_id IN ({marks})", chunk):
                resolutions[res["message_id"]] = res
            for rem in conn.execute(
                f"SELECT message_id, COALESCE(MAX(n), 0), MAX(at) FROM reminders WHERE message_id IN ({marks}) GROUP BY message_id",
                chunk,
            ):
                reminders[rem[0]] = (int(rem[1]), rem[2])
        for chunk, marks in batches(queued):
            for last in conn.execute(
                "SELECT message_id, kind, data FROM message_events WHERE seq IN (SELECT MAX(seq) FROM message_events"
                f" WHERE message_id IN ({marks}) AND kind IN {PUSH_EVENT_KINDS} GROUP BY message_id)",
                chunk,
            ):
                pushes[last["message_id"]] = last
        return [self._state_of(row, resolutions.get(row["id"]), *reminders.get(row["id"], (0, None)),
                               pushes.get(row["id"]), now) for row in rows]

    def _state_of(self, row: sqlite3.Row, res: sqlite3.Row | None, count: int, last_at: int | None,
                  last_push: sqlite3.Row | None, now: int) -> MessageState:
        delivery = "acknowledged" if row["acknowledged_at"] else ("delivered" if row["first_delivered_at"] else "queued")
        note = None
        if delivery == "queued" and last_push is not None and last_push["kind"] == "delivery_accepted":
            delivery, note = "accepted", loads(last_push["data"] or "{}").get("note")
        resolution = None if res is None else {
            "kind": res["kind"], "by": res["by_addr"], "at": iso(res["at"]), "late": bool(res["late"]),
            "replyMessageId": res["reply_message_id"], "reason": escape_text(res["reason"]) if res["reason"] else res["reason"],
        }
        status, next_due, due = self._status(row, res, count, last_at, now)
        return MessageState(status, delivery, count, last_at, next_due, due, resolution, note)

    def _status(
        self, row: sqlite3.Row, res: sqlite3.Row | None, count: int, last_at: int | None, now: int
    ) -> tuple[str | None, int | None, bool]:
        """``(status, next reminder due at, due now)`` (docs/behaviour.md §8)."""
        if res is not None:
            return STATUS_BY_KIND[res["kind"]], None, False
        if row["anticipation"] == "fyi":
            return None, None, False
        first = row["first_delivered_at"]
        next_due = None if first is None else max(first, last_at or 0) + self.config.reminder_interval_ms
        reminded_out = count >= self.config.reminder_limit
        ends = [(next_due, "unresolved")] if next_due is not None and reminded_out else []
        if row["reply_by"] is not None:
            ends.append((row["reply_by"], "expired"))
        reached = [(at, status) for at, status in ends if at <= now]
        if reached:
            return min(reached)[1], None, False
        if next_due is None or reminded_out:
            return "pending", None, False
        return "pending", next_due, now >= next_due

    def to_view(self, row: sqlite3.Row, state: MessageState | None = None, *, meta: dict[str, Any] | None = None) -> dict[str, Any]:
        """The public, body-free description of a message (inbox, status, inspect); ``meta``: its decoded metadata, if known."""
        state = state or self.state(row)
        meta = loads(row["metadata"] or "{}") if meta is None else meta
        reminders = None if row["anticipation"] == "fyi" else {
            "count": state.reminder_count, "limit": self.config.reminder_limit,
            "lastAt": iso(state.last_reminder_at) if state.last_reminder_at else None,
            "nextDueAt": iso(state.next_due_at) if state.next_due_at else None,
        }
        view: dict[str, Any] = {
            "id": row["id"], "from": row["from_addr"], "fromHarness": address_scheme(row["from_addr"]),
            "fromVerified": meta.get("sender", {}).get("verified", False), "to": row["recipient"], "addressedTo": row["to_addr"],
            "sentAt": iso(row["sent_at"]), "anticipation": row["anticipation"], "replyBy": iso(row["reply_by"]) if row["reply_by"] else None,
            "inReplyTo": row["reply_to"], "delivery": state.delivery, "deliveredAt": iso(row["delivered_at"]) if row["delivered_at"] else None,
            "status": state.status, "resolution": state.resolution, "reminders": reminders, "bodyBytes": row["body_bytes"],
        }
        if state.delivery_note:
            view["deliveryNote"] = state.delivery_note
        if meta.get("via"):
            view["via"] = meta["via"]
        for key in ("correlationId", "senderProject", "senderLabel", "clientMessageId"):  # set by the sender
            if key in meta.get("fingerprint", {}):
                view[key] = meta["fingerprint"][key]
        return view

    def to_views(self, rows: Sequence[sqlite3.Row], *, now: int | None = None) -> list[dict[str, Any]]:
        """:meth:`to_view` of every row, their states read together at ``now`` (epoch ms)."""
        return [self.to_view(row, state) for row, state in zip(rows, self.states(rows, now), strict=True)]

    def envelope(self, row: sqlite3.Row) -> str:
        """Render the ``<agent-link-message>`` envelope for a stored message."""
        return next(self.envelopes([row]))

    def envelopes(self, rows: Sequence[sqlite3.Row], messages: Sequence[dict[str, Any]] | None = None) -> Iterator[str]:
        """The envelopes of stored messages, in order, each rendered when taken; the plugins asked once, for all
        (``agent_link_render_envelopes``). ``messages``: the rows' :meth:`row_dict`, if made."""
        messages = messages or [self.row_dict(row) for row in rows]
        from agent_link_core.boundary import frozen  # loaded with the hooks; each plugin's change to a message is its own fault

        answers = self.hooks.call("agent_link_render_envelopes", messages=tuple(map(frozen, messages))) if self.hooks is not None and rows else []
        for row, meta in zip(rows, (m["metadata"] for m in messages), strict=True):
            added = [answer[row["id"]] for answer in answers if row["id"] in answer]
            attributes = {key: value for contribution in added for key, value in contribution.attributes.items()}
            msg = EnvelopeMessage(
                id=row["id"], from_address=row["from_addr"], from_verified=bool(meta.get("sender", {}).get("verified")), to_address=row["recipient"],
                sent_at_ms=row["sent_at"], anticipation=row["anticipation"], body=row["body"], reply_by_ms=row["reply_by"],
                in_reply_to=row["reply_to"], via=attributes.get("via") or meta.get("via"), procedure=attributes.get("procedure"),
            )
            yield render_envelope(msg, elements=[element for contribution in added for element in contribution.elements],
                                  author=next((c.author for c in added if c.author is not None), None))

    @staticmethod
    def row_dict(row: sqlite3.Row) -> dict[str, Any]:
        """A stored message as a plain dict (``metadata`` decoded)."""
        return {**dict(zip(row.keys(), row)), "metadata": loads(row["metadata"] or "{}"), "from": row["from_addr"], "to": row["to_addr"]}

    def open_for(self, recipient: str, limit: int, *, undelivered_only: bool = False) -> list[sqlite3.Row]:
        """Open mail for ``recipient``, oldest first: undelivered, or unresolved reply/action."""
        sql = "SELECT * FROM messages WHERE recipient = ? AND open = 1" + (" AND delivered_at IS NULL" if undelivered_only else "")
        return self.store.conn.execute(sql + " ORDER BY sent_at, id LIMIT ?", (recipient, limit)).fetchall()

    def addressed_to(self, recipient: str, limit: int, before: str | None = None) -> list[dict[str, Any]]:
        """Views of ``recipient``'s mail, read or not, newest first, each with its ``envelope`` (``agent-link inbox --all``);
        ``before``: only the messages older than this one (the last of a page), which ``recipient`` must see.
        :raises AgentLinkError: ``not_found`` / ``permission_denied`` for such a ``before``."""
        clause, params = "recipient = ?", [recipient]
        if before:  # the listing's own order, so pages neither skip nor repeat a message sent in the same ms
            cursor = self.require(before)
            self.visible_to(recipient).require(cursor)
            clause += " AND (sent_at < ? OR (sent_at = ? AND id < ?))"
            params += [cursor["sent_at"], cursor["sent_at"], cursor["id"]]
        rows = self.store.conn.execute(f"SELECT * FROM messages WHERE {clause} ORDER BY sent_at DESC, id DESC LIMIT ?",
                                       (*params, limit)).fetchall()
        return [{**view, "envelope": envelope} for view, envelope in zip(self.to_views(rows), self.envelopes(rows), strict=True)]

    def has_event(self, message_id: str, kind: str) -> bool:
        """Whether the message's event log holds an event of ``kind``."""
        return self.store.conn.execute("SELECT 1 FROM message_events WHERE message_id = ? AND kind = ? LIMIT 1",
                                       (message_id, kind)).fetchone() is not None

    def count_open(self, recipient: str, *, undelivered_only: bool = False) -> int:
        """How many open messages ``recipient`` has (only undelivered ones with ``undelivered_only``)."""
        sql = "SELECT COUNT(*) FROM messages {} WHERE recipient = ? AND open = 1" + (" AND delivered_at IS NULL" if undelivered_only else "")
        return int(self._select(sql, (recipient,))[0][0])

    def _select(self, sql: str, params: tuple[Any, ...]) -> list[sqlite3.Row]:
        """A read that bypasses a damaged index (``NOT INDEXED`` goes at ``{}``)."""
        conn = self.store.conn
        try:
            return conn.execute(sql.format(""), params).fetchall()
        except sqlite3.DatabaseError as exc:
            if not is_corruption(exc):
                raise
            return conn.execute(sql.format("NOT INDEXED"), params).fetchall()

    def store_message(self, msg: OutgoingMessage, result: dict[str, Any] | None = None,
                      guard: Callable[[], str | None] | None = None) -> tuple[sqlite3.Row, bool]:
        """Insert a message (one transaction) unless its id exists: ``(row, created)``, ``created`` False for an identical resend
        or ``guard``'s id; ``invalid_arguments`` (rule ``idempotency``, :func:`differing_fields`) for the id with other content.

        :param result: the send's result fields, handed to observers of the ``sent`` event.
        :param guard: run in the write transaction before the insert (``agent_link_before_store`` then sees concurrent sends):
            raises to refuse, or returns the id of a message this one repeats.
        """
        digest = content_hash(msg.sender.address, msg.to, msg.body, msg.anticipation, msg.reply_by_ms, msg.reply_to,
                              msg.metadata.get("fingerprint"))
        at = now_ms()
        try:
            with self.store.write() as conn:
                if guard is not None and (repeated := guard()) is not None:
                    return conn.execute("SELECT * FROM messages WHERE id = ?", (repeated,)).fetchone(), False
                row = self._insert_row(conn, msg, at, digest, if_new=True)
                if row is None:  # the id exists: an identical resend, or a refusal
                    existing = conn.execute("SELECT * FROM messages WHERE id = ?", (msg.id,)).fetchone()
                    if existing["content_hash"] != digest:
                        raise idempotency_refusal(msg.id, differing_fields(existing, msg), "messageId",
                                                  "the same content as the first send with this id (a new message needs a new id)")
                    return existing, False
                self._storing = (msg.id, row)
                staged = self._stage("sent", msg.id, at, msg.sender.address, {"to": msg.recipient, "addressedTo": msg.to}, result)
            self.publish(staged)
        finally:
            self._storing = None
        return row, True

    def mark_delivered(self, message_id: str, via: str, evidence: dict[str, Any] | None = None) -> bool:
        """Record delivery on evidence (``via``: how it got there). Returns True if new."""
        return bool(self.mark_many_delivered([message_id], via, evidence))

    def mark_many_delivered(self, message_ids: Sequence[str], via: str, evidence: dict[str, Any] | None = None) -> list[str]:
        """:meth:`mark_delivered` of several messages in one write transaction: the ids newly marked, in the order given."""
        if not message_ids:  # nothing to write: a file that refuses writes is not asked to
            return []
        at = now_ms()
        marked: list[str] = []
        staged: list[Event | None] = []
        with self.store.write() as conn:
            for row in self.rows(list(dict.fromkeys(message_ids))):
                message_id = row["id"]
                if row["delivered_at"] is not None and row["delivered_via"] is not None:
                    continue
                marked.append(message_id)
                if row["delivered_at"] is not None:
                    # A resolution overtook the push's confirmation (it counts as delivery): keep its times, record path and evidence.
                    conn.execute("UPDATE messages SET delivered_via = ? WHERE id = ?", (via, message_id))
                    self.record(conn, message_id, "delivered", row["delivered_at"], row["recipient"],
                                {"evidence": evidence or {}, "afterResolution": True}, via=via)
                    continue
                still_open = int(row["anticipation"] != "fyi" and not conn.execute(
                    "SELECT 1 FROM resolutions WHERE message_id = ?", (message_id,)).fetchone())
                conn.execute("UPDATE messages SET delivered_at = ?, first_delivered_at = COALESCE(first_delivered_at, ?), delivered_via = ?,"
                             " open = ? WHERE id = ?", (at, at, via, still_open, message_id))
                staged.append(self.record(conn, message_id, "delivered", at, row["recipient"], {"evidence": evidence or {}}, via=via,
                                          observed={"via": via, "evidence": evidence or {}}))
        self.publish(*staged)
        return marked

    def drain(self, recipient: str, limit: int, *, include_open: bool) -> list[sqlite3.Row]:
        """Up to ``limit`` messages for an inbox read, changing nothing: undelivered (oldest first), then with ``include_open``
        open delivered ones (:meth:`mark_many_delivered` marks the ones shown)."""
        rows: list[sqlite3.Row] = []
        for delivered in ("IS NULL", "IS NOT NULL") if include_open else ("IS NULL",):
            if len(rows) < limit:  # a read never waits for another process's write lock (WAL readers)
                rows += self._select(f"SELECT * FROM messages {{}} WHERE recipient = ? AND open = 1 AND delivered_at"
                                     f" {delivered} ORDER BY sent_at, id LIMIT ?", (recipient, limit - len(rows)))
        return rows

    def _insert_row(self, conn: sqlite3.Connection, msg: OutgoingMessage, at: int, digest: str | None = None, *,
                    if_new: bool = False) -> sqlite3.Row | None:
        """Write a message row and its ``sent`` event in the caller's transaction: the row (None with ``if_new`` for an existing id)."""
        if digest is None:
            digest = content_hash(msg.sender.address, msg.to, msg.body, msg.anticipation, msg.reply_by_ms, msg.reply_to)
        meta = {**msg.metadata, "sender": {"source": msg.sender.source, "verified": msg.sender.verified}}
        if msg.tags:
            meta["tags"] = list(msg.tags)
        row = conn.execute(
            "INSERT INTO messages (id, from_addr, from_source, to_addr, recipient, body, body_bytes,"
            " content_hash, metadata, sent_at, anticipation, reply_by, reply_to, open)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)"
            + (" ON CONFLICT(id) DO NOTHING" if if_new else "") + " RETURNING *",
            (msg.id, msg.sender.address, msg.sender.source, msg.to, msg.recipient, msg.body, len(msg.body.encode("utf-8")), digest,
             dumps(meta, ensure_ascii=False), at, msg.anticipation, msg.reply_by_ms, msg.reply_to),
        ).fetchall()  # all of it: a statement left unfinished would hold the transaction open
        if not row:
            return None
        self.record(conn, msg.id, "sent", at, msg.sender.address, {"to": msg.recipient})
        return row[0]

    def record_event(self, message_id: str, kind: str, actor: str | None, via: str | None, data: dict[str, Any]) -> None:
        """Append an audit event that changes no message state (e.g. ``delivery_unknown``)."""
        with self.store.write() as conn:
            self.record(conn, message_id, kind, now_ms(), actor, data, via=via)

    def push_outcome(self, message_id: str) -> str:
        """How delivery stands for a sender: ``delivered``, ``accepted``, ``unknown`` or ``queued`` (docs/delivery-states.md)."""
        row = self.get_row(message_id)
        if row is not None and row["first_delivered_at"] is not None:
            return "delivered"
        last = self.store.conn.execute(f"SELECT kind FROM message_events WHERE message_id = ? AND kind IN {PUSH_EVENT_KINDS}"
                                       " ORDER BY seq DESC LIMIT 1", (message_id,)).fetchone()
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
                     (message_id, kind, at, actor, via, dumps(data, ensure_ascii=False)))
        return None if observed is None else self._stage(kind, message_id, at, actor, observed)

    def _stage(self, kind: str, message_id: str | None, at_ms: int, actor: str | None, data: dict[str, Any],
               result: dict[str, Any] | None = None) -> Event | None:
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
        late = self.state(row, at).status in ("unresolved", "expired")
        reply_row = None
        with self.store.write() as conn:
            existing = conn.execute("SELECT * FROM resolutions WHERE message_id = ?", (message_id,)).fetchone()
            if existing is not None:
                raise AgentLinkError(
                    "already_resolved", f"Message {message_id} was already resolved ({existing['kind']}).",
                    {"messageId": message_id, "status": STATUS_BY_KIND[existing["kind"]], "resolvedAt": iso_ms(existing["at"])},
                    hint="A message is resolved once; send a new message to add something.")
            # handed over while we were deciding?
            _check_recipient(message_id, conn.execute("SELECT recipient FROM messages WHERE id = ?", (message_id,)).fetchone()[0], caller)
            if reply is not None:
                reply_row = self._insert_row(conn, reply, at)
            conn.execute("INSERT INTO resolutions (message_id, kind, by_addr, at, late, reason, reply_message_id) VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (message_id, kind, caller.address, at, int(late), reason, reply.id if reply else None))
            conn.execute(  # resolving is itself evidence the recipient saw the message
                "UPDATE messages SET open = 0, first_delivered_at = COALESCE(first_delivered_at, ?), delivered_at = COALESCE(delivered_at, ?),"
                " acknowledged_at = COALESCE(acknowledged_at, ?) WHERE id = ?", (at, at, at, message_id))
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
        rows = self.store.conn.execute("SELECT * FROM messages WHERE recipient = ? AND open = 1 AND delivered_at IS NOT NULL"
                                       " AND anticipation != 'fyi' ORDER BY sent_at", (recipient,)).fetchall()
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
            cur = conn.execute("INSERT OR IGNORE INTO reminders (message_id, n, at, via, to_addr) VALUES (?, ?, ?, ?, ?)",
                               (message_id, n, at, via, to))
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

    def note_transition(self, row: sqlite3.Row, state: MessageState) -> None:
        """Record, once across all processes, that a message became unresolved or expired (the first reader to see it does)."""
        if state.status not in ("unresolved", "expired"):
            return
        if self.store.conn.execute("SELECT 1 FROM status_transitions WHERE message_id = ? AND status = ?",
                                   (row["id"], state.status)).fetchone():
            return  # recorded already: a read takes no write lock for it
        at = now_ms()
        try:
            with self.store.write(wait=False) as conn:
                cur = conn.execute("INSERT OR IGNORE INTO status_transitions (message_id, status, at) VALUES (?, ?, ?)",
                                   (row["id"], state.status, at))
                if cur.rowcount != 1:
                    return
                changed = {"status": state.status}
                staged = self.record(conn, row["id"], "status_changed", at, None, changed, observed=changed)
        except AgentLinkError:  # busy, damaged, replaced: a read must not fail; the next reader records it
            return
        self.publish(staged)


def iso(ms: int | None) -> str | None:
    """Epoch ms as ISO 8601 UTC with milliseconds (``2026-01-02T03:04:05.678Z``)."""
    return None if ms is None else iso_ms(ms)


def _check_recipient(message_id: str, recipient: str, caller: Caller) -> None:
    if caller.address != recipient:
        raise AgentLinkError("wrong_recipient", f"Only {recipient} can resolve message {message_id}.",
                             {"messageId": message_id, "expected": recipient, "caller": caller.address},
                             hint="Resolve only messages addressed to you; check read_agent_link_inbox.")
