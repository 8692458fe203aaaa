"""``agent-link machines run | status | release NAME | permissions NAME``."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

import click

from agent_link_core.cli import EXIT_HELP, emit, get_app, printable


def _die(message: str, code: int = 1) -> None:
    """One stderr line and exit ``code`` (1: refused or failed; 2: bad usage, as the exit-code table says)."""
    click.echo(f"agent-link machines: {printable(message)}", err=True)  # an engine's or another machine's words among them
    sys.exit(code)


def _give_up(after_s: float) -> None:
    click.echo(f"agent-link machines: the relay did not stop within {after_s:g} s of the signal; exiting now.", err=True)
    os._exit(1)


@click.group("machines", epilog=EXIT_HELP)
def machines() -> None:
    """Agents on several machines: run this machine's relay to the engine, show the link."""


@machines.command("run", epilog=EXIT_HELP)
@click.option("--if-none", is_flag=True, help="Exit 0 at once, silently, when another relay of this state dir runs (how MCP servers start it).")
@click.option("--until-idle", type=click.FloatRange(min=1, max=86_400), default=None, metavar="SECONDS",
              help="Stop once the outbox is empty and nothing was sent or received for SECONDS, at most a day (how a send from the CLI starts it).")
@click.pass_context
def run(ctx: click.Context, if_none: bool, until_idle: float | None) -> None:
    """Run this machine's relay in the foreground until stopped (SIGTERM or Ctrl-C).

    One relay per state dir (MCP servers start one when none runs: see
    agent_link_machines.autostart): it publishes this machine's sessions, sends the outbox to the
    engine and delivers what other machines sent here. Exits 1 with one line for a wrong
    URL, refused credentials, an engine without JetStream or a machine name already taken;
    while the engine is only unreachable it keeps trying (mail waits in the outbox).
    """
    from agent_link_machines.autostart import STOP_S
    from agent_link_machines.common import cancel_until_done
    from agent_link_machines.relay import MachinesError, Relay, record_stop, take_lock

    app = get_app(ctx)
    try:
        take_lock(app.config)
    except MachinesError as exc:
        if if_none:
            return
        _die(str(exc))
    try:
        relay = Relay(app, idle_exit_s=until_idle)
    except (MachinesError, ValueError) as exc:
        record_stop(app.config, str(exc))  # health says why (an MCP server's relay has no terminal)
        _die(str(exc))

    async def main() -> None:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()

        def stop() -> None:
            cancel_until_done(task)
            # bounded, as an MCP server stops its relay: the relay commits before it acknowledges, so nothing is lost
            loop.call_later(STOP_S, _give_up, STOP_S)

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop)
        await relay.run()

    try:
        asyncio.run(main())
    except asyncio.CancelledError:
        pass
    except MachinesError as exc:
        _die(str(exc))


@machines.command("status", epilog=EXIT_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Show the link: engine, relay, reachable, last contact, outbox depth, machines seen
    (each with the age of its listing). Exits 1 when it shows a problem, as health does."""
    from agent_link_machines.status import health_section, summary_line

    data = health_section(get_app(ctx))

    def human(d: dict[str, Any]) -> None:
        # what other machines listed and the engine said, each on its line with its control and bidi characters escaped
        if not d["configured"]:
            click.echo(printable(d["note"]))
            return
        click.echo(printable(summary_line(d, seen=False)))
        for m in d["machinesSeen"]:
            age = "never" if m["ageMs"] is None else f"{m['ageMs'] // 1000} s ago"
            here = "  (this machine)" if m["name"] == d.get("machine") else "  (stale)" if m["stale"] else ""
            click.echo(f"  {printable(m['name'])}: {printable(m['sessions'])} sessions, listed {age}{here}")
        if d.get("problem"):
            click.echo(f"problem: {printable(d['problem'])}")

    emit(data, as_json, human)
    if data.get("problem"):
        sys.exit(1)


@machines.command("release", epilog=EXIT_HELP)
@click.argument("name")
@click.option("--force", is_flag=True,
              help="Release NAME even though its machine looks alive (published its listing within 3 heartbeats).")
@click.pass_context
def release_(ctx: click.Context, name: str, force: bool) -> None:
    """Free machine name NAME (claimed by a machine that is gone) so another may take it.

    Refused (exit 1) while NAME's machine looks alive, unless --force: two machines of one
    name would share its mail. A relay still running under NAME claims it again at its next
    heartbeat, and stops if another machine took it meanwhile."""
    from agent_link_machines.common import is_machine_name
    from agent_link_machines.relay import MachinesError
    from agent_link_machines.release import release

    if not is_machine_name(name):
        _die(f"{name!r} is not a machine name (1-64 of A-Z a-z 0-9 _ -).", 2)
    try:
        removed = asyncio.run(release(get_app(ctx), name, force=force))
    except (MachinesError, ConnectionError, ValueError) as exc:  # ValueError: this machine's own AGENT_LINK_MACHINE
        _die(str(exc))
    click.echo(f"released {name}" if removed else f"no machine claims {name}")


@machines.command("permissions", epilog=EXIT_HELP)
@click.argument("name")
def permissions(name: str) -> None:
    """Print the NATS permissions of machine NAME's user (JSON, which the server's config
    accepts as the user's `permissions:` value): it may send mail to every machine but read
    only its own, and write only its own directory entry (agent_link_machines.permissions)."""
    import json

    from agent_link_machines.permissions import machine_permissions

    try:
        click.echo(json.dumps(machine_permissions(name), indent=1))
    except ValueError as exc:  # the only refusal: NAME is no machine name, a usage error
        _die(f"{exc}.", 2)
