"""``agent-link filehost add ID [--title T] | list``: manage the toy host's sessions."""

from __future__ import annotations

from typing import Any

import click

from agent_link_core.cli import EXIT_HELP, emit, get_app
from agent_link_core.store import now_ms

from agent_link_filehost.harness import SESSION_ID_RE, host_dir, read_sessions, write_sessions


@click.group("filehost", epilog=EXIT_HELP)
def filehost() -> None:
    """The filehost example host: its sessions file."""


@filehost.command("add", epilog=EXIT_HELP)
@click.argument("session_id")
@click.option("--title", help="A title people and resolve_agent can find it by.")
@click.pass_context
def add(ctx: click.Context, session_id: str, title: str | None) -> None:
    """List session SESSION_ID (replacing an entry with the same id)."""
    if not SESSION_ID_RE.match(session_id):
        raise click.UsageError("SESSION_ID is 1-128 of A-Z a-z 0-9 _ . -")
    root = host_dir(get_app(ctx))
    sessions = [s for s in read_sessions(root) if s["id"] != session_id]
    sessions.append({"id": session_id, "title": title, "lastActivityMs": now_ms()})
    write_sessions(root, sessions)
    click.echo(f"filehost:{session_id}")


@filehost.command("list", epilog=EXIT_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def list_(ctx: click.Context, as_json: bool) -> None:
    """Print the listed sessions' addresses."""
    sessions = read_sessions(host_dir(get_app(ctx)))

    def human(data: dict[str, Any]) -> None:
        for s in data["sessions"]:
            click.echo(f"filehost:{s['id']}  {s.get('title') or ''}".rstrip())

    emit({"sessions": sessions}, as_json, human)
