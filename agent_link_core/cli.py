"""The ``agent-link`` root group (click), built per invocation, and what plugins' click commands share (with the helpers of
:mod:`agent_link_core.cli_run`, re-exported here). Plugins add commands through ``agent_link_register_commands``."""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Callable

import click

from agent_link_core import __version__
from agent_link_core.cli_run import (EXIT_HELP, EXIT_UNKNOWN, FAST_COMMANDS, FROM, JSON, NDJSON, READER_FROM, Command, Param,  # noqa: F401
                                     emit, fail, get_app, guarded, ignore_ctrl_c, import_target, interrupted, plugin_hooks, run_async, sender_params,
                                     usage_line, who_am_i)
from agent_link_core.cli_text import printable
from agent_link_core.errors import AgentLinkError


class WholeRange(click.IntRange):
    """An integer range refusing a non-number as "not a valid integer" (click says "integer range")."""

    name = "integer"


class FiniteRange(click.FloatRange):
    """A float range that also refuses ``nan`` (every comparison with it is false)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if number != number:
            self.fail(f"{value!r} is not a number.", param, ctx)
        return number


def table(columns: list[str], rows: list[list[Any]]) -> None:
    """Print a table for people (rich); piped, it is never cut to a terminal's width."""
    from rich.console import Console
    from rich.table import Table

    t = Table(*columns, box=None, pad_edge=False, highlight=False)
    for row in rows:
        t.add_row(*(printable(v) for v in row))
    console = Console(soft_wrap=True, markup=False, emoji=False)
    if not console.is_terminal:
        console = Console(soft_wrap=True, markup=False, emoji=False, width=100_000)
    console.print(t)


#: The core's commands: name -> ``"module:attribute"`` of a :class:`~agent_link_core.cli_run.Command`
CORE_COMMANDS = {**FAST_COMMANDS, **{name: f"agent_link_core.commands.health:{name}" for name in ("health", "plugins", "mcp", "hook")}}
#: commands that start on their own: no plugin is loaded to look them up
SELF_CONTAINED = ("mcp", "hook")


class AgentLinkGroup(click.Group):
    """Root group: imports a core command when looked up, the plugins' commands on the first lookup of any but :data:`SELF_CONTAINED`."""

    _plugins_loaded = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._unloaded = dict(CORE_COMMANDS)  # name -> target of the placeholders
        for name in CORE_COMMANDS:
            self.add_command(click.Command(name))  # a placeholder until looked up: no plugin can take its name

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except KeyboardInterrupt:  # while the root's options ran (--help loads the plugins): not click's "Aborted!", exit 1
            interrupted()

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:  # the waiting commands catch it first and say more
            interrupted(ctx.invoked_subcommand)
        finally:  # done: click's teardown would turn a Ctrl-C into a blank line and Abort
            ignore_ctrl_c()

    def _load_core_command(self, name: str) -> None:
        target = self._unloaded.pop(name, None)
        if target is not None:  # a fresh command: options plugins add to it end with this invocation
            self.commands[name] = click_command(import_target(target))

    def _load_plugin_commands(self, ctx: click.Context, for_health: bool = False) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        try:
            plugin_hooks(ctx).register_commands(self)
        except AgentLinkError as exc:
            if not for_health:  # health reports a settings file it cannot read itself
                fail(exc)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        # the command first, then the plugins: they may add options to a core command
        self._load_core_command(cmd_name)
        if cmd_name not in SELF_CONTAINED:
            self._load_plugin_commands(ctx, for_health=cmd_name == "health")
        command = super().get_command(ctx, cmd_name)
        if getattr(command, "reader", False):  # declared by the command: it opens the App read-only when it cannot write
            ctx.find_root().meta["read_only_ok"] = True
        if getattr(command, "sender", False):  # a plugin's command with --from: its real one takes the options
            with contextlib.suppress(SystemExit):  # one that cannot load (said, reported): a listing goes on
                command = command.load(ctx)  # type: ignore[union-attr]
        if command is not None and getattr(command.callback, "__agent_link_sender_options__", False):
            with contextlib.suppress(AgentLinkError):  # a bad setting: a help still lists the command and running it says why
                command.params += [click_param(p) for p in sender_params(plugin_hooks(ctx).harnesses(), {p.name for p in command.params})]
        return command

    def list_commands(self, ctx: click.Context) -> list[str]:
        for name in CORE_COMMANDS:
            self._load_core_command(name)
        self._load_plugin_commands(ctx)
        return super().list_commands(ctx)


def build_cli() -> click.Group:
    """A fresh root group (:class:`AgentLinkGroup`)."""

    @click.group(cls=AgentLinkGroup, epilog=EXIT_HELP, context_settings={"help_option_names": ["-h", "--help"]})
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
    return click.Option([*p.opts, p.name], type=kind, is_flag=p.flag, default=p.default, help=p.help,
                        show_default=p.show_default)


def click_command(declared: Command) -> click.Command:
    """A fresh click command for a declared command (options added to it never reach the declaration)."""
    command = click.command(declared.name, help=declared.callback.__doc__, epilog=EXIT_HELP)(click.pass_context(declared.run))
    command.params = [click_param(p) for p in declared.params]
    command.callback.__agent_link_sender_options__ = declared.sender  # type: ignore[union-attr]
    command.reader = declared.reader  # type: ignore[attr-defined]
    return command


def declared_option(declared: Param) -> Callable[[Any], Any]:
    """A click option decorator for a declared flag or text option (``--from`` also brings the harnesses' sender options)."""
    def one_format(ctx: click.Context, param: click.Parameter, value: Any) -> Any:  # the second of the two given refuses
        if value and declared in (JSON, NDJSON) and ctx.params.get("ndjson" if declared is JSON else "as_json"):
            raise click.UsageError("choose one of --json and --ndjson", ctx)
        return value

    def add(f: Any) -> Any:
        f = click.option(*declared.opts, declared.name, is_flag=declared.flag, help=declared.help, callback=one_format)(f)
        if declared in (FROM, READER_FROM):
            f.__agent_link_sender_options__ = True
        return f

    return add


#: ``--json``, ``--ndjson`` and ``--from`` of a command that shows mail (proved: :func:`who_am_i` with ``reading``)
json_opt, ndjson_opt, with_reader_from = map(declared_option, (JSON, NDJSON, READER_FROM))


def main() -> None:
    """Entry point of the ``agent-link`` command (everything but the hook fast path)."""
    guarded(lambda: run_click(build_cli()))


#: click 8.2+ raises this for a group called without a command (8.1 prints its help and exits 0)
NO_ARGS_IS_HELP: Any = getattr(click.exceptions, "NoArgsIsHelpError", ())


def run_click(cli: click.Group) -> None:
    """Run the group as click's standalone mode does, a usage error one stderr line (:func:`usage_line`); always raises
    SystemExit with the command's exit status."""
    try:
        status = cli.main(prog_name="agent-link", standalone_mode=False)
    except click.ClickException as exc:
        if isinstance(exc, click.UsageError) and not isinstance(exc, NO_ARGS_IS_HELP):  # not `agent-link` alone: its help
            click.echo(usage_line(exc.ctx.command_path if exc.ctx is not None else "agent-link", exc.format_message()), err=True)
        else:
            exc.show()
        sys.exit(exc.exit_code)
    sys.exit(status if isinstance(status, int) else 0)
