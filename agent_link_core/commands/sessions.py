"""``agent-link sessions``, ``who`` and ``find``: the agent sessions on this machine."""

from __future__ import annotations

import sys
from typing import Any

import click

from agent_link_core.cli import (
    EXIT_HELP,
    EXIT_MANY,
    EXIT_NONE,
    WholeRange,
    emit,
    fail,
    get_app,
    json_opt,
    machine_column,
    ndjson_opt,
    printable,
    provider_lines,
    run_async,
    table,
)
from agent_link_core.errors import AgentLinkError


@click.command(epilog=EXIT_HELP)
@click.option("--search", help="Only sessions matching these words (title, id, folder).")
@click.option("--cwd", type=click.Path(file_okay=False), help="Only sessions working in this directory.")
@click.option("--harness", help="Only this harness (e.g. one of the installed plugins).")
@click.option("--limit", type=WholeRange(1, 500), default=50, show_default=True)
@click.option("--source", help="Only sessions of this source kind (e.g. how a thread was started: cli, exec, subAgent...).")
@click.option("--show-paths", is_flag=True, help="Show full working directories.")
@click.option("--cursor", help="The page after an earlier answer (its nextCursor).")
@json_opt
@ndjson_opt
@click.pass_context
def sessions(ctx: click.Context, source: str | None, search: str | None, cwd: str | None, harness: str | None, limit: int,
             show_paths: bool, cursor: str | None, as_json: bool, ndjson: bool) -> None:
    """List every agent session on this machine, newest first."""
    import os

    from agent_link_core import api

    app = get_app(ctx)
    try:
        data = run_async(api.list_sessions(app, search=search, cwd=os.path.abspath(cwd) if cwd else None,
                                           harness=harness or "all", limit=limit, show_paths=show_paths, source=source,
                                           cursor=cursor))
    except AgentLinkError as exc:
        fail(exc)

    def human(d: dict[str, Any]) -> None:
        if d["sessions"]:
            elsewhere = machine_column(d["sessions"])
            table(["ADDRESS", "TITLE", "FOLDER", "LAST ACTIVE", "LOADED"] + (["MACHINE"] if elsewhere else []),
                  [[s["address"], (s.get("title") or "")[:60], s.get("cwd"), s.get("lastActivityAt"),
                    {True: "yes", False: "no"}.get(s.get("loaded"), "?")] + ([m] if elsewhere else [])
                   for s, m in zip(d["sessions"], elsewhere or d["sessions"])])
        else:
            click.echo("No sessions found.")
        left = {k: v for k, v in d["filteredOut"].items() if v}
        if left:
            click.echo("left out: " + ", ".join(f"{v} by {k}" for k, v in left.items()))
        if d["nextCursor"]:
            click.echo(f"more: --cursor {d['nextCursor']}")

    provider_lines(data["providers"])
    emit(data, as_json, human, ndjson)


@click.command(epilog=EXIT_HELP)
@click.option("--source", help="Only sessions of this source kind (e.g. how a thread was started: cli, exec, subAgent...).")
@json_opt
@ndjson_opt
@click.pass_context
def who(ctx: click.Context, source: str | None, as_json: bool, ndjson: bool) -> None:
    """Live sessions merged with your contacts."""
    from agent_link_core import api

    data = run_async(api.who(get_app(ctx), source=source))

    def human(d: dict[str, Any]) -> None:
        elsewhere = machine_column(d["sessions"])
        extra = [""] if elsewhere else []
        table(["ALIAS", "ADDRESS", "TITLE", "FOLDER"] + (["MACHINE"] if elsewhere else []),
              [[s.get("alias"), s["address"], (s.get("title") or "")[:60], s.get("cwd")] + ([m] if elsewhere else [])
               for s, m in zip(d["sessions"], elsewhere or d["sessions"])]
              + [[c["alias"], c["address"], "(not seen now)", c.get("project")] + extra for c in d["offlineContacts"]])

    provider_lines(data["providers"])
    emit(data, as_json, human, ndjson)


@click.command(epilog=EXIT_HELP)
@click.argument("query")
@click.option("--source", help="Only sessions of this source kind (e.g. how a thread was started: cli, exec, subAgent...).")
@click.option("--show-paths", is_flag=True, help="Show full working directories.")
@json_opt
@ndjson_opt
@click.pass_context
def find(ctx: click.Context, query: str, source: str | None, show_paths: bool, as_json: bool, ndjson: bool) -> None:
    """Find an agent by alias, project, title or id: answers none, one or many."""
    from agent_link_core import api

    if not query.strip():
        from agent_link_core.errors import invalid_arguments

        fail(invalid_arguments([{"path": "query", "rule": "minLength", "expected": "an alias, project, title or id to look for"}]))
    data = run_async(api.find(get_app(ctx), query, show_paths=show_paths, source=source))

    def human(d: dict[str, Any]) -> None:
        click.echo(d["verdict"])
        for m in d["matches"]:
            click.echo(f"  {m.get('alias') or '-'}  {m['address']}  {printable(m.get('title') or '')}".rstrip())

    emit(data, as_json, human, ndjson)
    sys.exit({"one": 0, "none": EXIT_NONE}.get(data["verdict"], EXIT_MANY))
