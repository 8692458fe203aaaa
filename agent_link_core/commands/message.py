"""``agent-link reply``, ``status``, ``wait``, ``show`` and ``watch``: one message (answer it, its
state, its answer, its conversation) and an address's mail as it comes."""

import json
import sys
from typing import Any

import click

from agent_link_core.cli import (EXIT_HELP, EXIT_TIMEOUT, JSON_FORMAT_VERSION, WholeRange, as_caller, emit, envelope_opt, fail, get_app, json_opt,
                                 ndjson_opt, run_async, show_then_mark, who_am_i, with_from, with_reader_from)
from agent_link_core.commands.mail import mark_reply, message_text, print_messages, print_wait, wait_all
from agent_link_core.errors import AgentLinkError


@click.command(epilog=EXIT_HELP)
@click.argument("message_id")
@click.argument("text", required=False)
@click.option("--file", "file", type=click.Path(dir_okay=False), help="Read the text from this file (at most 64 KiB).")
@click.option("--decline", is_flag=True, help="Decline it; TEXT is the reason.")
@click.option("--done", is_flag=True, help="Mark it done; TEXT is an optional note.")
@click.option("--envelope", "envelope_format", type=click.Choice(["agent-link", "intercom-v2"]), default="agent-link",
              show_default=True, help="What the original sender's model reads (intercom-v2: for harnesses that support it).")
@with_from
@json_opt
@ndjson_opt
@click.pass_context
def reply(ctx: click.Context, message_id: str, text: str | None, file: str | None, decline: bool, done: bool,
          envelope_format: str, from_address: str | None, as_json: bool, ndjson: bool, **named: Any) -> None:
    """Answer MESSAGE_ID, a message addressed to the current session; the answer goes back
    to its sender. TEXT `-` reads stdin."""
    if decline and done:
        raise click.UsageError("choose one of --decline and --done")
    kind = "decline" if decline else ("done" if done else None)
    body = message_text(text, file) if (text is not None or file is not None) else None
    app = get_app(ctx)
    me = who_am_i(app, from_address, named)
    fmt = None if envelope_format == "agent-link" else envelope_format
    data = run_async(app.reply(caller=me, message_id=message_id, resolution=kind or "reply", message=body,
                               metadata={"envelopeFormat": fmt} if fmt else None))
    def human(d: dict[str, Any]) -> None:
        sent = f"reply {d['messageId']} {d['delivery']}" if d["messageId"] else "no reply message sent"
        click.echo(f"{d['resolution']['kind']}: {d['replyToMessageId']} ({d['status']}); {sent}")

    emit(data, as_json, human, ndjson)


@click.command(epilog=EXIT_HELP)
@click.argument("message_id")
@with_reader_from
@json_opt
@ndjson_opt
@click.pass_context
def status(ctx: click.Context, message_id: str, from_address: str | None, as_json: bool, ndjson: bool,
           **named: Any) -> None:
    """Show delivery, status and reminders of a message you sent or received."""
    app = get_app(ctx)
    me = who_am_i(app, from_address, named, reading=True)
    try:
        data = app.status(me, message_id)
        if data["delivery"] == "accepted" and run_async(app.refresh_delivery(data["messageId"])):
            data = app.status(me, message_id)
    except AgentLinkError as exc:
        fail(exc)
    emit(data, as_json, lambda d: click.echo(
        f"{d['messageId']}: {d.get('deliveryNote') or d['delivery']}, status {d['status'] or 'none (fyi)'}, from {d['from']} to {d['to']}"), ndjson)


@click.command(epilog=EXIT_HELP)
@click.argument("message_id")
@click.option("--timeout-ms", type=WholeRange(0, 600000), default=60000, show_default=True, help="At most 600000.")
@with_reader_from
@envelope_opt
@json_opt
@ndjson_opt
@click.pass_context
def wait(ctx: click.Context, message_id: str, timeout_ms: int, from_address: str | None, show_envelope: bool,
         as_json: bool, ndjson: bool, **named: Any) -> None:
    """Wait up to --timeout-ms for the resolution of MESSAGE_ID (exit 6 on timeout; Ctrl-C: 130)."""
    app = get_app(ctx)
    me = who_am_i(app, from_address, named, reading=True)
    data = wait_all(app, me, message_id, 0)  # a bad or unknown id is refused before any waiting
    if data["outcome"] == "timeout" and timeout_ms > 0:
        try:
            click.echo(f"waiting up to {timeout_ms / 1000:g} s for the answer to {message_id} (Ctrl-C stops waiting)",
                       err=True)
            data = wait_all(app, me, message_id, timeout_ms)
        except KeyboardInterrupt:
            click.echo(f"stopped waiting for {message_id}; `agent-link wait {message_id}` waits again", err=True)
            sys.exit(130)
    show_then_mark(lambda: emit(data, as_json, lambda d: print_wait(app, d, show_envelope), ndjson),
                   lambda: mark_reply(app, me, data), "the reply stays unread")
    if data["outcome"] == "timeout":
        sys.exit(EXIT_TIMEOUT)


@click.command(epilog=EXIT_HELP)
@click.argument("message_id")
@click.option("--thread", is_flag=True, help="Show the whole conversation: what it answers, replies, follow-ups.")
@with_reader_from
@envelope_opt
@json_opt
@ndjson_opt
@click.pass_context
def show(ctx: click.Context, message_id: str, thread: bool, from_address: str | None, show_envelope: bool,
         as_json: bool, ndjson: bool, **named: Any) -> None:
    """Show a message you sent or received, read or not (--thread: its conversation, oldest
    first); --envelope shows what a model sees."""
    app = get_app(ctx)
    me = who_am_i(app, from_address, named, reading=True)
    try:
        data = app.conversation(me, message_id)
    except AgentLinkError as exc:
        fail(exc)
    if not thread:
        data = {"message": next(m for m in data["messages"] if m["id"] == data["messageId"])}

    def human(d: dict[str, Any]) -> None:
        print_messages(app, d.get("messages") or [d["message"]], show_envelope)
        if d.get("hiddenCount"):
            click.echo(f"({d['hiddenCount']} messages of this conversation are not yours to see)")

    emit(data, as_json, human, ndjson)


@click.command(epilog=EXIT_HELP)
@click.option("--as", "as_address", help="Follow the mail of this address (default: the current session).")
@click.option("--interval-ms", type=WholeRange(100, 60000), default=1000, show_default=True,
              help="How often to look again when no change wakes it (any agent-link write wakes it at once).")
@envelope_opt
@ndjson_opt
@click.pass_context
def watch(ctx: click.Context, as_address: str | None, interval_ms: int, show_envelope: bool, ndjson: bool) -> None:
    """Follow new mail to and from an address, and status changes, until interrupted (Ctrl-C).

    --ndjson prints one JSON event per line: first {"version", "event": "watching", "address"},
    then {"version", "event": "message"|"change", "message"}.
    Watching reads nothing: no message is marked delivered."""
    app = get_app(ctx)
    caller = as_caller(app, as_address)
    try:
        app.require_caller(caller)
    except AgentLinkError as exc:
        fail(exc)
    seen: dict[str, tuple[Any, ...]] = {}
    first = True
    where, params = app.mailbox.visible_to(caller.address).sql("messages")  # the one read rule
    from agent_link_core.wake import Wakeup

    wakeup = Wakeup(app.store.path)  # armed before the first read: no commit after it goes unseen
    try:
        while True:
            rows = app.store.conn.execute(f"SELECT * FROM messages WHERE {where} ORDER BY sent_at, id", params).fetchall()
            for row, view in zip(rows, app.mailbox.to_views(rows), strict=True):  # states read together
                key = (view["delivery"], view["status"], view["to"])
                before = seen.get(row["id"])
                seen[row["id"]] = key
                if first or before == key:  # what was there when watching began is not news
                    continue
                event = "message" if before is None else "change"
                if ndjson:
                    click.echo(json.dumps({"version": JSON_FORMAT_VERSION, "event": event, "message": view},
                                          ensure_ascii=False, separators=(",", ":")))
                elif event == "message":
                    print_messages(app, [view], show_envelope)
                else:
                    click.echo(f"{view['id']}: now {view['status'] or 'fyi'} ({view['delivery']})\n")
            if first:  # said once the starting point is taken: anything after it is news
                if ndjson:
                    click.echo(json.dumps({"version": JSON_FORMAT_VERSION, "event": "watching", "address": caller.address},
                                          ensure_ascii=False, separators=(",", ":")))
                else:
                    click.echo(f"Watching mail of {caller.address} (Ctrl-C stops).")
            first = False
            wakeup.wait_blocking(interval_ms / 1000)  # a commit anywhere wakes it; the interval is the fallback
    except KeyboardInterrupt:  # the normal way to stop watching
        return
    finally:
        wakeup.close()
