"""``agent-link reply``: answer a message (reply, decline or done)."""

from __future__ import annotations

from typing import Any

import click

from agent_link_core.cli import EXIT_HELP, emit, get_app, json_opt, ndjson_opt, run_async, who_am_i, with_from
from agent_link_core.commands.mail import message_text


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
    from agent_link_core import api

    data = run_async(api.reply(app, message_id, body, sender=me, kind=kind or "reply",
                               envelope_format=None if envelope_format == "agent-link" else envelope_format))
    def human(d: dict[str, Any]) -> None:
        sent = f"reply {d['messageId']} {d['delivery']}" if d["messageId"] else "no reply message sent"
        click.echo(f"{d['resolution']['kind']}: {d['replyToMessageId']} ({d['status']}); {sent}")

    emit(data, as_json, human, ndjson)
