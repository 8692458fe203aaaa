"""The waits plugin's command line: ``agent-link wait`` and ``agent-link send --wait`` (the options this plugin adds to the
core's ``send``: :func:`add_wait_option`), both waiting through :func:`wait_all`."""

from __future__ import annotations

import functools
import sys
from typing import Any

import click

from agent_link_core.cli_run import (ENVELOPE, JSON, NDJSON, READER_FROM, Command, argument, command, echo,
                                     emit, get_app, not_marked, option, print_messages, show_then_mark, usage_error, who_am_i)
from agent_link_core.errors import AgentLinkError
from agent_link_core.reading import as_read

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App
    from agent_link_core.commands.send import SendResult

#: the exit status of a wait without an answer (the core's EXIT_HELP lists it)
EXIT_TIMEOUT = 6
#: the outcomes of a wait that end without an answer (exit :data:`EXIT_TIMEOUT`); declined and done are answers
NO_ANSWER = frozenset({"timeout", "expired", "unresolved"})
#: the options this plugin gives the core's ``send``, where they stood when the core had them (before ``--retry-count``)
SEND_OPTIONS = (
    option("--wait", "wait_for_reply", flag=True, help="Wait for the recipient's resolution (implies reply)."),
    option("--timeout-ms", kind="whole", low=0, high=600000, help="With --wait: how long to wait (default 60000, at most 600000)."),
)


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


def add_wait_option(cli: click.Group) -> None:
    """Give the core's ``send`` ``--wait`` and ``--timeout-ms`` when it is the command being run or listed (the other core
    commands are placeholders without a callback: docs/plugins.md), its callback then running :class:`SendWait` as the
    send's ``then``. The fast path leaves a ``send`` with either option to click's path, which calls this."""
    command = cli.commands.get("send")
    if command is None or command.callback is None or any(p.name == "wait_for_reply" for p in command.params):
        return
    from agent_link_core.cli import click_param
    from agent_link_core.cli_run import import_target

    core: Command = import_target("agent_link_core.commands.send:send")
    at = next(i for i, p in enumerate(command.params) if p.name == "retry_count")
    command.params[at:at] = [click_param(p) for p in SEND_OPTIONS]

    @functools.wraps(core.callback)
    def send(ctx: Any, *, wait_for_reply: bool = False, timeout_ms: int | None = None, **values: Any) -> None:
        if timeout_ms is not None and not wait_for_reply:  # refused before the text is read from stdin
            usage_error("--timeout-ms needs --wait")
        core.callback(ctx, then=SendWait(60000 if timeout_ms is None else timeout_ms) if wait_for_reply else None, **values)

    callback = click.pass_context(Command(send, core.params, core.sender).run)
    callback.__agent_link_sender_options__ = core.sender  # type: ignore[attr-defined]
    command.callback = callback


class SendWait:
    """``send --wait``: the core ``send``'s ``then`` (agent_link_core/commands/send.py), waiting for the answer of the
    message sent (:func:`wait_all`) and showing it after the send's own output."""

    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms
        self.unread = ""

    def anticipation(self, anticipation: str | None) -> str:
        """The anticipation of a send waiting for its answer: ``reply`` unless given; ``fyi`` is a usage error."""
        if anticipation == "fyi":
            usage_error("--wait expects an answer; it cannot go with --anticipation fyi")
        return anticipation or "reply"

    def sent(self, app: App, me: Any, result: SendResult, data: dict[str, Any], target: str) -> None:
        """Wait for the answer of a message stored (its ``wait`` added to ``data``, the JSON printed)."""
        self.app, self.me, self.data = app, me, data
        if result.outcome in ("delivered", "accepted", "queued") and result.message_id:
            # the send's own line comes once, with the answer; a Ctrl-C still says the sent message's id
            data["wait"] = wait_all(app, me, result.message_id, self.timeout_ms,
                                    f"{result.outcome}: {result.message_id} to {data['to'] or target} (stopped waiting; "
                                    f"`agent-link wait {result.message_id}` waits again)")
            self.unread = "; the reply stays unread" if data["wait"].get("reply") else ""

    def show(self, data: dict[str, Any]) -> None:
        """Print the answer for people, after the send's lines."""
        if "wait" in data:
            print_wait(self.app, data["wait"], False)

    def mark(self) -> None:
        """Once the output is written: mark the reply shown read; exit 6 without an answer."""
        mark_reply(self.app, self.me, self.data.get("wait") or {})
        if "wait" in self.data and self.data["wait"]["outcome"] in NO_ANSWER:
            sys.exit(EXIT_TIMEOUT)


def wait_all(app: App, caller: Any, message_id: str, timeout_ms: int, stopped: str | None = None) -> dict[str, Any]:
    """Wait for a resolution for the whole ``timeout_ms`` (ms), through ``agent_link_wait_for_reply`` (whose one wait stops
    at its cap), as the core's plugin boundary runs it.

    :param stopped: the stderr line a Ctrl-C ends the wait with (exit 130); the wait then says what it waits for.
    :raises AgentLinkError: what the wait refuses (a bad or unknown id); ``internal_error`` when the wait failed.
    """
    import asyncio
    import time

    deadline = time.monotonic() + timeout_ms / 1000
    try:
        with asyncio.Runner() as runner:
            if stopped:
                echo(f"waiting up to {timeout_ms / 1000:g} s for the answer to {message_id} (Ctrl-C stops waiting)", err=True)
            while True:
                left = max(0, int((deadline - time.monotonic()) * 1000))
                data = runner.run(app.hooks.acall("agent_link_wait_for_reply", caller=caller, message_id=message_id,
                                                  timeout_ms=left, poll_ms=1000, progress=None, mark=False))
                if not isinstance(data, dict):  # None: the wait failed (reported); []: its hookspec could not load
                    raise AgentLinkError("internal_error", f"Waiting for the answer to {message_id} failed.", {"messageId": message_id},
                                         hint=f"`agent-link health` shows the waits plugin's problem; `agent-link status {message_id}` "
                                              "follows the message.")
                data["warnings"] = [w for w in data.get("warnings", []) if w.get("code") != "wait_capped"]
                if not data["warnings"]:
                    del data["warnings"]
                if data["outcome"] != "timeout" or time.monotonic() >= deadline:
                    data["waitedMs"] = timeout_ms - left + data["waitedMs"]
                    if marks_reply(app, caller, data) and data["reply"].get("deliveredAt") is None:  # shown as it reads once marked, as an inbox read shows its messages
                        data["reply"] = as_read(app, {"messages": [data["reply"]]}, [data["reply"]["id"]])["messages"][0]
                    return data
    except KeyboardInterrupt:
        if stopped is None:
            raise
        echo(stopped, err=True)
        sys.exit(130)


def marks_reply(app: App, me: Any, data: dict[str, Any]) -> bool:
    """Whether :func:`mark_reply` marks the reply of wait answer ``data``: a reply to ``me``, read as itself, where the state dir takes writes."""
    from agent_link_core.identity import reads_own_mail

    reply = data.get("reply")
    return bool(reply) and reply.get("to") == me.address and app.read_only is None and reads_own_mail(app, me.address)


def mark_reply(app: App, me: Any, data: dict[str, Any]) -> None:
    """Mark delivered the reply a wait returned (once shown), unless reading as another agent."""
    if data.get("reply") and app.read_only is not None:  # known before trying: the read stands, as an inbox read's
        echo(f"warning: {app.read_only.message} The reply shown was not marked read.", err=True)
    elif marks_reply(app, me, data):
        try:
            app.mailbox.mark_delivered(data["reply"]["id"], "wait")
        except AgentLinkError as exc:
            not_marked(exc, "the reply shown was not marked read (the next wait for it shows it again)")


def print_wait(app: App, d: dict[str, Any], show_envelope: bool) -> None:
    """Print a wait's answer (:func:`wait_all`) for people."""
    when = f" (answered {d['resolution']['at']})" if d.get("resolution") else " (it came before the wait)" if d.get("arrivedBeforeWait") else ""
    echo(f"{d['outcome']} after {d['waitedMs']} ms{when}")  # the answer may be older than the wait: said
    if d.get("reply"):
        print_messages(app, [d["reply"]], show_envelope)
