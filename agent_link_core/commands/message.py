"""``agent-link status``, ``wait`` and ``show``: one message, its state, its answer, its conversation."""

from __future__ import annotations

import sys
from typing import Any

import click

from agent_link_core.cli import (
    EXIT_HELP,
    EXIT_TIMEOUT,
    WholeRange,
    emit,
    envelope_opt,
    fail,
    get_app,
    json_opt,
    ndjson_opt,
    run_async,
    show_then_mark,
    who_am_i,
    with_reader_from,
)
from agent_link_core.commands.mail import mark_reply, print_messages, print_wait, wait_all
from agent_link_core.errors import AgentLinkError


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
