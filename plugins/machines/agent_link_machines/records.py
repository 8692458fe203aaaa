"""The records machines exchange, and how each is decided and applied.

Three record types travel, each under an id the receiving machine applies at most once
(the engine de-duplicates on an id derived from it: :func:`agent_link_machines.relay.pack_rows`):

* ``message`` (id: the message id): a message to a session another machine lists;
* ``resolution`` (id: ``<message id>.resolved``): the recipient resolved a message that came
  from another machine; carries the reply or decline note (if any), which the sending machine
  stores *and* resolves with in one transaction, as a local reply does (waits there wake);
* ``delivered`` (id: ``<message id>.delivered``): a message that came from another machine
  reached its recipient (status and receipts on the sender's machine say so).

A message that arrived from another machine carries ``metadata.machines.origin``; it is
never sent on again (the loop stops there).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from agent_link_core.model import Caller
from agent_link_core.records import OutgoingMessage
from agent_link_core.store import now_ms

from agent_link_machines.common import ROLE_RULES_KEY, attach_role_procedure, machine_name, machine_of, served_here

log = logging.getLogger(__name__)


#: how a stored message that came from another machine starts its metadata (:func:`_outgoing`
#: puts ``machines`` first, and ``json.dumps`` keeps the order): the relay's own inserts skip
#: parsing it; anything else is decided from the parsed metadata
_ARRIVED = '{"machines": {"origin": '


def _meta(row: sqlite3.Row) -> dict[str, Any]:
    try:
        meta = json.loads(row["metadata"] or "{}")
    except ValueError:
        return {}
    return meta if isinstance(meta, dict) else {}


def message_record(row: sqlite3.Row, own: str, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """A stored message as the ``message`` record's body (the sender's attestation included).

    :param meta: the row's metadata already parsed (None: parsed here)."""
    meta = _meta(row) if meta is None else meta
    sender = meta.get("sender") or {}
    return {
        "id": row["id"], "from": row["from_addr"], "source": sender.get("source") or row["from_source"],
        "verified": bool(sender.get("verified")), "to": row["to_addr"], "recipient": row["recipient"],
        "body": row["body"], "anticipation": row["anticipation"], "replyBy": row["reply_by"], "replyTo": row["reply_to"],
        # not sent on: this machine's routing, and the receiving machine's own role rules (ROLE_RULES_KEY), applied here
        "metadata": {k: v for k, v in meta.items() if k not in ("sender", "machines", "elsewhere", ROLE_RULES_KEY)}, "origin": own,
    }


def outgoing_records(
    kind: str, message_id: str, data: Mapping[str, Any], conn: sqlite3.Connection, config: Any, row: sqlite3.Row | None = None,
) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """What another machine must learn of one mailbox event, as ``(record id, machine,
    payload)``; nothing for local mail. Runs inside the event's write transaction (reads see
    the change); reads only the database and ``directory.json``.

    :param row: the message ``message_id`` as stored, when the caller has it (the row a send
        is storing: no query); read from ``conn`` otherwise."""
    if row is None:
        row = conn.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
        if row is None:
            return
    if kind == "sent" and _ARRIVED in (row["metadata"] or ""):
        return  # arrived from another machine (metadata.machines.origin): it is not sent on
    meta = _meta(row)
    try:
        own = machine_name(config)
    except ValueError:  # a bad AGENT_LINK_MACHINE: health says so; mail stays on this machine meanwhile
        return
    origin = (meta.get("machines") or {}).get("origin")
    if kind == "sent":
        target = None if origin else _sent_to_machine(row, meta, conn, config)  # arrived from another machine: not sent on
        if target and target != own:
            yield row["id"], target, {"type": "message", "message": message_record(row, own, meta)}
    elif kind == "resolved" and origin and origin != own:
        res = conn.execute("SELECT * FROM resolutions WHERE message_id = ?", (message_id,)).fetchone()
        if res is None:
            return
        reply_row = conn.execute("SELECT * FROM messages WHERE id = ?", (res["reply_message_id"],)).fetchone() if res["reply_message_id"] else None
        yield f"{message_id}.resolved", origin, {
            "type": "resolution", "messageId": message_id, "kind": res["kind"], "by": res["by_addr"],
            "reason": res["reason"], "reply": message_record(reply_row, own) if reply_row is not None else None, "origin": own,
        }
    elif kind == "delivered" and origin and origin != own:
        yield f"{message_id}.delivered", origin, {
            "type": "delivered", "messageId": message_id, "via": data.get("via"), "origin": own,
        }


def _sent_to_machine(row: sqlite3.Row, meta: Mapping[str, Any], conn: sqlite3.Connection, config: Any) -> str | None:
    """The machine a message sent here goes to: the one the send chose, the machine of the message a reply answers, the
    machine whose directory lists the recipient; None for local mail (also an answer that travels with its resolution)."""
    target = (meta.get("machines") or {}).get("to")
    if row["reply_to"]:
        answered = conn.execute("SELECT * FROM messages WHERE id = ?", (row["reply_to"],)).fetchone()
        res = conn.execute("SELECT reply_message_id FROM resolutions WHERE message_id = ?", (row["reply_to"],)).fetchone()
        if res is not None and res["reply_message_id"] == row["id"]:
            return None  # the answer that resolves it travels with the resolution record
        answered_origin = (_meta(answered).get("machines") or {}).get("origin") if answered is not None else None
        if answered_origin and answered is not None and row["recipient"] == answered["from_addr"]:
            target = target or answered_origin
    if not target:
        target = machine_of(config, row["recipient"])  # no query for local mail
        if target and served_here(conn, config, row["recipient"]):
            target = None  # served on this machine too: local mail
    return target


#: messages forward_stranded looks at per address and heartbeat, oldest first
FORWARD_LIMIT = 500


def forward_stranded(app: Any, where: Mapping[str, str], addresses: Iterable[str]) -> int:
    """Send on to their machine the messages this machine stored as local mail to a plain
    address another machine lists now (``where``:
    :func:`~agent_link_machines.common.remote_addresses`), for each of ``addresses``: mail
    sent before this machine's relay first copied the directory, or before that machine
    served the address. Only a message nobody took yet is sent on: stored here by a send here
    (no ``machines`` metadata), still queued, unresolved, not expired, never sent on before, to
    an address not served on this machine too (local mail wins, as at send time). Its record
    goes to the outbox and the machine it went to into ``machines_forwarded`` (which
    :func:`sent_to` reads as it reads ``metadata.machines.to``), in
    one write transaction; the caller wakes the outbox loop. Addresses of a harness of this
    machine are left alone (its sessions are pinned at send time).

    :returns: how many messages were sent on.
    :raises AgentLinkError: the database cannot be written.
    """
    from agent_link_core.addresses import address_scheme
    from agent_link_presence.table import served_row

    own = machine_name(app.config)
    moved = 0
    with app.store.write() as conn:
        for address in addresses:
            target = where.get(address)
            if not target or target == own or address_scheme(address) in app.harnesses:
                continue
            if served_row(conn, address) is not None:
                continue
            for row in app.mailbox.open_for(address, FORWARD_LIMIT, undelivered_only=True):
                meta = _meta(row)
                # sent on before: its outbox row may be gone (kept a day), its forwarded row is not
                if "machines" in meta or conn.execute(
                        "SELECT 1 FROM machines_outbox WHERE record_id = ? UNION ALL SELECT 1 FROM machines_forwarded WHERE message_id = ?",
                        (row["id"], row["id"])).fetchone():
                    continue
                state = app.mailbox.state(row)
                if state.delivery != "queued" or state.resolution is not None or state.status == "expired":
                    continue
                payload = {"type": "message", "message": message_record(row, own, meta)}
                conn.execute("INSERT OR IGNORE INTO machines_forwarded (message_id, machine, at) VALUES (?, ?, ?)",
                             (row["id"], target, now_ms()))
                conn.execute("INSERT OR IGNORE INTO machines_outbox (record_id, machine, payload, created_at) VALUES (?, ?, ?, ?)",
                             (row["id"], target, json.dumps(payload, ensure_ascii=False), now_ms()))
                moved += 1
                log.info("message %s to %s, stored here before %s listed it, sent on to it", row["id"], address, target)
    return moved


def _outgoing(record: Mapping[str, Any], unverified: bool = False) -> OutgoingMessage:
    """The stored form of a ``message`` record: the sender as its own machine attested it
    (with ``unverified``: never verified, whatever the record says)."""
    sender = Caller(address=record["from"], source=str(record.get("source") or "fallback"),
                    proven=True if record.get("verified") and not unverified else None)
    return OutgoingMessage(
        id=record["id"], sender=sender, to=record["to"], recipient=record["recipient"], body=record["body"],
        anticipation=record["anticipation"], reply_by_ms=record.get("replyBy"), reply_to=record.get("replyTo"),
        # "machines" first: outgoing_records recognises mail that arrived by its start (_ARRIVED)
        metadata={"machines": {"origin": record["origin"]}, **{k: v for k, v in (record.get("metadata") or {}).items() if k != "machines"}},
    )


def store_record(app: Any, payload: Mapping[str, Any], unverified: bool = False) -> tuple[str, list[Any]]:
    """Write one record from another machine into this machine's mailbox, at most once: a
    record already applied changes nothing. With ``unverified`` (a record whose publisher the
    engine does not attest: the legacy subject) the senders of the messages it carries are
    stored unverified. The relay calls it inside one write transaction
    per fetched batch (each record a savepoint of it); it pushes nothing: the caller offers the
    returned rows to their recipients' harnesses after its commit, as a local send does.

    :returns: ``(outcome, rows to push)``; outcome ``stored``, ``resolved``, ``delivered``,
        ``duplicate`` or ``ignored``; rows are new messages (``sqlite3.Row``) for their
        recipient's harness.
    :raises AgentLinkError: when the database cannot be written (the record is not
        acknowledged and comes again).
    """
    from agent_link_core.errors import AgentLinkError

    kind = payload.get("type")
    if kind == "message":
        record = payload["message"]
        if app.mailbox.get_row(record["id"]) is not None:
            return "duplicate", []
        message = _outgoing(record, unverified)
        # a role's procedure is the holder's machine's, this one's: not what the sender attached
        attach_role_procedure(app, message.metadata)
        row, created = app.mailbox.store_message(message)
        return ("stored", [row]) if created else ("duplicate", [])
    if kind == "resolution":
        reply = payload.get("reply")
        target = app.mailbox.get_row(payload["messageId"])
        if target is None or app.mailbox.state(target).resolution is not None:
            if reply is None or app.mailbox.get_row(reply["id"]) is not None:
                return "duplicate", []
            row, _ = app.mailbox.store_message(_outgoing(reply, unverified))
            return "stored", [row]
        by = Caller(address=str(payload["by"]), source=str((reply or {}).get("source") or "fallback"),
                    proven=True if (reply or {}).get("verified") and not unverified else None)
        stored_reply = _outgoing(reply, unverified) if reply is not None and app.mailbox.get_row(reply["id"]) is None else None
        try:
            _, reply_row = app.mailbox.resolve(target["id"], by, str(payload["kind"]), reason=payload.get("reason"), reply=stored_reply)
        except AgentLinkError as exc:
            if exc.code not in ("already_resolved", "wrong_recipient"):
                raise
            # resolved here meanwhile, or handed to another recipient: keep the answer as mail
            log.warning("agent-link: resolution of %s from %s not applied: %s", target["id"], payload.get("origin"), exc.message)
            if stored_reply is None:
                return "duplicate", []
            reply_row, _ = app.mailbox.store_message(stored_reply)
        return "resolved", [reply_row] if reply_row is not None else []
    if kind == "delivered":
        if app.mailbox.get_row(payload["messageId"]) is None:
            return "ignored", []
        marked = app.mailbox.mark_delivered(payload["messageId"], f"machine:{payload.get('origin')}",
                                            {"machine": payload.get("origin"), "via": payload.get("via")})
        return ("delivered" if marked else "duplicate"), []
    log.warning("agent-link: unknown record type %r from %s ignored", kind, payload.get("origin"))
    return "ignored", []


class _HeldEvents:
    """The mailbox's hooks while :func:`apply_entries` applies a batch: ``agent_link_on_event`` (what
    follows a commit: the receipts plugin's JSONL line, an outbox wake-up) is held in
    :attr:`held` instead of called, everything else goes to ``hooks``. The mailbox announces
    a change as its own write ends, which inside the batch's transaction is a savepoint's
    release, not a commit."""

    def __init__(self, hooks: Any) -> None:
        self.hooks = hooks
        self.held: list[Any] = []

    def call(self, hook_name: str, **kwargs: Any) -> Any:
        if hook_name != "agent_link_on_event":
            return self.hooks.call(hook_name, **kwargs)
        self.held.append(kwargs["event"])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.hooks, name)


def apply_entries(app: Any, entries: list[tuple[Any, list[dict[str, Any]]]], legacy: bool = False) -> tuple[
        list[tuple[Any, list[Any]]], list[tuple[Any, list[Any]]], int]:
    """Store the records of a fetched batch (``[(engine message, [record, ...]), ...]``) in one
    write transaction, each record a savepoint of it, so one that fails leaves the others
    (:func:`store_record`; ``legacy``: its ``unverified``). The ``agent_link_on_event``
    observers hear of the changes once the transaction commits, of those it kept only: a
    record rolled back, or a commit that fails, announces nothing (a receipt log line is
    written once, when the record that comes again is stored).

    :returns: ``(stored, failed, records applied)``: the engine messages whose records were
        all stored, and the others, each with the rows its committed records stored (to push).
        A commit that fails stores none: every message is in ``failed``, with no rows.
    """
    mailbox = app.mailbox
    hooks = _HeldEvents(mailbox.hooks)
    stored: list[tuple[Any, list[Any]]] = []
    failed: list[tuple[Any, list[Any]]] = []
    applied = 0
    mailbox.hooks = hooks
    try:
        with app.store.write():
            for msg, records in entries:
                rows: list[Any] = []
                complete = True
                for payload in records:
                    mark = len(hooks.held)
                    try:
                        with app.store.write():
                            rows += store_record(app, payload, unverified=legacy)[1]
                    except Exception:  # not stored (a bad record, a refusal): not acknowledged, it comes again
                        del hooks.held[mark:]  # rolled back with its savepoint
                        log.exception("agent-link: record %s not applied; the engine delivers it again", msg.header and msg.header.get("Nats-Msg-Id"))
                        complete = False
                (stored if complete else failed).append((msg, rows))
                if complete:
                    applied += len(records)
    except Exception as exc:  # busy, read-only, I/O: nothing of the batch was committed
        log.warning("agent-link: a batch of %d engine messages was not stored (%s); the engine delivers it again", len(entries), exc)
        return [], [(msg, []) for msg, _ in entries], 0
    finally:
        mailbox.hooks = hooks.hooks
    for event in hooks.held:
        hooks.hooks.call("agent_link_on_event", event=event)
    return stored, failed, applied


def answers_sent(app: Any, record: dict[str, Any], publisher: str) -> bool:
    """Whether machine ``publisher`` may publish ``record`` here: a ``resolution`` or
    ``delivered`` record only of a message this machine sent to that very machine
    (:func:`sent_to`, or sent on there by :func:`forward_stranded`:
    ``machines_forwarded``); any other record type, yes."""
    if record.get("type") not in ("resolution", "delivered"):
        return True
    message_id = record.get("messageId")
    return sent_to(app, message_id, publisher) or app.store.conn.execute(
        "SELECT 1 FROM machines_forwarded WHERE message_id = ? AND machine = ?", (message_id, publisher)).fetchone() is not None


def sent_to(app: Any, message_id: Any, machine: str) -> bool:
    """Whether this machine sent the message ``message_id`` to ``machine``: its outbox holds
    the message's record for that machine (kept a day after it was sent), or the message is
    stored pinned to it (``metadata.machines.to``), or it is a reply to mail that came from
    ``machine``, addressed to that mail's sender."""
    if not isinstance(message_id, str):
        return False
    conn = app.store.conn
    if conn.execute("SELECT 1 FROM machines_outbox WHERE record_id = ? AND machine = ?", (message_id, machine)).fetchone():
        return True
    row = app.mailbox.get_row(message_id)
    if row is None:
        return False
    if (_meta(row).get("machines") or {}).get("to") == machine:
        return True
    # a reply to mail that came from ``machine``, addressed to its sender, went there (with the
    # resolution record when it resolves that mail: outgoing_records)
    answered = app.mailbox.get_row(row["reply_to"]) if row["reply_to"] else None
    return (answered is not None and row["recipient"] == answered["from_addr"]
            and (_meta(answered).get("machines") or {}).get("origin") == machine)


def claimed_origins(record: dict[str, Any]) -> set[str]:
    """Every machine a record names as its origin (the record's, its message's, its reply's);
    each must be the machine that published it (:meth:`agent_link_machines.relay.Relay.apply_batch`)."""
    parts = (record, record.get("message"), record.get("reply"))
    return {str(p["origin"]) for p in parts if isinstance(p, dict) and p.get("origin") is not None}


def records_of(data: bytes) -> list[dict[str, Any]] | None:
    """The records of one engine message: itself, or a pack's ``records``; None when it is
    not a JSON object, or a pack whose records are not all objects."""
    try:
        payload = json.loads(data)
    except ValueError:
        return None
    if not isinstance(payload, dict):
        return None
    if payload.get("type") != "batch":
        return [payload]
    records = payload.get("records")
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        return None
    return records
