"""A plugin's command declared by name and help, its code imported when it runs; apart from
:mod:`agent_link_core.contribute` so that registering a plugin never imports click."""

from __future__ import annotations

import sys
from typing import Any

import click

from agent_link_core.lazy import import_target


class LazyCommand(click.Command):
    """A click command declared by name and help; ``target`` (``"package.module:attribute"`` of
    the real :class:`click.Command`, or of a function without arguments returning it) is imported
    when it runs or its ``--help`` is asked. A target that cannot be imported ends that command
    alone (exit 1, one stderr line naming the plugin) and is reported as the plugin's problem.
    ``sender``: the command has ``--from`` (a core-style declared command), so the harnesses' sender
    options are added to it when it is looked up (which imports it); ``reader``: it only reads
    (:attr:`agent_link_core.cli_run.Command.reader`)."""

    def __init__(self, name: str, target: str, help: str, sender: bool = False, reader: bool = False) -> None:
        super().__init__(name, help=help, add_help_option=False)
        self.target, self.sender, self.reader = target, sender, reader
        self._loaded: click.Command | None = None

    def load(self, ctx: click.Context | None = None) -> click.Command:
        """The real command (imported on first use). :raises SystemExit: 1 when it cannot be."""
        if self._loaded is not None:
            return self._loaded
        try:
            command = import_target(self.target)
            if not isinstance(command, click.Command) and callable(command):  # a factory building it
                command = command()
            if not isinstance(command, click.Command):
                raise TypeError(f"{self.target} is a {type(command).__name__}, not a click command")
        except (Exception, SystemExit) as exc:  # the plugin's fault: only this command is lost
            from agent_link_core.boundary import load_failed

            meta = ctx.find_root().meta if ctx is not None else {}
            hooks = getattr(meta.get("app"), "hooks", None) or meta.get("hooks")
            plugin, error = load_failed(hooks, self.target, f"command {self.name}", f"command {self.name!r} ", exc)
            if hooks is None:  # else reported like any plugin failure (its log line on stderr)
                click.echo(f"agent-link {self.name}: the {plugin} plugin's {error}. Reinstall the plugin, or turn it off: "
                           f"AGENT_LINK_DISABLE_PLUGINS={plugin}", err=True)
            sys.exit(1)
        self._loaded = command
        return command

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        """Parse ``args`` with the real command, which then runs in this one's place."""
        return self.load(parent).make_context(info_name, args, parent=parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the real command."""
        return self.load(ctx).invoke(ctx)
