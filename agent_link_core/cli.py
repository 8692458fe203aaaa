"""The ``agent-link`` command line for people and scripts: the root group and what the
commands share.

Exit codes: see :data:`EXIT_HELP` (0 success, 1 refused or failed, 2 bad usage, 3-7 the
outcomes a script branches on). ``--json`` prints one versioned JSON object on stdout for
scripts, ``--ndjson`` the same object on one line; errors are one stderr line in the CLI's
own words (:mod:`agent_link_core.cli_text`), never a traceback.

The core's commands are declared once as data in :mod:`agent_link_core.commands`
(:func:`agent_link_core.cli_run.command`), named in :data:`CORE_COMMANDS` and imported only
when one runs or a help lists it (click's "lazy loading subcommands" pattern): ``agent-link
inbox`` imports the inbox's code alone. The hot ones run without click
(:func:`agent_link_core.cli_run.run_fast`); here :func:`click_command` builds click's command
from the same declaration, for help, usage errors and whatever the fast path leaves to click.
Plugins add commands through ``agent_link_register_commands``, with the plugins loaded
apart from the database (:func:`plugin_hooks`); the group is built per invocation, never
mutated at import time. What the commands share without click is re-exported from
:mod:`agent_link_core.cli_run` (plugins import it from here).
"""

from __future__ import annotations

import sys
from typing import Any, Callable

import click

from agent_link_core import __version__
from agent_link_core.cli_run import (READERS, EXIT_HELP, EXIT_MANY, EXIT_NONE, EXIT_TIMEOUT, EXIT_UNDELIVERED, EXIT_UNKNOWN, FROM,  # noqa: F401
                                     ENVELOPE, JSON, NDJSON,
                                     JSON_FORMAT_VERSION, READER_FROM, Command, Param, as_caller, emit, fail, get_app, guarded,
                                     interrupted, open_app, output_lost, plugin_hooks, run_async, sender_options,
                                     show_then_mark, usage_line, who_am_i)
from agent_link_core.errors import AgentLinkError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agent_link_core.app import App


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


#: The core's commands: name -> ``"module:attribute"`` of the click command, imported when
#: the command runs or a help lists it.
CORE_COMMANDS = {
    "health": "agent_link_core.commands.health:health",
    "hook": "agent_link_core.commands.health:hook",
    "inbox": "agent_link_core.commands.inbox:inbox",
    "mcp": "agent_link_core.commands.health:mcp",
    "plugins": "agent_link_core.commands.health:plugins",
    "reply": "agent_link_core.commands.message:reply",
    "send": "agent_link_core.commands.send:send",
    "show": "agent_link_core.commands.message:show",
    "status": "agent_link_core.commands.message:status",
    "wait": "agent_link_core.commands.message:wait",
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
        declared = import_target(placeholder.target)
        if isinstance(declared, Command):
            self.commands[name] = click_command(declared)
            return
        command = copy.copy(declared)
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
        if cmd_name in READERS:
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


def click_param(p: Param) -> click.Parameter:
    """Click's parameter for a declared one (:class:`agent_link_core.cli_run.Param`)."""
    if p.argument:
        return click.Argument([p.name], required=p.required)
    low, high = (None if n is None else int(n) for n in (p.low, p.high))
    kind: Any = {"whole": lambda: WholeRange(low, high), "finite": lambda: FiniteRange(p.low, p.high),
                 "choice": lambda: click.Choice(list(p.choices)), "file": lambda: click.Path(dir_okay=False),
                 }.get(p.kind or "", lambda: None)()
    return click.Option([*p.decls, p.name], type=kind, is_flag=p.flag, default=p.default, help=p.help,
                        show_default=p.show_default)


def click_command(declared: Command) -> click.Command:
    """A fresh click command for a declared core command (plugins and sender options may add
    options to it, never to the declaration)."""
    command = click.command(declared.name, epilog=declared.epilog)(click.pass_context(declared.callback))
    command.params = [click_param(p) for p in declared.params]
    command.callback.__agent_link_sender_options__ = declared.sender  # type: ignore[union-attr]
    return command


def declared_option(declared: Param) -> Callable[[Any], Any]:
    """A click option decorator for a declared flag or text option (for plugins' click commands);
    ``--from`` (:data:`~agent_link_core.cli_run.FROM`, ``READER_FROM``) brings the sender
    options the installed harnesses declare (added when the command is looked up:
    :meth:`AgentLinkGroup.get_command`)."""
    def add(f: Any) -> Any:
        f = click.option(*declared.decls, declared.name, is_flag=declared.flag, help=declared.help)(f)
        if declared in (FROM, READER_FROM):
            f.__agent_link_sender_options__ = True
        return f

    return add


#: ``--json``, ``--ndjson``, ``--envelope`` (a read's messages as a model sees them), ``--from``
#: and ``--from`` for a command that shows mail (proved as ``--as`` is: :func:`who_am_i` with ``reading``)
json_opt, ndjson_opt, envelope_opt, with_from, with_reader_from = map(declared_option, (JSON, NDJSON, ENVELOPE, FROM, READER_FROM))


def main() -> None:
    """Entry point of the ``agent-link`` command (everything but the hook fast path)."""
    guarded(lambda: run_click(build_cli()))


#: click 8.2+ raises this for a group called without a command (8.1 prints its help and exits 0)
NO_ARGS_IS_HELP: Any = getattr(click.exceptions, "NoArgsIsHelpError", ())


def run_click(cli: click.Group) -> None:
    """Run the click group as click's standalone mode does, but with a usage error (a bad
    option, value or command) as one stderr line (:func:`~agent_link_core.cli_run.usage_line`)
    and exit 2; any other click error as click shows it, with its exit code.

    :raises SystemExit: always, with the command's exit status.
    """
    try:
        status = cli.main(prog_name="agent-link", standalone_mode=False)
    except NO_ARGS_IS_HELP as exc:  # `agent-link` alone: its help, as click shows it
        exc.show()
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        path = exc.ctx.command_path if exc.ctx is not None else "agent-link"
        click.echo(usage_line(path, exc.format_message()), err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("Aborted!", err=True)
        sys.exit(1)
    sys.exit(status if isinstance(status, int) else 0)
