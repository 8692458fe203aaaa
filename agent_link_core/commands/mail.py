"""What the commands that show or wait for messages share."""

from __future__ import annotations

import sys

from agent_link_core.cli_run import echo, fail
from agent_link_core.errors import AgentLinkError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn
    from agent_link_core.app import App


def print_messages(app: App, views: list[dict[str, Any]], show_envelope: bool) -> None:
    """Print messages for people (:func:`~agent_link_core.cli_text.message_lines`), or their envelopes."""
    from agent_link_core.cli_text import message_lines

    rows = {row["id"]: row for row in app.mailbox.rows([view["id"] for view in views])}  # one query, not one per message
    for view in views:
        row = rows[view["id"]]
        if show_envelope:  # the one the read rendered (conversation, wait), else rendered now
            echo(view.get("envelope") or app.mailbox.envelope(row))
        else:
            echo("\n".join(message_lines(view, row["body"])))


def wait_all(app: App, caller: Any, message_id: str, timeout_ms: int, announce: str | None = None) -> dict[str, Any]:
    """Wait for a resolution for the whole ``timeout_ms`` (one ``App.wait`` stops at its cap).

    :param announce: a stderr line printed once the event loop exists (a Ctrl-C after it
        stops the wait with KeyboardInterrupt, not a loop half built).
    :raises SystemExit: exit 1 with one line for an AgentLinkError (:func:`fail`).
    """
    import asyncio
    import time

    deadline = time.monotonic() + timeout_ms / 1000
    with asyncio.Runner() as runner:
        if announce:
            echo(announce, err=True)
        while True:
            left = max(0, int((deadline - time.monotonic()) * 1000))
            try:
                data = runner.run(app.wait(caller=caller, agent=message_id, reply_to=message_id, timeout_ms=left, mark=False))
            except AgentLinkError as exc:
                fail(exc)
            data["warnings"] = [w for w in data.get("warnings", []) if w.get("code") != "wait_capped"]
            if not data["warnings"]:
                del data["warnings"]
            if data["outcome"] != "timeout" or time.monotonic() >= deadline:
                data["waitedMs"] = timeout_ms - left + data["waitedMs"]
                return data


def not_marked(exc: AgentLinkError, undone: str) -> NoReturn:
    """End a read whose output was written but not marked read: one stderr line, exit 1.

    :param undone: what was shown and stays unread, and when it shows again.
    """
    first = exc.message[:1].lower() if exc.message[1:2].islower() else exc.message[:1]  # "The" -> "the"; "SQLite" stays
    fail(AgentLinkError(exc.code, f"{undone}: {first}{exc.message[1:]}", exc.details, exc.hint))


def mark_reply(app: App, me: Any, data: dict[str, Any]) -> None:
    """Mark delivered the reply a wait returned (once shown), unless reading as another agent."""
    from agent_link_core.identity import reads_own_mail

    if data.get("reply") and app.read_only is not None:  # known before trying: the read stands, as an inbox read's
        echo(f"warning: {app.read_only.message} The reply shown was not marked read.", err=True)
    elif data.get("reply") and reads_own_mail(app, me.address):
        try:
            app.mark_taken(me, data["reply"]["id"])
        except AgentLinkError as exc:
            not_marked(exc, "the reply shown was not marked read (the next wait for it shows it again)")


def print_wait(app: App, d: dict[str, Any], show_envelope: bool) -> None:
    echo(f"{d['outcome']} after {d['waitedMs']} ms")
    if d.get("reply"):
        print_messages(app, [d["reply"]], show_envelope)


def message_text(text: str | None, file: str | None) -> str:
    from agent_link_core.cli_text import read_body

    try:
        return read_body(text, file, sys.stdin.buffer)
    except AgentLinkError as exc:
        fail(exc)
