"""``agent-link watch``: follow an address's mail and status changes until Ctrl-C."""

from __future__ import annotations

import json
from typing import Any

import click

from agent_link_core.cli import (
    EXIT_HELP,
    JSON_FORMAT_VERSION,
    WholeRange,
    as_caller,
    envelope_opt,
    fail,
    get_app,
    ndjson_opt,
)
from agent_link_core.commands.mail import print_messages
from agent_link_core.errors import AgentLinkError


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
