"""``agent-link send``: send a message, optionally waiting for its answer."""

import sys
from typing import Any

from agent_link_core.cli_run import (EXIT_TIMEOUT, EXIT_UNDELIVERED, EXIT_UNKNOWN, FROM, JSON, NDJSON, argument, command, echo, emit, fail,
                                     get_app, option, run_async, show_then_mark, usage_error, who_am_i)
from agent_link_core.commands.mail import mark_reply, message_text, print_wait, wait_all
from agent_link_core.errors import AgentLinkError


@command(
    argument("target"),
    argument("text", required=False),
    option("--file", "file", kind="file", help="Read the text from this file (at most 64 KiB)."),
    option("--message-id", help="A ULID or UUID making retries idempotent (same id + same message = no resend)."),
    option("--ttl-ms", kind="whole", low=1, help="Give up pushing this long after the first attempt."),
    option("--reply-by", help="Deadline for an answer (ISO 8601 with a zone); implies --anticipation reply."),
    option("--anticipation", kind="choice", choices=("reply", "action", "fyi")),
    option("--wait", "wait_reply", flag=True, help="Wait for the recipient's resolution (implies reply)."),
    option("--timeout-ms", kind="whole", low=0, high=600000, default=60000, show_default=True, help="With --wait (at most 600000)."),
    option("--retry-count", kind="whole", low=0, high=20, default=0, show_default=True),
    option("--retry-delay-ms", kind="whole", low=0, high=60000, default=500, show_default=True),
    option("--retry-backoff", kind="finite", low=1.0, high=10.0, default=2.0, show_default=True),
    option("--retry-jitter", kind="finite", low=0.0, high=1.0, default=0.1, show_default=True),
    option("--retry-unknown", flag=True, help="Push again a message whose earlier outcome was unknown."),
    option("--require-known", flag=True, help="Refuse an address no process has ever served (typo guard)."),
    option("--require-delivered", flag=True, help=f"Exit {EXIT_UNDELIVERED} unless the outcome is delivered."),
    option("--correlation-id", help="Your id tying this message to others (stored, part of the idempotency check)."),
    option("--from-project", help="The sender's project name (stored with the message)."),
    option("--label", "sender_label", help="A label for the sender, e.g. its role (stored with the message)."),
    option("--envelope", "envelope_format", kind="choice", choices=("agent-link", "intercom-v2"), default="agent-link",
           show_default=True, help="What the recipient's model reads: agent-link's envelope, or agent-session-intercom's v2"
           " text (for harnesses that support it)."),
    FROM, JSON, NDJSON)
def send(ctx: Any, target: str, text: str | None, file: str | None, message_id: str | None, ttl_ms: int | None,
         reply_by: str | None, anticipation: str | None, wait_reply: bool, timeout_ms: int, retry_count: int,
         retry_delay_ms: int, retry_backoff: float, retry_jitter: float, retry_unknown: bool, require_known: bool,
         require_delivered: bool, correlation_id: str | None, from_project: str | None, sender_label: str | None,
         envelope_format: str, from_address: str | None, as_json: bool, ndjson: bool, **named: Any) -> None:
    """Send TEXT to TARGET: a contact alias, an address (harness:id, role:name), a form a plugin
    understands (e.g. an endpoint composite), or a bare session id. TEXT `-` reads stdin.

    The outcome is exactly one of delivered, accepted (the host took it and shows it
    later; never pushed again), queued, rejected, unknown.
    """
    from agent_link_core.cli_text import (
        address_error,
        cli_words,
        looks_like_bad_address,
    )
    from agent_link_core.mailbox import parse_iso_ms

    body = message_text(text, file)
    if not target.strip():
        usage_error("TARGET is empty: give an address, a contact alias or a session id")
    problem = address_error(target.strip(), "to") if looks_like_bad_address(target.strip()) else None
    if problem is not None:
        fail(problem)
    if reply_by is not None:
        try:
            parse_iso_ms(reply_by, "replyBy")  # the date's format is the first thing to get right
        except AgentLinkError as exc:
            fail(exc)
        if anticipation is None:
            anticipation = "reply"
    if wait_reply and anticipation == "fyi":
        usage_error("--wait expects an answer; it cannot go with --anticipation fyi")
    app = get_app(ctx)
    me = who_am_i(app, from_address, named, reading=wait_reply)  # --wait shows the answer: a read, checked before sending
    from agent_link_core.sending import RetryPolicy

    policy = RetryPolicy(retry_count, retry_delay_ms, retry_backoff, retry_jitter)
    if wait_reply and anticipation is None:
        anticipation = "reply"
    result = run_async(app.outbox.send_reliably(target, body, sender=me, message_id=message_id, ttl_ms=ttl_ms,
                                                reply_by=reply_by, anticipation=anticipation, retry=policy,
                                                retry_unknown=retry_unknown, require_known=require_known,
                                                correlation_id=correlation_id, sender_project=from_project,
                                                sender_label=sender_label,
                                                envelope_format=None if envelope_format == "agent-link" else envelope_format),
                       inline=app.outbox.reaches_no_harness(target.strip(), me))
    data = result.to_dict()
    if wait_reply and result.outcome in ("delivered", "accepted", "queued") and result.message_id:
        try:
            echo(f"{result.outcome}: {result.message_id}; waiting up to {timeout_ms / 1000:g} s for the answer "
                       "(Ctrl-C stops waiting)", err=True)
            data["wait"] = wait_all(app, me, result.message_id, timeout_ms)
        except KeyboardInterrupt:  # the message is sent: its id must not be lost with the wait
            echo(f"{result.outcome}: {result.message_id} to {data['to'] or target} "
                       f"(stopped waiting; `agent-link wait {result.message_id}` waits again)", err=True)
            sys.exit(130)

    def human(d: dict[str, Any]) -> None:
        line = f"{d['outcome']}: {d['messageId'] or '-'} to {d['to'] or target}"
        echo(line + (" (already sent; nothing resent)" if d["duplicate"] else ""))
        if d.get("error"):
            echo(f"agent-link: {cli_words(d['error']['message'], 'send')} {cli_words(d['error'].get('hint') or '', 'send')}".rstrip(), err=True)
        for w in d.get("warnings", []):
            echo(f"warning: {cli_words(w['message'], 'send')}", err=True)
        if "wait" in d:
            print_wait(app, d["wait"], False)

    if (as_json or ndjson) and data.get("warnings"):
        for w in data["warnings"]:  # scripts read stdout; people still see warnings
            echo(f"warning: {cli_words(w['message'], 'send')}", err=True)
    show_then_mark(lambda: emit(data, as_json, human, ndjson), lambda: mark_reply(app, me, data.get("wait") or {}),
                   "the reply stays unread")
    if "wait" in data and data["wait"]["outcome"] == "timeout":
        sys.exit(EXIT_TIMEOUT)
    if require_delivered and result.outcome in ("accepted", "queued"):
        sys.exit(EXIT_UNDELIVERED)
    sys.exit({"delivered": 0, "accepted": 0, "queued": 0, "unknown": EXIT_UNKNOWN}.get(result.outcome, 1))
