"""Sending and answering: store a message, push it to its recipient's harness, resolve a message with a reply; one :class:`Outbox`
per App (``app.outbox``). A send has exactly one outcome (``delivered``, ``accepted``, ``queued``, ``rejected`` or ``unknown``;
docs/delivery-states.md)."""

from __future__ import annotations

import json
from collections.abc import Mapping

from agent_link_core.envelope import MAX_ENVELOPE_BODY_CHARS, MAX_ESCAPED_CHARS, escape_text
from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.harness import Delivery, Harness, acall_harness, delivery_refused, harness_fault
from agent_link_core.identity import prove_sender
from agent_link_core.lazy import LazyLogger, Struct, field
from agent_link_core.mailbox import MessageState, check_body, check_labels, differing_fields, idempotency_refusal, iso, new_message_id
from agent_link_core.addresses import MESSAGE_ID_WORDS
from agent_link_core.model import Caller, address_scheme, is_address, is_ulid
from agent_link_core.records import OutgoingMessage, SendContext
from agent_link_core.store import now_ms

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any
    from agent_link_core.app import App

log = LazyLogger("agent_link_core.app")  # the App's operations log under its name

#: What status says of a push the host accepted but has not shown the model yet.
ACCEPTED_NOTE = "accepted, awaiting the session"
#: the event of a push left to a running wait (``agent_link_held_messages``), which pushes it if it ends without taking it
HELD_EVENT = "held_for_wait"


class SendOutcome(Struct):
    """What a send did: the stored row as a dict, whether it is new, the push attempt, warnings."""

    message: dict[str, Any]
    created: bool
    delivery: Delivery | None
    warnings: list[dict[str, Any]] = field(default_factory=list)
    via: str | None = None
    result_fields: dict[str, Any] = field(default_factory=dict)
    address_warning: dict[str, Any] | None = None  # :meth:`Outbox.unseen_address`'s
    # the stored row, and its state when the send knows it: message_summary reads neither again
    row: Any = None
    state: MessageState | None = None


#: hook budgets (AGENT_LINK_HOOK_TIMEOUT_MS) a push may take before its outcome counts as unknown
PUSH_BUDGETS = 4


class Outbox:
    """Sends, replies and pushes of one App (``app``: its mailbox, hooks and harnesses)."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.mailbox, self.hooks, self.store, self.harnesses = app.mailbox, app.hooks, app.store, app.harnesses

    async def send(
        self, *, caller: Caller, to: str, body: str, anticipation: str | None = None, reply_by: str | None = None,
        wait_for_reply: bool = False, reply_to: str | None = None, message_id: str | None = None,
        tool: str = "message_agent", arguments: Mapping[str, Any] | None = None, options: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None, allow_archived: bool = False, require_known: bool = False,
        metadata: Mapping[str, Any] | None = None, target: tuple[str, str | None, dict[str, Any]] | None = None,
    ) -> SendOutcome:
        """Store a message, then try to push it to its recipient (labels: docs/behaviour.md §4). A ``reply_to`` from that message's
        recipient resolves it (§8); ``message_id`` makes the send idempotent (the same content answers the first outcome).

        :param require_known: refuse (``not_found``) a plain address no process is known to serve (:meth:`unseen_address`).
        :param metadata: stored with the message (its ``fingerprint`` counts for idempotency).
        :param target: :meth:`~agent_link_core.directory.Directory.target_address`'s answer for ``to`` and ``caller``, if known.
        :returns: the outcome; ``created`` False for a resend, or when ``agent_link_before_store`` answers a stored message's id.
        :raises AgentLinkError: ``invalid_arguments``, ``body_too_large``, ``not_found``, ``ambiguous``, ``archived``,
            or what a ``before_send`` or ``before_store`` hook refuses with.
        """
        now = now_ms()
        clean = check_body(body)
        label, reply_by_ms = check_labels(anticipation, reply_by, wait_for_reply, now)
        if isinstance(message_id, str) and is_ulid(message_id.upper()):
            message_id = message_id.upper()
        if message_id is not None and not is_ulid(message_id):
            raise invalid_arguments([{"path": "messageId", "rule": "pattern", "expected": MESSAGE_ID_WORDS}])
        caller, proof_warnings = await prove_sender(self.app, asked := caller)
        proof_warnings += escaped_size_warnings(clean)
        answered = self.mailbox.require(reply_to) if reply_to else None
        reply_to = answered["id"] if answered is not None else None
        target_meta: dict[str, Any]
        earlier = self.mailbox.get_row(message_id) if message_id is not None else None  # a resend: its first row
        if earlier is not None:
            recipient, via, target_meta = earlier["recipient"], None, {}
        else:
            recipient, via, target_meta = (target if target and caller.address == asked.address
                                           else await self.app.directory.target_address(to, caller, allow_archived=allow_archived))
        # the address first: a typo is refused as one even when the same text went there before
        unseen = self.unseen_address(recipient, require_known) if earlier is None else None
        if via:
            target_meta["via"] = via
        target_meta.update(metadata or {})
        msg = OutgoingMessage(
            id=message_id or new_message_id(), sender=caller, to=to if is_address(to) else recipient,
            recipient=recipient, body=clean, anticipation=label, reply_by_ms=reply_by_ms, reply_to=reply_to, metadata=target_meta,
        )
        is_reply = answered is not None and answered["recipient"] == caller.address
        context = SendContext(tool, dict(arguments or {}), via, is_reply, dict(meta or {}), chosen_id=message_id is not None)
        warnings = proof_warnings + self.hooks.before_send(msg, context)

        def guard() -> str | None:
            # under the write lock (Mailbox.store_message), so concurrent sends count too; a stored id is no new message
            if earlier is not None or (message_id is not None and self.store.conn.execute(
                    "SELECT 1 FROM messages WHERE id = ?", (message_id,)).fetchone()):
                return None
            return self.hooks.before_store(msg, context, self.store.conn)

        row: Any  # the stored row (the answer of a resolution that sends one is never None)
        if answered is not None and is_reply and self.mailbox.state(answered).resolution is None:
            # a reply that resolves is guarded too (answers to answers are the loop a guard stops)
            if (repeated := guard()) is not None:
                row, created = self.mailbox.stored(repeated), False
            else:
                _, row = self.mailbox.resolve(answered["id"], caller, "reply", reply=msg, result=context.result)
                created = True
        else:
            row, created = self.mailbox.store_message(msg, context.result, guard)
        delivery = await self.push(row, options or {}) if created else None
        # a push may have changed the row (delivered, accepted): read it again then
        state = self.mailbox.new_state(row) if created and delivery is None else None
        if delivery is not None:
            row = self.mailbox.stored(row["id"])
        return SendOutcome(self.mailbox.row_dict(row), created, delivery, warnings, via, context.result, unseen, row, state)

    def unseen_address(self, recipient: str, require_known: bool = False) -> dict[str, Any] | None:
        """The warning a send to ``recipient`` would carry when it is a plain address (no harness owns its scheme, not
        ``role:``, not served elsewhere) no process is known to serve (``agent_link_check_recipient``), else None.

        :raises AgentLinkError: ``not_found`` with ``require_known``: a plugin's refusal, or any plain address when no plugin answers.
        """
        scheme = address_scheme(recipient)
        if scheme in self.harnesses or scheme == "role" or not is_address(recipient) or recipient in self.app.directory.served_elsewhere:
            return None
        verdict = self.hooks.call("agent_link_check_recipient", address=recipient, require_known=require_known)
        if verdict is None:
            if require_known:
                raise AgentLinkError(
                    "not_found", f"No loaded plugin records which plain addresses are served, so requireKnown cannot accept {recipient}.",
                    {"query": recipient, "candidates": []},
                    hint="Install agent-link-presence, or enable it (AGENT_LINK_DISABLE_PLUGINS): it records the addresses processes serve; "
                         "or send without requireKnown to leave the message for whoever reads it later.")
            return None
        return verdict.get("warning")

    async def push(self, row: Any, options: Mapping[str, Any]) -> Delivery | None:
        """Offer a stored message to its recipient's harness; record delivery on evidence. A message a running wait of the
        recipient is about to return (a plugin's ``agent_link_held_messages``) is left to that wait (:data:`HELD_EVENT`)."""
        harness = self.harnesses.get(address_scheme(row["recipient"]))
        if harness is None:
            return None
        if '"elsewhere"' in (row["metadata"] or "") and json.loads(row["metadata"]).get("elsewhere") is True:
            return Delivery()  # served elsewhere (Directory.elsewhere): the plugin that claimed it carries it
        if row["id"] in self.hooks.held_messages(row["recipient"], [row]):
            self.mailbox.record_event(row["id"], HELD_EVENT, row["recipient"], None, {})
            return Delivery(state="held_for_wait", note="the recipient's running wait returns it")
        # a wait marks what it took delivered before it ends its hold: a mark now means a wait returned it
        if self.mailbox.get_row(row["id"])["delivered_via"] is not None:
            return Delivery(state="delivered", note="already delivered (a wait of the recipient returned it)")
        envelope = self.mailbox.envelope(row)
        limit = harness.output_budget.push_bytes if harness.output_budget is not None else None
        size = len(envelope.encode("utf-8"))
        notice = self.hooks.push_notice(self.mailbox.row_dict(row), size, limit) if limit is not None and size > limit else None
        bound_s = PUSH_BUDGETS * self.hooks.boundary.timeout_ms / 1000 or None

        def timed_out() -> Delivery:  # remembered as unknown: never pushed again blindly
            harness_fault(self.hooks, harness, "deliver", f"did not finish the push within {bound_s:g} s")
            return Delivery(unknown=True, warnings=[{
                "code": "push_timed_out",
                "message": f"{harness.name} did not finish the push within {bound_s:g} s; whether it arrived is unknown.",
            }])

        try:  # the row is stored: a failure (SystemExit too) is reported, the message stays queued
            delivery = await acall_harness(
                self.hooks, harness, "deliver",
                lambda: harness.deliver(self.mailbox.row_dict(row), envelope, options) if notice is None
                else self._announce(harness, row, size, notice, options),
                bound_s=bound_s, check=delivery_refused, on_timeout=timed_out)
        except AgentLinkError as exc:
            return Delivery(warnings=[{"code": exc.code, "message": exc.message, "details": exc.details}])
        if delivery is None:
            return Delivery(warnings=[{"code": "internal_error", "message": f"{harness.name} could not push (see `agent-link plugins`)"}])
        if delivery.delivered and delivery.via:
            self.mailbox.mark_delivered(row["id"], delivery.via, delivery.evidence)
        elif delivery.accepted:  # remembered so nothing pushes it again; evidence comes later
            self.mailbox.record_event(row["id"], "delivery_accepted", row["recipient"], None,
                                      {**delivery.evidence, "note": delivery.note or ACCEPTED_NOTE})
        elif delivery.unknown:  # a resend with the same id then reports "unknown", not pushed blindly
            self.mailbox.record_event(row["id"], "delivery_unknown", row["recipient"], None, delivery.evidence)
        elif self.mailbox.push_outcome(row["id"]) == "unknown":  # a retry proved the earlier push absent
            self.mailbox.record_event(row["id"], "delivery_settled", row["recipient"], None, delivery.evidence)
        return delivery

    async def _announce(self, harness: Harness, row: Any, size: int, notice: str, options: Mapping[str, Any]) -> Delivery:
        """Push ``notice`` (``agent_link_push_notice``) instead of an envelope the host would cut (stays queued)."""
        pushed = await harness.deliver(self.mailbox.row_dict(row), notice, options)
        if pushed.delivered:
            self.mailbox.record_event(row["id"], "announced", row["recipient"], pushed.via, {**pushed.evidence, "bytes": size})
        warning = {"code": "too_large_to_push",
                   "message": f"The message ({size} bytes) is larger than the recipient's host shows in one piece; "
                              "it is announced instead of pushed, and the recipient reads it from its inbox in pages.",
                   "details": {"bytes": size, "announced": pushed.delivered}}
        return Delivery(state="announced" if pushed.delivered else pushed.state, fields=pushed.fields,
                        warnings=[warning, *pushed.warnings], unknown=pushed.unknown, retryable=pushed.retryable)

    async def refresh_delivery(self, message_id: str) -> bool:
        """Record late evidence of an ``accepted`` or ``unknown`` push from the recipient's harness (never pushes); True if found."""
        row = self.mailbox.get_row(message_id)
        if row is None or row["first_delivered_at"] is not None or self.mailbox.push_outcome(message_id) not in ("accepted", "unknown"):
            return False
        harness = self.harnesses.get(address_scheme(row["recipient"]))
        if harness is None:
            return False
        try:  # a failed check (the plugin's fault) proves nothing
            found = await acall_harness(self.hooks, harness, "recheck", lambda: harness.recheck(self.mailbox.row_dict(row)), check=delivery_refused)
        except AgentLinkError as exc:
            log.info("harness %s could not recheck %s: %s", harness.name, message_id, exc.code)
            return False
        if found is None or not found.delivered or not found.via:
            return False
        return self.mailbox.mark_delivered(message_id, found.via, found.evidence)

    async def reply(
        self, *, caller: Caller, message_id: str, resolution: str = "reply", message: str | None = None,
        anticipation: str | None = None, reply_by: str | None = None, arguments: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None, metadata: Mapping[str, Any] | None = None, reply_id: str | None = None,
    ) -> dict[str, Any]:
        """Resolve a message addressed to the caller, sending ``message`` back to its sender (``reply`` and ``decline`` need it,
        ``done`` takes an optional note; docs/behaviour.md §8). ``metadata`` is stored with the note (as :meth:`send`'s);
        ``reply_id`` (a ULID) makes a retry safe (the first result, ``duplicate: true``).

        :raises AgentLinkError: ``not_found``, ``wrong_recipient``, ``already_resolved``, ``invalid_arguments`` (rule
            ``idempotency`` for a reused ``reply_id``), ``body_too_large``, ``no_current_session``.
        """
        self.app.require_caller(caller)
        row = self.mailbox.require(message_id)
        message_id = row["id"]  # ids are case-insensitive; the stored form is canonical
        if resolution in ("reply", "decline") and (message is None or not message.strip()):
            what = "a reason" if resolution == "decline" else "the reply text"
            raise invalid_arguments([{"path": "message", "rule": "required", "expected": f"{what} for resolution {resolution}"}])
        reply_msg = None
        caller, warnings = await prove_sender(self.app, caller)
        context = SendContext("reply_agent_link_message", dict(arguments or {}), None, True, dict(meta or {}))
        if (message is None or not message.strip()) and (anticipation is not None or reply_by is not None):
            raise invalid_arguments([{"path": "anticipation" if anticipation is not None else "replyBy", "rule": "requires_message",
                                      "expected": "a note in message, since labels describe the note sent back"}])
        if message is not None and message.strip():
            label, reply_by_ms = check_labels(anticipation, reply_by, False, now_ms())
            reply_msg = OutgoingMessage(
                id=reply_id or new_message_id(), sender=caller, to=row["from_addr"], recipient=row["from_addr"],
                body=check_body(message), anticipation=label, reply_by_ms=reply_by_ms, reply_to=message_id,
                metadata={**(metadata or {}), "resolution": resolution},
            )
        if reply_id is not None and self._answered_before(caller, row, reply_id, resolution, reply_msg):
            return {**self._reply_result(row, self.mailbox.get_row(reply_id), None, context.result), "duplicate": True,
                    **({"warnings": warnings} if warnings else {})}
        if reply_msg is not None and caller.address == row["recipient"]:
            warnings += self.hooks.before_send(reply_msg, context)
        _, reply_row = self.mailbox.resolve(  # the reason as sanitized for the note
            message_id, caller, resolution, reason=reply_msg.body if reply_msg is not None and resolution != "reply" else None,
            reply=reply_msg, result=context.result,
        )
        delivery = await self.push(reply_row, {}) if reply_row is not None else None
        if reply_row is not None:
            reply_row = self.mailbox.get_row(reply_row["id"])
        out = self._reply_result(row, reply_row, delivery, context.result)
        if reply_id is not None:
            out["duplicate"] = False
        warnings += delivery.warnings if delivery is not None else []
        if warnings:
            out["warnings"] = warnings
        return out

    def _reply_result(self, row: Any, reply_row: Any, delivery: Delivery | None, extra: Mapping[str, Any]) -> dict[str, Any]:
        """What :meth:`reply` returns for the resolved message ``row`` and its answer ``reply_row`` (or None)."""
        state = self.mailbox.state(self.mailbox.stored(row["id"]))
        res = state.resolution or {}
        return {
            "messageId": reply_row["id"] if reply_row is not None else None, "replyToMessageId": row["id"],
            "target": {"address": row["from_addr"], "harness": address_scheme(row["from_addr"])},
            "delivery": "none" if reply_row is None else "delivered" if (delivery is not None and delivery.delivered)
            or reply_row["first_delivered_at"] is not None else "queued",
            "resolution": state.resolution, "status": state.status, "late": bool(res.get("late")),
            "anticipation": reply_row["anticipation"] if reply_row is not None else None, **extra,
        }

    def _answered_before(self, caller: Caller, row: Any, reply_id: str, kind: str, reply: OutgoingMessage | None) -> bool:
        """Whether an earlier call under ``reply_id`` resolved ``row`` as this one asks; ``invalid_arguments`` (``idempotency``) if not."""
        stored = self.mailbox.get_row(reply_id)
        resolution = self.mailbox.state(row).resolution
        if stored is None:
            # a done without a note stores no message: the same resolution by the same caller is a retry
            return (reply is None and resolution is not None and resolution["kind"] == kind and resolution["by"] == caller.address
                    and resolution["replyMessageId"] is None)
        differs = ["message"] if reply is None else differing_fields(stored, reply)
        earlier = json.loads(stored["metadata"] or "{}").get("resolution")
        if earlier != kind:
            differs.insert(0, "resolution")
        if not differs and (resolution is None or resolution["replyMessageId"] != reply_id):
            differs = ["replyToMessageId"]  # the same words stored as another message's answer
        if differs:
            raise idempotency_refusal(reply_id, differs, "replyMessageId", "the same answer as the first call with this id (a new answer needs a new id)")
        return True


def escaped_size_warnings(body: str) -> list[dict[str, Any]]:
    """``[body_escapes_large]`` when ``body`` escapes to more than :data:`~agent_link_core.envelope.MAX_ESCAPED_CHARS`, else ``[]``."""
    escaped = len(escape_text(body, cap=MAX_ENVELOPE_BODY_CHARS))
    if escaped <= MAX_ESCAPED_CHARS:
        return []
    return [{"code": "body_escapes_large",
             "message": f"The body escapes to {escaped} characters in its envelope (characters such as < and & take several), "
                        f"more than the {MAX_ESCAPED_CHARS} one read may show: nothing is cut, but the recipient may read it in pages.",
             "details": {"bodyBytes": len(body.encode("utf-8")), "escapedChars": escaped, "limitChars": MAX_ESCAPED_CHARS}}]


def message_summary(app: App, outcome: SendOutcome) -> dict[str, Any]:
    """The common result fields of a send (message_agent, CLI send)."""
    row = outcome.row
    state = outcome.state if outcome.state is not None else app.mailbox.state(row)
    delivery = outcome.delivery
    out: dict[str, Any] = {
        "messageId": row["id"], "to": row["recipient"], "harness": address_scheme(row["recipient"]),
        "delivery": state.delivery if state.delivery != "acknowledged" else "delivered", "deliveredVia": row["delivered_via"],
        "deliveryState": delivery.state if delivery is not None else ("delivered" if row["first_delivered_at"] else "queued"),
        "anticipation": row["anticipation"], "replyBy": iso(row["reply_by"]) if row["reply_by"] else None, "inReplyTo": row["reply_to"],
        "messageStatus": state.status, "duplicate": not outcome.created, "via": outcome.via,
    }
    if state.delivery_note:
        out["deliveryNote"] = state.delivery_note
    out.update(outcome.result_fields)
    if delivery is not None:
        out.update(delivery.fields)
        if delivery.unknown:
            out["deliveryState"] = "unknown"
    warnings = list(outcome.warnings) + (list(delivery.warnings) if delivery is not None else [])
    if outcome.address_warning is not None:
        warnings.append(outcome.address_warning)
    if warnings:
        out["warnings"] = warnings
    return out
