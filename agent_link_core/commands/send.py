"""``agent-link send``: send a message with one honest outcome (:func:`send_reliably`, also called from Python)."""

from __future__ import annotations

import json
import re
import sys

from agent_link_core.cli_run import (EXIT_UNDELIVERED, EXIT_UNKNOWN, FROM, JSON, NDJSON, argument, command, declared_names, echo, emit,
                                     fail, get_app, message_text, option, run_async, show_then_mark, usage_error, who_am_i)
from agent_link_core.addresses import MESSAGE_ID_WORDS
from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.lazy import Struct, field
from agent_link_core.mailbox import iso, parse_iso_ms, ulid_of_uuid
from agent_link_core.model import Caller, address_scheme, is_address, is_ulid
from agent_link_core.store import now_ms

MAX_TTL_MS = 2_592_000_000  # --ttl-ms at most (30 days): the time it gives up at stays a date every reader can show
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any
    from agent_link_core.app import App


@command(
    argument("target"),
    argument("text", required=False),
    option("--file", "file", kind="file", help="Read the text from this file (at most 64 KiB)."),
    option("--message-id", help="A ULID or UUID making retries idempotent (same id + same message = no resend)."),
    option("--ttl-ms", kind="whole", low=1, high=MAX_TTL_MS, help="Give up pushing this long after the first attempt (at most 30 days)."),
    option("--reply-by", help="Deadline for an answer (ISO 8601 with a zone); implies --anticipation reply."),
    option("--anticipation", kind="choice", choices=("reply", "action", "fyi")),
    option("--retry-count", kind="whole", low=0, high=20, default=0, show_default=True),
    option("--retry-delay-ms", kind="whole", low=0, high=60000, default=500, show_default=True),
    option("--retry-backoff", kind="finite", low=1.0, high=10.0, default=2.0, show_default=True),
    option("--retry-jitter", kind="finite", low=0.0, high=1.0, default=0.1, show_default=True),
    option("--retry-unknown", flag=True, help="Push again a message whose earlier outcome was unknown."),
    option("--require-known", flag=True, help="Refuse a plain address no process is known to serve (typo guard; without the presence plugin: every plain address)."),
    option("--require-delivered", flag=True, help=f"Exit {EXIT_UNDELIVERED} unless the outcome is delivered."),
    option("--correlation-id", help="Your id tying this message to others (stored, part of the idempotency check)."),
    option("--from-project", "sender_project", help="The sender's project name (stored with the message)."),
    option("--label", "sender_label", help="A label for the sender, e.g. its role (stored with the message)."),
    FROM, JSON, NDJSON)
def send(ctx: Any, target: str, text: str | None, file: str | None, message_id: str | None, ttl_ms: int | None,
         reply_by: str | None, anticipation: str | None, retry_count: int,
         retry_delay_ms: int, retry_backoff: float, retry_jitter: float, retry_unknown: bool, require_known: bool,
         require_delivered: bool, correlation_id: str | None, sender_project: str | None, sender_label: str | None,
         from_address: str | None, as_json: bool, ndjson: bool, then: Any = None, **named: Any) -> None:
    """Send TEXT to TARGET: a contact alias, an address (harness:id, role:name), a form a plugin
    understands (e.g. an endpoint composite), or a bare session id. TEXT `-` reads stdin.

    The outcome is exactly one of delivered, accepted (the host took it and shows it
    later; never pushed again), queued, rejected, unknown.
    """
    # ``then``: a plugin option's part of the send (--wait: SendWait, plugins/waits/agent_link_waits/cli.py, has its methods);
    # ``envelope_format``: a plugin's --envelope (None: the core's own envelope)
    from agent_link_core.cli_text import address_error, cli_words

    body = message_text(text, file)
    if not target.strip():
        usage_error("TARGET is empty: give an address, a contact alias or a session id")
    # an address's shape (x:y, :y) that is none: refused, saying what an address is (other colons: plugins' composite targets)
    if re.fullmatch(r"([A-Za-z][A-Za-z0-9-]*)?:.*", target.strip()) and (problem := address_error(target.strip(), "to")):
        for error in problem.details["errors"]:
            if error["rule"] == "pattern":  # nor can it be an alias or a session id, which have no colon
                error["expected"] += " (a contact alias or a session id has no ':')"
        fail(problem)
    if reply_by is not None:
        parse_iso_ms(reply_by, "replyBy")  # the date's format is the first thing to get right
    if then is not None:
        anticipation = then.anticipation(anticipation)
    if anticipation is None and reply_by is not None:
        anticipation = "reply"
    app = get_app(ctx)
    me = who_am_i(app, from_address, named, reading=then is not None)  # --wait shows the answer: a read, checked before sending
    result = run_async(send_reliably(app, target, body, sender=me, message_id=message_id, ttl_ms=ttl_ms, reply_by=reply_by, anticipation=anticipation,
                                     retry_delays_ms=retry_delays(retry_count, retry_delay_ms, retry_backoff, retry_jitter), retry_unknown=retry_unknown,
                                     require_known=require_known, correlation_id=correlation_id, sender_project=sender_project, sender_label=sender_label,
                                     envelope_format=named.pop("envelope_format", None)),
                       inline=reaches_no_harness(app, target.strip(), me))
    data = result.to_dict()
    if then is not None:
        then.sent(app, me, result, data, target)
    names = declared_names(ctx)  # its options' names in what it says

    def warn() -> None:  # on stderr, with --json too: scripts read stdout; people still see warnings
        for w in data.get("warnings", []):
            echo(f"warning: {cli_words(w['message'], names)}", err=True)

    def human(d: dict[str, Any]) -> None:
        sent = "nothing sent" if d["outcome"] == "rejected" else d["messageId"]  # a refused --message-id names no message of this send
        echo(f"{d['outcome']}: {sent or 'nothing sent'} to {d['to'] or target}"
             + (" (already sent; nothing resent)" if d["duplicate"] else ""))
        if d.get("error"):
            echo(f"agent-link: {cli_words(d['error']['message'], names)} {cli_words(d['error'].get('hint') or '', names)}".rstrip(), err=True)
        warn()
        if then is not None:
            then.show(d)

    if as_json or ndjson:
        warn()
    # when the output is lost, say what stands, so nobody resends blindly
    done = f"the message {data['messageId']} was {data['outcome']} all the same (`agent-link status {data['messageId']}`)" if data["messageId"] else "nothing was sent"
    show_then_mark(lambda: emit(data, as_json, human, ndjson), then.mark if then is not None else lambda: None,
                   done + (then.unread if then is not None else ""))
    if require_delivered and result.outcome in ("accepted", "queued"):
        echo(f"agent-link send: not delivered ({result.outcome}; --require-delivered): the message stays sent, "
             f"`agent-link status {result.message_id}` follows it", err=True)
        sys.exit(EXIT_UNDELIVERED)
    sys.exit({"delivered": 0, "accepted": 0, "queued": 0, "unknown": EXIT_UNKNOWN}.get(result.outcome, 1))


def retry_delays(count: int, delay_ms: int, backoff: float, jitter: float) -> list[float]:
    """The delays (ms) before ``count`` retries: the first ``delay_ms``, each ``backoff`` (>= 1) times the last, plus or
    minus a random ``jitter`` fraction (0-1)."""
    if not count:
        return []  # a send without retries never imports random
    import random
    return [max(0.0, delay_ms * backoff**k * (1 + random.uniform(-jitter, jitter))) for k in range(count)]


class SendResult(Struct):
    """The outcome of :func:`send_reliably` (``delivered``, ``accepted``, ``queued``, ``rejected``, ``unknown``), the ULID
    (None when rejected before storing), ``duplicate`` (nothing resent), this call's push ``attempts``, a refusal's ``error``."""

    outcome: str
    message_id: str | None
    to: str | None
    duplicate: bool = False
    attempts: int = 0
    expires_at: str | None = None
    warnings: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, Any] | None = None
    fields: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object the CLI prints (``version`` 1)."""
        return {"version": 1, "outcome": self.outcome, "messageId": self.message_id, "to": self.to, "duplicate": self.duplicate,
                "attempts": self.attempts, "expiresAt": self.expires_at, **({"warnings": self.warnings} if self.warnings else {}),
                **({"error": self.error} if self.error else {}), **self.fields}


async def send_reliably(
    app: App, target: str, text: str, *, sender: Caller, message_id: str | None = None, ttl_ms: int | None = None,
    reply_by: str | None = None, anticipation: str | None = None, retry_delays_ms: Sequence[float] = (),
    retry_unknown: bool = False, require_known: bool = False, correlation_id: str | None = None,
    sender_project: str | None = None, sender_label: str | None = None, envelope_format: str | None = None,
) -> SendResult:
    """Send with one honest outcome, idempotent on ``message_id`` (``agent-link send``; README.md, "The command line",
    says what a resend with the same id does).

    ``target`` is what the CLI accepts (:meth:`~agent_link_core.directory.Directory.resolve_target`). ``message_id`` is a
    ULID or a UUID (any case; a UUID is stored as the ULID of its 128 bits and echoed as ``clientMessageId``); an
    ``unknown`` push is pushed again only with ``retry_unknown``. ``ttl_ms`` (ms) counts from the first attempt;
    ``retry_delays_ms`` (:func:`retry_delays`) space the pushes again of one that failed before the host accepted it.
    ``require_known``: :meth:`~agent_link_core.sending.Outbox.unseen_address`. ``envelope_format``: stored as the
    message's ``envelopeFormat``, for the plugin that offers it to check (``agent_link_before_send``) and render.

    :raises AgentLinkError: never for a refusal (that is ``rejected``); only for bad arguments (``invalid_arguments``) and
        an unusable state dir (``state_io_error``).
    """
    message_id, client_id, fingerprint = _idempotency(message_id, ttl_ms, envelope_format, {
        "correlationId": correlation_id, "senderProject": sender_project, "senderLabel": sender_label})
    try:
        resolved = await app.directory.resolve_target(target, sender)
        # a role stays the recipient: the send finds its holder and keeps the role (``via``)
        recipient = target.strip() if address_scheme(target.strip()) == "role" else resolved
        # the expiry is stored before the first push (the envelope the target reads says it); a resend never extends it
        first = message_id is None or app.mailbox.get_row(message_id) is None
        metadata = {"fingerprint": fingerprint, "expiresAt": now_ms() + ttl_ms if ttl_ms is not None and first else None,
                    "envelopeFormat": envelope_format}
        outcome = await app.outbox.send(caller=sender, to=recipient, body=text, anticipation=anticipation, reply_by=reply_by,
                                        message_id=message_id, tool="cli send", options={}, require_known=require_known,
                                        metadata={k: v for k, v in metadata.items() if v} or None)
    except AgentLinkError as exc:
        if exc.code == "invalid_arguments" and exc.details.get("errors", [{}])[0].get("rule") != "idempotency":
            raise
        return SendResult("rejected", message_id, None, error=exc.to_dict(), fields={"clientMessageId": client_id} if client_id else {})
    row, delivery = outcome.row, outcome.delivery
    expires_at = json.loads(row["metadata"] or "{}").get("expiresAt")
    result = SendResult("queued", row["id"], row["recipient"], duplicate=not outcome.created, expires_at=iso(expires_at),
                        attempts=1 if outcome.created and delivery is not None else 0,
                        warnings=list(outcome.warnings) + ([outcome.address_warning] if outcome.address_warning else []),
                        fields={k: v for k, v in fingerprint.items() if k in ("correlationId", "clientMessageId")})
    # A resend with the same id finishes what an earlier attempt left (it died after storing, or its push found the session
    # unable to take it): a queued one is offered again, an unknown one on request (the harness checks what landed).
    previous = app.mailbox.push_outcome(row["id"]) if not outcome.created else None
    if previous == "queued" or (previous == "unknown" and retry_unknown):
        if expires_at is not None and now_ms() > expires_at:
            return SendResult("rejected", row["id"], row["recipient"], duplicate=True, expires_at=result.expires_at,
                              error={"code": "invalid_arguments", "message": "The message's time to live has passed."})
        delivery = await app.outbox.push(row, {})
        result.attempts += 1
    delivery = await _pushed_again(app, row, delivery, result, retry_delays_ms, expires_at)
    result.outcome = app.mailbox.push_outcome(row["id"])
    if delivery is not None:
        result.warnings += delivery.warnings
        result.fields.update(delivery.fields)
    return result


def _idempotency(message_id: str | None, ttl_ms: int | None, envelope_format: str | None,
                 texts: dict[str, str | None]) -> tuple[str | None, str | None, dict[str, Any]]:
    """``(ULID stored under, the UUID given or None, the fingerprint a resend must repeat)``; ``invalid_arguments``."""
    if ttl_ms is not None and not 0 < ttl_ms <= MAX_TTL_MS:
        raise invalid_arguments([{"path": "ttlMs", "rule": "range", "expected": f"a positive number of ms, at most {MAX_TTL_MS} (30 days)"}])
    client_id = None
    if message_id is not None and not is_ulid(message_id.upper()):
        if (ulid := ulid_of_uuid(message_id)) is None:
            raise invalid_arguments([{"path": "messageId", "rule": "pattern", "expected": MESSAGE_ID_WORDS}])
        client_id, message_id = message_id.lower(), ulid
    for key, value in texts.items():
        if value is not None and not (0 < len(value.strip()) <= 256):
            raise invalid_arguments([{"path": key, "rule": "length", "expected": "1-256 characters, not only spaces"}])
    given = {"ttlMs": ttl_ms, **texts, "clientMessageId": client_id, "envelopeFormat": envelope_format}
    return message_id and message_id.upper(), client_id, {key: value for key, value in given.items() if value is not None}


async def _pushed_again(app: App, row: Any, delivery: Any, result: SendResult, delays_ms: Sequence[float],
                        expires_at: int | None) -> Any:
    """The last delivery of ``row``, pushed again after each of ``delays_ms`` while retryable and before ``expires_at``."""
    for delay in delays_ms:
        if delivery is None or not delivery.retryable or (expires_at is not None and now_ms() + delay > expires_at):
            break
        import asyncio  # only a retry waits: a plain send never imports it

        await asyncio.sleep(delay / 1000)
        delivery = await app.outbox.push(row, {})
        result.attempts += 1
    return delivery


def reaches_no_harness(app: App, target: str, sender: Caller) -> bool:
    """True when :func:`send_reliably` to the (stripped) ``target`` reaches no harness (a plain address no harness owns,
    from a sender no harness proves): it only stores, so it runs without an event loop (:func:`agent_link_core.boundary.run_inline`)."""
    if not is_address(target):
        return False
    scheme, owners = address_scheme(target), app.harnesses
    return scheme != "role" and scheme not in owners and address_scheme(sender.address) not in owners \
        and (sender.host or "") not in owners
