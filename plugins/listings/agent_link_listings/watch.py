"""``agent-link watch``: follow an address's mail as it comes, and status changes.

Declared as the core's messaging commands are (:func:`agent_link_core.cli_run.command`), so
its options parse and read as theirs; :func:`watch_command` builds its click command when the
plugin's declared command runs."""

from typing import Any

from agent_link_core.cli_run import ENVELOPE, as_caller, command, echo, emit, fail, get_app, option, print_messages
from agent_link_core.errors import AgentLinkError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import click


@command(
    option("--as", "as_address", help="Follow the mail of this address (default: the current session)."),
    option("--interval-ms", kind="whole", low=100, high=60000, default=1000, show_default=True,
           help="How often to look again when no change wakes it (any agent-link write wakes it at once)."),
    ENVELOPE, option("--ndjson", flag=True, help="Print each event as one JSON object per line (the shapes are above)."))
def watch(ctx: Any, as_address: str | None, interval_ms: int, show_envelope: bool, ndjson: bool) -> None:
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
    from agent_link_waits.wakeup import Wakeup

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
                    emit({"event": event, "message": view}, False, echo, ndjson)
                elif event == "message":
                    print_messages(app, [view], show_envelope)
                else:
                    echo(f"{view['id']}: now {view['status'] or 'fyi'} ({view['delivery']})\n")
            if first:  # said once the starting point is taken: anything after it is news
                emit({"event": "watching", "address": caller.address}, False,
                     lambda d: echo(f"Watching mail of {d['address']} (Ctrl-C stops)."), ndjson)
            first = False
            wakeup.wait_blocking(interval_ms / 1000)  # a commit anywhere wakes it; the interval is the fallback
    except KeyboardInterrupt:  # the normal way to stop watching
        return
    finally:
        wakeup.close()


def watch_command() -> "click.Command":
    """The click command of :data:`watch` (the target of the plugin's declared ``watch``)."""
    from agent_link_core.cli import click_command

    return click_command(watch)
