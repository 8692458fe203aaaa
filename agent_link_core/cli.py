"""The ``agent-link`` command line for people and scripts: the root group and what the
commands share.

Exit codes: see :data:`EXIT_HELP` (0 success, 1 refused or failed, 2 bad usage, 3-7 the
outcomes a script branches on). ``--json`` prints one versioned JSON object on stdout for
scripts, ``--ndjson`` the same object on one line; errors are one stderr line in the CLI's
own words (:mod:`agent_link_core.cli_text`), never a traceback.

The core's commands are module-level click commands in :mod:`agent_link_core.commands`,
named in :data:`CORE_COMMANDS` and imported only when one runs or a help lists it (click's
"lazy loading subcommands" pattern): ``agent-link inbox`` imports the inbox's code alone.
Plugins add commands through ``agent_link_register_commands``, with the plugins loaded
apart from the database (:func:`plugin_hooks`); the group is built per invocation, never
mutated at import time.
"""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import click

from agent_link_core import __version__
from agent_link_core.errors import AgentLinkError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agent_link_core.app import App
    from agent_link_core.plugins import Hooks

EXIT_HELP = """\b
Exit codes:
  0  success (send: delivered, accepted or queued; find: exactly one match)
  1  agent-link refused or failed (stderr says why and what to do); send: rejected
  2  bad usage (unknown option, missing argument)
  3  send: outcome unknown (not resent; see --retry-unknown)
  4  find: no match
  5  find: several matches
  6  wait, send --wait: timed out before an answer
  7  send --require-delivered: not delivered (accepted or queued)
  130  Ctrl-C stopped the command (wait, send --wait: stderr says how to wait again)"""
EXIT_UNKNOWN, EXIT_NONE, EXIT_MANY, EXIT_TIMEOUT, EXIT_UNDELIVERED = 3, 4, 5, 6, 7
JSON_FORMAT_VERSION = 1


def fail(exc: AgentLinkError) -> NoReturn:
    """Print an AgentLinkError as one stderr line (plus its hint) and exit: 2 for bad
    arguments (usage), 1 for everything else (a bad setting included)."""
    from agent_link_core.cli_text import error_line

    ctx = click.get_current_context(silent=True)
    # at the root (a setting every command reads) there is no command to point at
    command = ctx.info_name if ctx is not None and ctx.parent is not None else None
    path = " ".join(ctx.command_path.split()[1:]) if command is not None and ctx is not None else None
    click.echo(error_line(exc, command, path or None), err=True)
    paths = [e.get("path", "") for e in exc.details.get("errors", [])] if exc.code == "invalid_arguments" else []
    sys.exit(2 if paths and not any(p.startswith(("env.", "file.")) for p in paths) else 1)


def get_app(ctx: click.Context) -> App:
    """The App for this invocation, created on first use and closed at exit; a state that
    cannot be opened ends the command with :func:`fail`."""
    try:
        return open_app(ctx)
    except AgentLinkError as exc:
        fail(exc)


def open_app(ctx: click.Context) -> App:
    """Like :func:`get_app`, for a command that reports the failure itself. The App reuses
    the plugins :func:`plugin_hooks` loaded for the command lookup.

    :raises AgentLinkError: the settings file, the state dir or the database cannot be read.
    """
    root = ctx.find_root()
    if "app" not in root.meta:
        from agent_link_core.app import App

        options: dict[str, Any] = {"read_only_ok": True} if root.meta.get("read_only_ok") else {}
        root.meta["app"] = App.create(hooks=plugin_hooks(ctx), **options)
        root.call_on_close(root.meta["app"].close)
    return root.meta["app"]


def plugin_hooks(ctx: click.Context) -> Hooks:
    """The plugins of this invocation, loaded once without opening the database (a command
    that opens none, such as a plugin's settings command, never needs one); the App opened
    later reuses them.

    :raises AgentLinkError: the settings file cannot be read.
    """
    root = ctx.find_root()
    if "app" in root.meta:
        return root.meta["app"].hooks
    if "hooks" not in root.meta:
        from agent_link_core import plugins

        root.meta["hooks"] = plugins.load_plugins()
    return root.meta["hooks"]


def emit(data: Any, as_json: bool, human: Any, ndjson: bool = False) -> None:
    """Print ``data`` as JSON (``--json`` indented, ``--ndjson`` one line) or call ``human(data)``.
    A JSON object without a ``version`` field gets ``version`` :data:`JSON_FORMAT_VERSION`."""
    if (as_json or ndjson) and isinstance(data, dict) and "version" not in data:
        data = {"version": JSON_FORMAT_VERSION, **data}
    if ndjson:
        click.echo(json.dumps(data, ensure_ascii=False, separators=(",", ":")))
    elif as_json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        human(data)


class WholeRange(click.IntRange):
    """An integer range whose refusal of a non-number says "not a valid integer" (click's own
    says "integer range", which reads as if a range were expected)."""

    name = "integer"


class FiniteRange(click.FloatRange):
    """A float range that also refuses ``nan`` (every comparison with it is false, so a plain
    range lets it through)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if number != number:
            self.fail(f"{value!r} is not a number.", param, ctx)
        return number


def output_lost(exc: OSError, what: str = "") -> NoReturn:
    """End a command whose stdout could not be written (a closed pipe, a full disk): one
    stderr line saying so (``what`` adds what was left undone), exit 1. Stdout is pointed at
    the null device first, so the interpreter's last flush of the unwritten rest adds nothing."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no file descriptor (a test runner's stream)
        pass
    reason = exc.strerror or type(exc).__name__
    click.echo(f"agent-link: could not write the output ({reason}){'; ' + what if what else ''}.", err=True)
    sys.exit(1)


def show_then_mark(show: Any, mark: Any, what: str) -> Any:
    """Print a read (``show()``), make sure it reached stdout, and only then call ``mark()``
    (what marks the shown mail read): output that never reached its reader marks nothing.

    :param what: what stays undone when the output is lost, for the error line.
    :returns: what ``mark()`` returns.
    """
    try:
        show()
        sys.stdout.flush()
    except OSError as exc:
        output_lost(exc, what)
    return mark()


def run_async(coro: Any, inline: bool = False) -> Any:
    """Run a coroutine of the typed API, turning an AgentLinkError into a one-line exit 1.

    :param inline: the call awaits no I/O (see :func:`agent_link_core.aio.run_inline`): run
        it without starting (or importing) asyncio.
    """
    try:
        if inline:
            from agent_link_core.aio import run_inline

            return run_inline(coro)
        import asyncio

        return asyncio.run(coro)
    except AgentLinkError as exc:
        fail(exc)


def machine_column(sessions: list[dict[str, Any]]) -> list[str] | None:
    """The MACHINE cells of a session table when a plugin listed sessions of other machines
    (their ``machine`` field; ``(stale)`` after a listing too old to trust), else None: a
    machine on its own shows no such column."""
    if not any(s.get("machine") for s in sessions):
        return None
    return [f"{s.get('machine') or ''}{' (stale)' if s.get('machineStale') else ''}" for s in sessions]


def printable(value: Any) -> str:
    """A cell for a terminal: control, format and bidi characters (which could drive the
    terminal or disguise text), line breaks and tabs included, become visible escapes
    (:func:`agent_link_core.visible.visible`)."""
    from agent_link_core.visible import visible

    return visible("" if value is None else str(value), keep="")


def table(columns: list[str], rows: list[list[Any]]) -> None:
    """A table for people (rich). Piped output is never cut to a terminal width, so the
    address column can be copied or grepped."""
    from rich.console import Console
    from rich.table import Table

    t = Table(*columns, box=None, pad_edge=False, highlight=False)
    for row in rows:
        t.add_row(*(printable(v) for v in row))
    console = Console(soft_wrap=True, markup=False, emoji=False)
    if not console.is_terminal:
        console = Console(soft_wrap=True, markup=False, emoji=False, width=100_000)
    console.print(t)


def provider_lines(providers: dict[str, Any]) -> None:
    """One stderr line per unreachable source, so a partial listing never looks complete."""
    for name, p in providers.items():
        if not p.get("complete", True):
            click.echo(f"agent-link: {name}: not fully listed ({p.get('reason') or 'incomplete'})", err=True)
        for ep in p.get("endpoints", []) or []:
            if not ep.get("reachable", True):
                click.echo(f"agent-link: {name} endpoint {ep.get('id')} ({ep.get('source')}) is unreachable", err=True)



def interrupted(command: str | None = None) -> NoReturn:
    """End a command stopped by Ctrl-C: one stderr line, exit 130 (what a shell reports for
    SIGINT), as the waiting commands do. Click's own handling would print "Aborted!" and exit 1.

    :param command: the command's path after ``agent-link`` (``send``, ``install <host>``), if known.
    """
    where = f"agent-link {command}" if command else "agent-link"
    click.echo(f"{where}: stopped by Ctrl-C (what it had finished stays done).", err=True)
    sys.exit(130)


#: The core's commands: name -> ``"module:attribute"`` of the click command, imported when
#: the command runs or a help lists it.
CORE_COMMANDS = {
    "contacts": "agent_link_core.commands.sessions:contacts",
    "find": "agent_link_core.commands.sessions:find",
    "health": "agent_link_core.commands.health:health",
    "hook": "agent_link_core.commands.health:hook",
    "inbox": "agent_link_core.commands.inbox:inbox",
    "mcp": "agent_link_core.commands.health:mcp",
    "plugins": "agent_link_core.commands.health:plugins",
    "reply": "agent_link_core.commands.message:reply",
    "send": "agent_link_core.commands.send:send",
    "sessions": "agent_link_core.commands.sessions:sessions",
    "show": "agent_link_core.commands.message:show",
    "status": "agent_link_core.commands.message:status",
    "wait": "agent_link_core.commands.message:wait",
    "watch": "agent_link_core.commands.message:watch",
    "who": "agent_link_core.commands.sessions:who",
}
#: commands that start on their own: no plugin is loaded to look them up
SELF_CONTAINED = ("mcp", "hook")


class CoreCommand(click.Command):
    """Holds a core command's place in the root group until it is looked up, so a plugin
    cannot take its name; :meth:`AgentLinkGroup.get_command` puts the real command there.

    :param target: ``"module:attribute"`` of the real command.
    """

    def __init__(self, name: str, target: str) -> None:
        super().__init__(name)
        self.target = target


class AgentLinkGroup(click.Group):
    """Root group: imports a core command's module when it is looked up, and loads the
    plugins' commands (apart from the database) the first time any but the self-contained
    commands is looked up."""

    _plugins_loaded = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, target in CORE_COMMANDS.items():
            self.add_command(CoreCommand(name, target))

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; Ctrl-C ends it with :func:`interrupted` (the waiting commands say
        more themselves, as they catch it first)."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            interrupted(ctx.invoked_subcommand)

    def _load_core_command(self, name: str) -> None:
        """Replace the placeholder of core command ``name`` by a copy of the real command:
        plugins and sender options add options to a command, which must stay out of the
        module-level original (another invocation in this process may load other plugins)."""
        import copy

        from agent_link_core.contribute import import_target

        placeholder = self.commands.get(name)
        if not isinstance(placeholder, CoreCommand):
            return
        command = copy.copy(import_target(placeholder.target))
        command.params = list(command.params)
        self.commands[name] = command

    def _load_plugin_commands(self, ctx: click.Context, for_health: bool = False) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        try:
            plugin_hooks(ctx).register_commands(self)
        except AgentLinkError as exc:
            if not for_health:  # health (a core command) reports a settings file it cannot read itself
                fail(exc)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        # The command first, then the plugins: they may add options to a core command (e.g.
        # a harness's endpoint choice), so they load for every command but the self-contained.
        if cmd_name == "health":  # health reports what it can read in a state dir it cannot write
            ctx.find_root().meta["read_only_ok"] = True
        self._load_core_command(cmd_name)
        if cmd_name not in SELF_CONTAINED:
            self._load_plugin_commands(ctx, for_health=cmd_name == "health")
        command = super().get_command(ctx, cmd_name)
        if command is not None and getattr(command.callback, "__agent_link_sender_options__", False):
            _add_sender_options(command, get_app(ctx))
        return command

    def list_commands(self, ctx: click.Context) -> list[str]:
        for name in CORE_COMMANDS:
            self._load_core_command(name)
        self._load_plugin_commands(ctx)
        return super().list_commands(ctx)


def sender_options(app: App) -> list[Any]:
    """The sender options (:class:`~agent_link_core.harness.SenderOption`) of every harness,
    one per flag (the first harness by name declaring a flag defines it)."""
    seen: dict[str, Any] = {}
    for _, harness in sorted(app.harnesses.declared().items()):  # declared: no harness is built for its flags
        for option in harness.sender_options:
            seen.setdefault(option.flag, option)
    return list(seen.values())


def option_param(flag: str) -> str:
    """The click parameter name of ``--a-flag`` (``a_flag``)."""
    return flag.lstrip("-").replace("-", "_")


def _add_sender_options(command: click.Command, app: App) -> None:
    """Give a sending command (send, reply, status, wait) the harnesses' sender options."""
    present = {p.name for p in command.params}
    for option in sender_options(app):
        if option.param not in present:
            command.params.append(click.Option([option.flag], help=option.help))
            present.add(option.param)


def build_cli() -> click.Group:
    """A fresh root group: the core commands' places, filled when looked up (plugins add
    theirs on the first lookup)."""

    @click.group(cls=AgentLinkGroup, epilog=EXIT_HELP)
    @click.version_option(__version__, prog_name="agent-link")
    def cli() -> None:
        """agent-link: let AI coding agents on this machine find and message each other."""

    return cli


# -- what the commands share -----------------------------------------------------------------

#: ``--json``, ``--ndjson`` and ``--envelope`` (a read's messages as a model sees them)
json_opt = click.option("--json", "as_json", is_flag=True, help="Print one JSON object (indented).")
ndjson_opt = click.option("--ndjson", is_flag=True, help="Print the same JSON object on one line.")
envelope_opt = click.option("--envelope", "show_envelope", is_flag=True,
                            help="Print each message inside its <agent-link-message> envelope (what a model sees).")


def with_from(f: Any) -> Any:
    """``--from ADDRESS``, plus the sender options the installed harnesses declare
    (added when the command is looked up: :meth:`AgentLinkGroup.get_command`)."""
    f = click.option("--from", "from_address", help="Act as this address (unverified).")(f)
    f.__agent_link_sender_options__ = True
    return f


def with_reader_from(f: Any) -> Any:
    """``--from ADDRESS`` for a command that shows mail: the address must be proved, as
    for ``--as`` (the help says so; :func:`who_am_i` with ``reading``)."""
    f = click.option("--from", "from_address",
                     help="Read as this address: only inside that address's own session (its AGENT_LINK_ADDRESS), "
                          "or where the machine's user set AGENT_LINK_INSPECT_ALL=1.")(f)
    f.__agent_link_sender_options__ = True
    return f


def who_am_i(app: App, from_address: str | None, named: dict[str, Any], *, reading: bool = False) -> Any:
    """The caller a command acts as: ``--from`` / a harness's sender options, else the
    current session. With ``reading`` (the command shows mail) the reader, named or not,
    must be proved, as ``--as`` is (:func:`agent_link_core.identity.prove_reader`)."""
    from agent_link_core.identity import named_sender

    if from_address is not None and not from_address.strip():
        raise click.UsageError("--from is empty: give an address such as team:alice, or leave the option out")

    given: dict[str, str] = {}
    for option in sender_options(app):
        value = named.get(option.param)
        if value is None:
            continue
        if option.requires and named.get(option_param(option.requires)) is None:
            raise click.UsageError(f"{option.flag} needs {option.requires}")
        given[option.key] = value
    try:
        me = named_sender(app, explicit=from_address, named=given or None)
    except AgentLinkError as exc:
        fail(exc)
    if reading and me.known:  # named or not, the reader must be proved (identity.prove_reader)
        from agent_link_core.identity import prove_reader, reader_proved_here

        if not reader_proved_here(app, me.address):
            run_async(prove_reader(app, me.address))  # refused: one line, exit 1
    return me


def as_caller(app: App, as_address: str | None) -> Any:
    """The reader of a command that shows mail: ``--as ADDRESS`` (checked) or the current
    session, proved either way (:func:`agent_link_core.identity.prove_reader`: only that
    address itself or a process with ``AGENT_LINK_INSPECT_ALL`` reads as it; a one-line
    error and exit otherwise)."""
    from agent_link_core.cli_text import address_error
    from agent_link_core.identity import prove_reader, reader_proved_here
    from agent_link_core.model import Caller, address_scheme

    if as_address is None:
        me = app.caller()
        address = me.address if me.known else None
    else:
        problem = address_error(as_address, "as")
        if problem is not None:
            fail(problem)
        me, address = Caller(as_address, "cli", address_scheme(as_address)), as_address
    if address is not None and not reader_proved_here(app, address):
        run_async(prove_reader(app, address))  # refused: one line, exit 1
    return me


def main() -> None:
    """Entry point of the ``agent-link`` command (everything but the hook fast path)."""
    import sqlite3

    try:
        build_cli()(prog_name="agent-link")
    except KeyboardInterrupt:  # before or after a command ran (starting up, parsing): no traceback for it
        interrupted()
    except OSError as exc:
        import errno

        # commands report their own file errors as messages: what reaches here with these is
        # stdout failing (a closed pipe, a full disk or quota)
        if exc.errno in (errno.EPIPE, errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EIO):
            output_lost(exc)
        raise_internal(exc)
    except AgentLinkError as exc:  # raised outside a command's own handling (who is calling; a write the store refused)
        fail(exc)
    except sqlite3.DatabaseError as exc:
        from agent_link_core.config import load_config
        from agent_link_core.store import database_error, is_corruption, record_damage

        try:
            path = load_config().db_path
        except AgentLinkError:
            path = "agent-link.db"
        if is_corruption(exc):
            record_damage(path, None, str(exc))
        fail(database_error(path, exc))
    except Exception as exc:  # a bug must still read as one line, not a traceback
        raise_internal(exc)


def raise_internal(exc: BaseException) -> NoReturn:
    """Report an unexpected exception as one ``internal_error`` line (the traceback goes to the log)."""
    import logging

    logging.getLogger(__name__).exception("agent-link failed", exc_info=exc)
    fail(AgentLinkError("internal_error", f"agent-link failed unexpectedly ({type(exc).__name__}).",
                        {"cause": type(exc).__name__},
                        hint="Rerun with AGENT_LINK_DEBUG=1 (the log names the cause) and report it."))
