"""``agent-link reply``, ``status`` and ``show``: answer a message, its state, the message (its conversation:
``show --thread``, the conversations plugin's; its answer: ``agent-link wait``, the waits plugin's)."""

from typing import Any

from agent_link_core.cli_run import (ENVELOPE, FROM, JSON, NDJSON, READER_FROM, argument, command, echo, emit, get_app,
                                     message_text, option, print_messages, run_async, show_then_mark, usage_error,
                                     who_am_i)


@command(
    argument("message_id"),
    argument("text", required=False),
    option("--file", "file", kind="file", help="Read the text from this file (at most 64 KiB)."),
    option("--decline", flag=True, help="Decline it; TEXT is the reason."),
    option("--done", flag=True, help="Mark it done; TEXT is an optional note."),
    FROM, JSON, NDJSON)
def reply(ctx: Any, message_id: str, text: str | None, file: str | None, decline: bool, done: bool,
          from_address: str | None, as_json: bool, ndjson: bool, **named: Any) -> None:
    """Answer MESSAGE_ID, a message addressed to the current session; the answer goes back to its sender. TEXT `-` reads stdin."""
    if decline and done:
        usage_error("choose one of --decline and --done")
    kind = "decline" if decline else "done" if done else "reply"
    body = message_text(text, file) if (text is not None or file is not None) else None
    app = get_app(ctx)
    me = who_am_i(app, from_address, named)
    envelope_format = named.pop("envelope_format", None)  # a plugin's --envelope (send's says more)
    data = run_async(app.reply(caller=me, message_id=message_id, resolution=kind, message=body,
                               metadata={"envelopeFormat": envelope_format} if envelope_format else None))
    def human(d: dict[str, Any]) -> None:
        sent = f"reply {d['messageId']} {d['delivery']}" if d["messageId"] else "no reply message sent"
        echo(f"{d['resolution']['kind']}: {d['replyToMessageId']} ({d['status']}); {sent}")

    show_then_mark(lambda: emit(data, as_json, human, ndjson), lambda: None, f"the {data['resolution']['kind']} to {data['replyToMessageId']} was stored all the same")


@command(argument("message_id"), READER_FROM, JSON, NDJSON, reader=True)
def status(ctx: Any, message_id: str, from_address: str | None, as_json: bool, ndjson: bool, **named: Any) -> None:
    """Show delivery, status and reminders of a message you sent or received."""
    app = get_app(ctx)
    me = who_am_i(app, from_address, named, reading=True)
    data = app.status(me, message_id)
    if data["delivery"] == "accepted" and run_async(app.refresh_delivery(data["messageId"])):
        data = app.status(me, message_id)
    def human(d: dict[str, Any]) -> None:
        from agent_link_core.cli_text import late  # people's output only: --json stays without it

        echo(f"{d['messageId']}: {d.get('deliveryNote') or d['delivery']}, status {late(d, d['status'] or 'none (fyi)')}, "
             f"from {d['from']} to {d['to']}")

    emit(data, as_json, human, ndjson)


@command(argument("message_id"), READER_FROM, ENVELOPE, JSON, NDJSON, reader=True)
def show(ctx: Any, message_id: str, from_address: str | None, show_envelope: bool, as_json: bool, ndjson: bool,
         **named: Any) -> None:
    """Show a message you sent or received, read or not; --envelope shows what a model sees."""
    app = get_app(ctx)
    me = who_am_i(app, from_address, named, reading=True)
    row = app.mailbox.require(message_id)
    app.mailbox.visible_to(me.address, all_mail=bool(app.config.get("AGENT_LINK_INSPECT_ALL"))).require(row, f"message {row['id']}")
    view = app.mailbox.to_views([row])[0]
    view.pop("bodyBytes", None)
    view["envelope"] = app.mailbox.envelope(row)
    emit({"message": view}, as_json, lambda d: print_messages(app, [d["message"]], show_envelope), ndjson)
