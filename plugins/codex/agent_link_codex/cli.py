"""``agent-link endpoints add|list|remove``: the private registry of Codex app-servers.

Added to the ``agent-link`` CLI by the codex plugin (``agent_link_register_commands``); the
work is done by :mod:`agent_link_codex.api`. Exit codes are the CLI's: 0 success, 1 refused or
failed (one stderr line saying what and what to do; a full registry included), 2 bad usage.
Socket paths and URLs are printed only with ``--show-paths``.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from agent_link_core.cli import EXIT_HELP, emit, fail, get_app, run_async, table
from agent_link_core.errors import AgentLinkError

json_opt = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")


def _label(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    label = value.strip()
    if not 1 <= len(label) <= 80 or not label.isprintable():
        raise click.BadParameter("1-80 printable characters")
    return label


@click.group(epilog=EXIT_HELP)
def endpoints() -> None:
    """Codex app-servers to use besides the default ones (a registry only you can read)."""


@endpoints.command("add", epilog=EXIT_HELP)
@click.argument("path")
@click.option("--label", callback=_label, help="A name to show instead of the path (1-80 characters).")
@click.option("--token-file", type=click.Path(dir_okay=False), help="The capability-token file of a ws:// endpoint.")
@json_opt
@click.pass_context
def add(ctx: click.Context, path: str, label: str | None, token_file: str | None, as_json: bool) -> None:
    """Register the app-server at PATH (its Unix socket, or a ws:// URL) once it answers.

    The JSON's ``registration`` is added, updated or registry-full (then nothing is saved
    and the command exits 1).
    """
    from agent_link_codex import api

    data = run_async(api.add_endpoint(get_app(ctx), path, label=label, token_file=token_file))
    ep = data["endpoint"]
    if data["registration"] == "registry-full":
        if as_json:
            emit(data, True, None)
        used, limit = data["capacity"]["used"], data["capacity"]["limit"]
        click.echo(f"agent-link: the endpoint registry is full ({used} of {limit}); {ep['id']} answers but was not saved. "
                   "Remove one with `agent-link endpoints remove ID`, then add it again.", err=True)
        sys.exit(1)
    emit(data, as_json, lambda d: click.echo(f"{d['registration']} {ep['id']}" + (f" ({ep['label']})" if ep["label"] else "")))


@endpoints.command("list", epilog=EXIT_HELP)
@click.option("--show-paths", is_flag=True, help="Also show each socket path or URL.")
@json_opt
@click.pass_context
def list_(ctx: click.Context, show_paths: bool, as_json: bool) -> None:
    """Every endpoint agent-link would use, with whether it answers now."""
    from agent_link_codex import api

    data = run_async(api.list_endpoints(get_app(ctx), show_paths=show_paths))

    def human(d: dict[str, Any]) -> None:
        rows = [[e["id"], e["label"], e["source"], "yes" if e["reachable"] else f"no ({e['reason']})"]
                + ([e["target"]] if show_paths else []) for e in d["endpoints"]]
        table(["ID", "LABEL", "SOURCE", "REACHABLE"] + (["PATH"] if show_paths else []), rows)
        click.echo(f"registered with `agent-link endpoints add`: {d['capacity']['used']} (at most {d['capacity']['limit']}); "
                   "the others are found on their own (SOURCE)")

    emit(data, as_json, human)


@endpoints.command("remove", epilog=EXIT_HELP)
@click.argument("endpoint_id")
@json_opt
@click.pass_context
def remove(ctx: click.Context, endpoint_id: str, as_json: bool) -> None:
    """Unregister ENDPOINT_ID (see `agent-link endpoints list`)."""
    from agent_link_codex import api

    try:
        data = api.remove_endpoint(get_app(ctx), endpoint_id)
    except AgentLinkError as exc:
        fail(exc)
    emit(data, as_json, lambda d: click.echo(f"removed {d['removed']['id']}"))
