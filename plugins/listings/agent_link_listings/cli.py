"""``agent-link sessions``, ``who``, ``find`` and ``contacts``: the agent sessions on this machine
and short aliases for them (the listings themselves: :mod:`agent_link_listings.listings`)."""

import sys
from typing import Any

import click

from agent_link_core.cli import (EXIT_HELP, WholeRange, emit, fail, get_app, json_opt, ndjson_opt, printable,
                                 run_async, table)
from agent_link_core.errors import AgentLinkError

#: the exit statuses of ``find`` without exactly one match (the core's EXIT_HELP lists them)
EXIT_NONE, EXIT_MANY = 4, 5


def _listings() -> Any:  # imported when a command runs, not for its help
    from agent_link_listings import listings

    return listings


def machine_column(sessions: list[dict[str, Any]]) -> list[str] | None:
    """The MACHINE cells of a session table when a plugin listed sessions of other machines
    (their ``machine`` field; ``(stale)`` after a listing too old to trust), else None: a
    machine on its own shows no such column."""
    if not any(s.get("machine") for s in sessions):
        return None
    return [f"{s.get('machine') or ''}{' (stale)' if s.get('machineStale') else ''}" for s in sessions]


def provider_lines(providers: dict[str, Any]) -> None:
    """One stderr line per unreachable source, so a partial listing never looks complete (what a host or a plugin
    said there on that line, its control and bidi characters escaped)."""
    for name, p in providers.items():
        if not p.get("complete", True):
            detail = f": {printable(p['detail'])}" if p.get("detail") else ""
            click.echo(f"agent-link: {printable(name)}: not fully listed ({printable(p.get('reason') or 'incomplete')}{detail})", err=True)
        for ep in p.get("endpoints", []) or []:
            if not ep.get("reachable", True):
                click.echo(f"agent-link: {printable(name)} endpoint {printable(ep.get('id'))} ({printable(ep.get('source'))}) is unreachable",
                           err=True)


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

    app = get_app(ctx)
    try:
        data = run_async(_listings().sessions(app, search=search, cwd=os.path.abspath(cwd) if cwd else None,
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
    data = run_async(_listings().who(get_app(ctx), source=source))

    def human(d: dict[str, Any]) -> None:
        if not d["sessions"] and not d["offlineContacts"]:  # a bare header line reads as a failure
            click.echo("No sessions or contacts found.")
            return
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
    if not query.strip():
        from agent_link_core.errors import invalid_arguments

        fail(invalid_arguments([{"path": "query", "rule": "minLength", "expected": "an alias, project, title or id to look for"}]))
    data = run_async(_listings().find(get_app(ctx), query, show_paths=show_paths, source=source))

    def human(d: dict[str, Any]) -> None:
        click.echo(d["verdict"])
        for m in d["matches"]:
            click.echo(f"  {printable(m.get('alias') or '-')}  {printable(m['address'])}  {printable(m.get('title') or '')}".rstrip())

    emit(data, as_json, human, ndjson)
    sys.exit({"one": 0, "none": EXIT_NONE}.get(data["verdict"], EXIT_MANY))


@click.group(epilog=EXIT_HELP)
def contacts() -> None:
    """Short aliases for sessions (trimmed, lower case, unique, one per session)."""

@contacts.command("add")
@click.argument("alias")
@click.argument("target")
@json_opt
@ndjson_opt
@click.pass_context
def contacts_add(ctx: click.Context, alias: str, target: str, as_json: bool, ndjson: bool) -> None:
    """Bind ALIAS to TARGET (an address, or any form `send` accepts)."""
    app = get_app(ctx)
    address = run_async(app.directory.resolve_target(target, app.caller()))
    try:
        data = _listings().add_contact(app, alias, address)
    except AgentLinkError as exc:
        fail(exc)
    emit(data, as_json, lambda d: click.echo(f"{d['alias']} -> {d['address']}"), ndjson)

@contacts.command("rename")
@click.argument("old")
@click.argument("new")
@json_opt
@ndjson_opt
@click.pass_context
def contacts_rename(ctx: click.Context, old: str, new: str, as_json: bool, ndjson: bool) -> None:
    """Rename alias OLD to NEW."""
    listings = _listings()
    for name, value in (("OLD", old), ("NEW", new)):  # a bad alias named as the argument it came in
        try:
            listings.normalise_alias(value)
        except AgentLinkError as exc:
            fail(exc, {"alias": name})
    try:
        data = listings.rename_contact(get_app(ctx), old, new)
    except AgentLinkError as exc:
        fail(exc)
    emit(data, as_json, lambda d: click.echo(f"{d['alias']} -> {d['address']}"), ndjson)

@contacts.command("remove")
@click.argument("alias")
@json_opt
@ndjson_opt
@click.pass_context
def contacts_remove(ctx: click.Context, alias: str, as_json: bool, ndjson: bool) -> None:
    """Forget ALIAS."""
    try:
        data = _listings().remove_contact(get_app(ctx), alias)
    except AgentLinkError as exc:
        fail(exc)
    emit(data, as_json, lambda d: click.echo(f"removed {d['alias']} ({d['address']})"), ndjson)

@contacts.command("list")
@json_opt
@ndjson_opt
@click.pass_context
def contacts_list(ctx: click.Context, as_json: bool, ndjson: bool) -> None:
    """List contacts."""
    data = {"version": 1, "contacts": _listings().contacts(get_app(ctx))}
    emit(data, as_json, lambda d: table(["ALIAS", "ADDRESS", "PROJECT", "LAST SEEN"],
                                        [[c["alias"], c["address"], c["project"], c["lastSeen"]] for c in d["contacts"]]), ndjson)
