"""``--thread`` on the core's ``show``: the message's whole conversation, oldest first.

Added by the plugin's ``agent_link_register_commands`` when click's path looks ``show`` up;
the fast path leaves ``show --thread`` to click (an option it does not know), so a plain
``show`` never imports this module.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import click

from agent_link_core.cli_run import echo, emit, fail, get_app, print_messages, who_am_i
from agent_link_core.errors import AgentLinkError

#: ``show``'s help with the option (the core's own does not know it)
SHOW_HELP = inspect.cleandoc("""Show a message you sent or received, read or not (--thread: its conversation, oldest
    first); --envelope shows what a model sees.""")


def add_thread_option(cli: click.Group) -> None:
    """Give the core's ``show`` a ``--thread`` flag, when ``show`` is the command being run or
    listed (the others are placeholders without a callback, ``docs/plugins.md``)."""
    command = cli.commands.get("show")
    if command is None or command.callback is None or any(p.name == "thread" for p in command.params):
        return
    # after MESSAGE_ID, where the option stood when the core had it: the help reads as before
    command.params.insert(1, click.Option(["--thread"], is_flag=True,
                                          help="Show the whole conversation: what it answers, replies, follow-ups."))
    command.help = SHOW_HELP
    command.callback = _with_thread(command.callback)


def _with_thread(callback: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(callback)
    def run(*args: Any, thread: bool = False, **kwargs: Any) -> Any:
        if not thread:
            return callback(*args, **kwargs)
        return show_thread(click.get_current_context(), **kwargs)

    return run


def show_thread(ctx: click.Context, message_id: str, from_address: str | None, show_envelope: bool, as_json: bool,
                ndjson: bool, **named: Any) -> None:
    """``show --thread``: print the conversation of ``message_id`` as the caller may see it
    (:func:`agent_link_conversations.conversation.conversation_of`), then how many of its
    messages are hidden; a refusal exits 1 with its one-line error."""
    from agent_link_conversations.conversation import conversation_of

    app = get_app(ctx)
    me = who_am_i(app, from_address, named, reading=True)
    try:
        data = conversation_of(app, me, message_id)
    except AgentLinkError as exc:
        fail(exc)

    def human(d: dict[str, Any]) -> None:
        print_messages(app, d["messages"], show_envelope)
        if d["hiddenCount"]:
            echo(f"({d['hiddenCount']} messages of this conversation are not yours to see)")

    emit(data, as_json, human, ndjson)
