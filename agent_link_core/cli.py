"""The ``agent-link`` command line for people and scripts.

Exit codes: 0 success; 1 agent-link refused or failed (the message on stderr says what and
what to do); 2 bad usage. ``--json`` prints one JSON object on stdout for scripts.
Plugins add commands through ``agent_link_register_commands``; the group is built lazily
from the plugin manager, never mutated at import time.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from agent_link_core import __version__
from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError

EXIT_HELP = """\b
Exit codes:
  0  success
  1  agent-link refused or failed (stderr says why and what to do)
  2  bad usage (unknown option, missing argument)"""


def fail(exc: AgentLinkError) -> None:
    """Print an AgentLinkError as one stderr line (plus its hint) and exit 1."""
    line = f"agent-link: {exc.message}"
    if exc.hint:
        line += f" {exc.hint}"
    click.echo(line, err=True)
    sys.exit(1)


def get_app(ctx: click.Context) -> App:
    """The App for this invocation, created on first use and closed at exit."""
    root = ctx.find_root()
    if "app" not in root.meta:
        try:
            root.meta["app"] = App.create()
        except AgentLinkError as exc:
            fail(exc)
        root.call_on_close(root.meta["app"].close)
    return root.meta["app"]


def emit(data: Any, as_json: bool, human: Any) -> None:
    """Print ``data`` as JSON (scripts) or call ``human(data)`` (people)."""
    if as_json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=None, sort_keys=False))
    else:
        human(data)


def _print_health(h: dict[str, Any]) -> None:
    click.echo(f"agent-link {h['version']}")
    click.echo(f"  address:    {h['address']} ({h['addressSource']})")
    click.echo(f"  host:       {h['host'] or 'unknown'}")
    click.echo(f"  state dir:  {h['stateDir']['path']} ({'exists' if h['stateDir']['exists'] else 'missing'})")
    click.echo(f"  plugins:    {', '.join(h['plugins']['loaded']) or 'none'}")
    for name, reason in h["plugins"]["failed"].items():
        click.echo(f"  BROKEN plugin {name}: {reason}")
    for dep in h["env"]["deprecated"]:
        click.echo(f"  deprecated variable {dep['name']}: use {dep['canonical']}")
    for c in h["env"]["conflicts"]:
        click.echo(f"  conflict: {c['ignored']} ignored, {c['winner']} wins")
    for w in h["reminders"]["warnings"]:
        click.echo(f"  warning: {w['message']}")
    click.echo(f"  reminders:  limit {h['reminders']['limit']}, every {h['reminders']['intervalMs']} ms")


class AgentLinkGroup(click.Group):
    """Root group: loads plugin commands lazily, the first time a command is looked up."""

    _plugins_loaded = False

    def _load_plugin_commands(self, ctx: click.Context) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        try:
            get_app(ctx).hooks.register_commands(self)
        except AgentLinkError as exc:
            fail(exc)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            self._load_plugin_commands(ctx)
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load_plugin_commands(ctx)
        return super().list_commands(ctx)


def build_cli() -> click.Group:
    """A fresh root group with the core commands (plugins add theirs on first lookup)."""

    @click.group(cls=AgentLinkGroup, epilog=EXIT_HELP)
    @click.version_option(__version__, prog_name="agent-link")
    def cli() -> None:
        """agent-link: let AI coding agents on this machine find and message each other."""

    @cli.command(epilog=EXIT_HELP)
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
    @click.pass_context
    def health(ctx: click.Context, as_json: bool) -> None:
        """Show whether agent-link works here and what it sees."""
        emit(get_app(ctx).health(), as_json, _print_health)

    @cli.command(epilog=EXIT_HELP)
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
    @click.pass_context
    def plugins(ctx: click.Context, as_json: bool) -> None:
        """List loaded, blocked and broken plugins."""
        report = get_app(ctx).plugin_report
        data = {"loaded": report.loaded, "blocked": report.blocked, "failed": report.failed, "versions": report.versions}

        def human(d: dict[str, Any]) -> None:
            for name in d["loaded"]:
                click.echo(f"{name} {d['versions'].get(name, '')}".rstrip())
            for name in d["blocked"]:
                click.echo(f"{name} (disabled by AGENT_LINK_DISABLE_PLUGINS)")
            for name, reason in d["failed"].items():
                click.echo(f"{name} BROKEN: {reason}")
            if not any(d[k] for k in ("loaded", "blocked", "failed")):
                click.echo("no plugins installed")

        emit(data, as_json, human)

    @cli.command(epilog=EXIT_HELP)
    @click.option("--as", "as_address", help="Read the mailbox of this address (default: the current session).")
    @click.option("--limit", type=click.IntRange(1, 100), default=20, show_default=True)
    @click.option("--peek", is_flag=True, help="Do not mark the messages delivered.")
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
    @click.pass_context
    def inbox(ctx: click.Context, as_address: str | None, limit: int, peek: bool, as_json: bool) -> None:
        """Read the messages other agents sent to this session."""
        from agent_link_core.model import Caller, address_scheme, is_address

        app = get_app(ctx)
        if as_address is not None:
            if not is_address(as_address):
                raise click.BadParameter("expected an address such as <harness>:<id>", param_hint="--as")
            caller = Caller(as_address, "cli", address_scheme(as_address))
        else:
            caller = app.caller()
        try:
            data = app.inbox(caller, limit=limit, mark=not peek)
        except AgentLinkError as exc:
            fail(exc)

        def human(d: dict[str, Any]) -> None:
            if not d["messages"]:
                click.echo(f"No open messages for {d['address']}.")
                return
            click.echo(d["renderedBlock"])

        emit(data, as_json, human)

    @cli.command(epilog=EXIT_HELP)
    def mcp() -> None:
        """Serve the agent-link MCP tools over stdio (hosts start this)."""
        from agent_link_core.server import main as serve_main

        try:
            serve_main()
        except AgentLinkError as exc:
            fail(exc)

    @cli.command(context_settings={"ignore_unknown_options": True}, epilog=EXIT_HELP)
    @click.argument("host")
    @click.argument("event")
    def hook(host: str, event: str) -> None:
        """Run a host hook: reads the host's hook JSON on stdin, prints the host's hook JSON.

        Always exits 0, so a failing hook never blocks a prompt.
        """
        from agent_link_core.hook import main as hook_main

        sys.exit(hook_main([host, event]))

    return cli


def main() -> None:
    """Entry point of the ``agent-link`` command (everything but the hook fast path)."""
    build_cli()(prog_name="agent-link")
