"""``agent-link inbox``: read the messages other agents sent to this session."""

from __future__ import annotations

from agent_link_core.cli_run import (ENVELOPE, JSON, NDJSON, as_caller, command, declared_names, echo, emit, fail, get_app,
                                     not_marked, option, print_messages, show_then_mark, usage_error)
from agent_link_core.errors import AgentLinkError
from agent_link_core.reading import as_read, shown_unread

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


@command(
    option("--as", "as_address", help="Read the mailbox of this address (default: the current session)."),
    option("--limit", kind="whole", low=1, high=100, default=20, show_default=True),
    option("--peek", flag=True, help="Do not mark the messages delivered (the default for another agent's mailbox)."),
    option("--mark-read", flag=True, help="With --as another agent's address (AGENT_LINK_INSPECT_ALL): mark what is shown "
                                           "delivered, as that agent's own read would."),
    option("--all", "all_mail", flag=True, help="Also list messages already read or resolved (newest first)."),
    option("--before", help="With --all: list the messages older than this message id (the last one a listing showed)."),
    option("--message-id", "message_id", help="Read this one message in pages (one too large for one read)."),
    option("--offset", kind="whole", low=0, high=1_000_000, help="With --message-id: where the page starts (characters)."),
    ENVELOPE, JSON, NDJSON, reader=True)
def inbox(ctx: Any, as_address: str | None, limit: int, peek: bool, mark_read: bool, all_mail: bool, before: str | None,
          message_id: str | None, offset: int | None, show_envelope: bool, as_json: bool, ndjson: bool) -> None:
    """Read the messages other agents sent to this session (open ones; --all: every one).

    A plugin may limit a read's size (the budgets plugin: the calling host's limit, else
    AGENT_LINK_READ_BYTES); a message larger than that comes in pages: follow the printed --offset.
    """
    from agent_link_core.cli_text import cli_words, terminal_safe
    from agent_link_core.identity import reads_own_mail

    for wrong, said in ((offset is not None and message_id is None, "--offset needs --message-id"),
                        (before is not None and not all_mail, "--before needs --all"),
                        (message_id is not None and all_mail, "choose one of --message-id and --all"),
                        (peek and mark_read, "choose one of --peek and --mark-read")):
        if wrong:
            usage_error(said)
    app = get_app(ctx)
    caller = as_caller(app, as_address)
    peek = peek or (not mark_read and not reads_own_mail(app, caller.address))  # another's mail stays theirs
    # read without marking; what was shown is marked once the output is written (show_then_mark)
    mark, warnings = app.begin_inbox_read(app.require_caller(caller), not peek)
    data = app.inbox(caller, limit=limit, mark=False, message_id=message_id, offset=offset or 0)
    cut = False  # --all: a listing that left older mail out
    if all_mail:
        # a listing, not a read (no paging, nothing held for a wait)
        unread = data["remainingCount"] + len(shown_unread(app, data))  # every unread message but those left to a wait
        data = {k: v for k, v in data.items() if k not in ("more", "page", "heldByActiveWait")}
        try:
            listed = app.mailbox.addressed_to(caller.address, limit + 1, before)
        except AgentLinkError as exc:  # a bad cursor: named as this command's option
            fail(exc, {"messageId": "--before"})
        data["messages"], cut = listed[:limit], len(listed) > limit  # one more than shown: are there older ones?
        data["nextBefore"] = data["messages"][-1]["id"] if cut else None  # --before of the next page
        data["renderedBlock"] = "\n".join(view.pop("envelope") for view in data["messages"])
        data["remainingCount"] = max(unread - sum(1 for m in data["messages"] if m.get("deliveredAt") is None), 0)
    if warnings:
        data["warnings"] = [*data.get("warnings", []), *warnings]
    to_mark = shown_unread(app, data) if mark else []
    data = as_read(app, data, to_mark)

    def human(d: dict[str, Any]) -> None:
        page = d.get("page")
        who = f" --as {d['address']}" if as_address else ""  # the commands printed read on as the same reader
        left = d["remainingCount"]  # what the read did not show
        waiting = f"{left} more message(s) wait: run agent-link inbox{who} again."
        if page is not None:  # one message too large for one read: a part of its envelope
            end = page["nextOffset"] if page["nextOffset"] is not None else page["totalChars"]
            echo(f"message {page['messageId']}, characters {page['offset']}-{end} of {page['totalChars']} of its envelope:")
            echo(terminal_safe(d["renderedBlock"]))
            if page["nextOffset"] is not None:
                echo(f"Read on with: agent-link inbox{who} --message-id {page['messageId']} --offset {page['nextOffset']}")
            elif left > 0:  # its last page: the other mail still waits
                echo(waiting)
            return
        if not d["messages"]:
            echo(f"No {'' if all_mail else 'open '}messages for {d['address']}.")
            return
        print_messages(app, d["messages"], show_envelope)
        if d.get("more") and left > 0:
            echo(waiting)
        if all_mail and cut:  # the listing was cut: said with the command that lists the next page, as unread mail left over is
            echo(f"Older ones: agent-link inbox{who} --all{f' --limit {limit}' if limit != 20 else ''} --before {d['nextBefore']}")
        if any(m.get("anticipation") != "fyi" for m in d["messages"]):
            echo("Answer one with: agent-link reply MESSAGE_ID TEXT [--decline | --done]")
        else:  # fyi asks for nothing: no call to answer, though an answer is still taken
            echo("No answer is asked for (fyi); agent-link reply MESSAGE_ID TEXT answers one anyway.")

    def mark_shown() -> None:
        try:  # one transaction: a busy database leaves every message shown unread, not some
            app.mailbox.mark_many_delivered(to_mark, "inbox")
        except AgentLinkError as exc:
            shown = "the message shown was" if len(to_mark) == 1 else f"the {len(to_mark)} messages shown were"
            not_marked(exc, f"{shown} not marked read (the next inbox read shows {'it' if len(to_mark) == 1 else 'them'} again)")

    for w in data.get("warnings", []):  # e.g. a state dir that refuses writes: nothing is marked read
        echo(f"warning: {cli_words(w['message'], declared_names(ctx))}", err=True)
    show_then_mark(lambda: emit(data, as_json, human, ndjson), mark_shown, "nothing was marked read")
