"""``agent-link search QUERY``: the search tool for people and scripts (a table, or ``--json``)."""

from __future__ import annotations

from typing import Any

import click

from agent_link_core.cli import EXIT_HELP, WholeRange, emit, fail, get_app, run_async, table
from agent_link_core.errors import AgentLinkError

from agent_link_search.index import STATUSES, search_messages


def _reader(ctx: click.Context, from_address: str | None) -> Any:
    """The caller the search reads as: ``--from`` or the current session, proved either way
    (:func:`agent_link_core.identity.prove_reader`: a refused reader ends the command with one
    line and exit 1)."""
    from agent_link_core import api
    from agent_link_core.identity import prove_reader, reader_proved_here

    if from_address is not None and not from_address.strip():
        raise click.UsageError("--from is empty: give an address such as team:alice, or leave the option out")
    app = get_app(ctx)
    try:
        me = api.sender(app, explicit=from_address)
    except AgentLinkError as exc:
        fail(exc)
    if me.known and not reader_proved_here(app, me.address):
        run_async(prove_reader(app, me.address))
    return me


@click.command("search", epilog=EXIT_HELP)
@click.argument("query")
@click.option("--sent-by", help="Only messages sent by this address.")
@click.option("--sent-to", help="Only messages addressed or handed to this address.")
@click.option("--since", help="Only messages sent at or after this time (ISO 8601 with a zone).")
@click.option("--until", help="Only messages sent before this time (ISO 8601 with a zone).")
@click.option("--status", type=click.Choice(list(STATUSES)))
@click.option("--limit", type=WholeRange(1, 100), default=20, show_default=True)
@click.option("--cursor", help="Continue after a previous page (its nextCursor).")
@click.option("--from", "from_address",
              help="Read as this address: only inside that address's own session (its AGENT_LINK_ADDRESS), "
                   "or where the machine's user set AGENT_LINK_INSPECT_ALL=1.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (indented).")
@click.option("--ndjson", is_flag=True, help="Print the same JSON object on one line.")
@click.pass_context
def search_command(ctx: click.Context, query: str, sent_by: str | None, sent_to: str | None, since: str | None,
                   until: str | None, status: str | None, limit: int, cursor: str | None, from_address: str | None,
                   as_json: bool, ndjson: bool) -> None:
    """Search the messages you sent or received (all with AGENT_LINK_INSPECT_ALL=1).

    QUERY: words (all must match), "exact phrases", OR, NOT, parentheses, prefix*.
    """
    me = _reader(ctx, from_address)
    try:
        data = search_messages(get_app(ctx), me, query, from_address=sent_by, to_address=sent_to, since=since,
                               until=until, status=status, limit=limit, cursor=cursor)
    except AgentLinkError as exc:
        fail(exc)

    def human(d: dict[str, Any]) -> None:
        if not d["results"]:
            click.echo("No messages match.")
            return
        table(["ID", "SENT", "FROM", "TO", "STATUS", "SNIPPET"],
              [[r["id"], r["sentAt"], r["from"], r["to"], r["status"] or r["delivery"],
                r["snippet"].replace("\n", " ")] for r in d["results"]])
        if d["nextCursor"]:
            click.echo(f"more: --cursor {d['nextCursor']}")

    emit(data, as_json, human, ndjson)
