"""``agent-link wait``: the answer to a message, as ``agent-link send --wait`` waits for it (the core's CLI helpers)."""

import sys
from typing import Any

import click

from agent_link_core.cli_run import (ENVELOPE, EXIT_TIMEOUT, JSON, NDJSON, NO_ANSWER, READER_FROM, argument, command, echo, emit, get_app,
                                     mark_reply, option, print_wait, show_then_mark, wait_all, who_am_i)


@command(
    argument("message_id"),
    option("--timeout-ms", kind="whole", low=0, high=600000, default=60000, show_default=True, help="At most 600000."),
    READER_FROM, ENVELOPE, JSON, NDJSON)
def wait(ctx: Any, message_id: str, timeout_ms: int, from_address: str | None, show_envelope: bool,
         as_json: bool, ndjson: bool, **named: Any) -> None:
    """Wait up to --timeout-ms for the resolution of MESSAGE_ID (exit 6 without an answer: timed out, expired or unresolved; Ctrl-C: 130)."""
    app = get_app(ctx)
    me = who_am_i(app, from_address, named, reading=True)
    data = wait_all(app, me, message_id, 0)  # a bad or unknown id is refused before any waiting
    if data["outcome"] == "timeout" and timeout_ms > 0:
        for warning in data.get("warnings", ()):  # said before the wait, not only after it ran out
            echo(f"note: {warning['message']}", err=True)
        data = wait_all(app, me, message_id, timeout_ms, f"stopped waiting for {message_id}; `agent-link wait {message_id}` waits again")
    show_then_mark(lambda: emit(data, as_json, lambda d: print_wait(app, d, show_envelope), ndjson),
                   lambda: mark_reply(app, me, data), "the reply stays unread")
    if data["outcome"] in NO_ANSWER:
        sys.exit(EXIT_TIMEOUT)


def wait_command() -> click.Command:
    """The click command of :func:`wait` (the core's declared-command form: :func:`agent_link_core.cli.click_command`)."""
    from agent_link_core.cli import click_command

    return click_command(wait)
