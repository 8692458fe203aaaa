"""``agent-link contacts add|rename|remove|list``: short aliases for sessions."""

from __future__ import annotations

import click

from agent_link_core.cli import EXIT_HELP, emit, fail, get_app, json_opt, ndjson_opt, run_async, table
from agent_link_core.errors import AgentLinkError


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
    from agent_link_core import api

    app = get_app(ctx)
    address = run_async(api.resolve_target(app, target, app.caller()))
    try:
        data = api.add_contact(app, alias, address)
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
    from agent_link_core import api

    try:
        data = api.rename_contact(get_app(ctx), old, new)
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
    from agent_link_core import api

    try:
        data = api.remove_contact(get_app(ctx), alias)
    except AgentLinkError as exc:
        fail(exc)
    emit(data, as_json, lambda d: click.echo(f"removed {d['alias']} ({d['address']})"), ndjson)

@contacts.command("list")
@json_opt
@ndjson_opt
@click.pass_context
def contacts_list(ctx: click.Context, as_json: bool, ndjson: bool) -> None:
    """List contacts."""
    from agent_link_core import api

    data = {"version": 1, "contacts": api.list_contacts(get_app(ctx))}
    emit(data, as_json, lambda d: table(["ALIAS", "ADDRESS", "PROJECT", "LAST SEEN"],
                                        [[c["alias"], c["address"], c["project"], c["lastSeen"]] for c in d["contacts"]]), ndjson)
