"""``agent-link search QUERY``: the search tool for people and scripts (a table, or ``--json``)."""

from __future__ import annotations

from typing import Any

import click

from agent_link_core.cli import EXIT_HELP, WholeRange, emit, fail, get_app, json_opt, ndjson_opt, table, who_am_i, with_reader_from
from agent_link_core.errors import AgentLinkError

from agent_link_search.index import STATUSES, search_messages


def people_snippet(pieces: list[tuple[str, bool]]) -> str:
    """A snippet for the people's table: its raw words on one line, without the tool's
    escaping or hit markup (the table makes control characters visible).

    :param pieces: ``[(text, is_hit)]`` as :func:`agent_link_search.index.search_messages`
        keeps them."""
    return " ".join("".join(text for text, _ in pieces).split())


@click.command("search", epilog=EXIT_HELP)
@click.argument("query")
@click.option("--sent-by", help="Only messages sent by this address.")
@click.option("--sent-to", help="Only messages addressed or handed to this address.")
@click.option("--since", help="Only messages sent at or after this time (ISO 8601 with a zone).")
@click.option("--until", help="Only messages sent before this time (ISO 8601 with a zone).")
@click.option("--status", type=click.Choice(list(STATUSES)))
@click.option("--limit", type=WholeRange(1, 100), default=20, show_default=True)
@click.option("--cursor", help="Continue after a previous page (its nextCursor).")
@with_reader_from
@json_opt
@ndjson_opt
@click.pass_context
def search_command(ctx: click.Context, query: str, sent_by: str | None, sent_to: str | None, since: str | None,
                   until: str | None, status: str | None, limit: int, cursor: str | None, from_address: str | None,
                   as_json: bool, ndjson: bool, **named: Any) -> None:
    """Search the messages you sent or received (all with AGENT_LINK_INSPECT_ALL=1).

    QUERY: words (all must match), "exact phrases", OR, NOT, parentheses, prefix*.
    """
    me = who_am_i(get_app(ctx), from_address, named, reading=True)
    try:
        data = search_messages(get_app(ctx), me, query, from_address=sent_by, to_address=sent_to, since=since,
                               until=until, status=status, limit=limit, cursor=cursor, keep_pieces=True)
    except AgentLinkError as exc:
        fail(exc)
    # people read the words themselves, never markup; scripts get the tool's escaped snippet
    shown = {r["id"]: people_snippet(r.pop("pieces")) for r in data["results"]}

    def human(d: dict[str, Any]) -> None:
        if not d["results"]:
            click.echo("No messages match.")
            return
        # delivery and the answer's state apart, as `agent-link status` words them (an fyi message has no status)
        table(["ID", "SENT", "FROM", "TO", "DELIVERY", "STATUS", "SNIPPET"],
              [[r["id"], r["sentAt"], r["from"], r["to"], r["delivery"], r["status"] or "none (fyi)",
                shown[r["id"]]] for r in d["results"]])
        if d["nextCursor"]:
            click.echo(f"more: --cursor {d['nextCursor']}")

    emit(data, as_json, human, ndjson)
