"""One-line hook implementations for what a plugin contributes as fixed records.

Most plugins register a constant list of settings, tools or migrations; instead of writing
the same loop in every plugin::

    from agent_link_core.contribute import migrations, registers

    agent_link_register_settings = registers(SETTINGS)
    agent_link_register_tools = registers("agent_link_mine.tools:TOOLS")  # imported when called
    agent_link_schema = migrations(MIGRATIONS)

pluggy finds them by the module attribute's name, like any hook implementation.

Commands and tool handlers are declared here and imported when used
(:class:`LazyCommand`, :func:`lazy_handler`; the plugin guide, docs/plugins.md, section 1).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import click

from agent_link_core.hookspecs import hookimpl

Records = Iterable[Any] | str


def _resolve(records: Records) -> Iterable[Any]:
    """``records``, or the attribute a ``"module:attribute"`` string names (imported now)."""
    if isinstance(records, str):
        module, _, attribute = records.partition(":")
        return getattr(importlib.import_module(module), attribute)  # type: ignore[no-any-return]
    return records


def registers(records: Records) -> Callable[[Callable[[Any], None]], None]:
    """A ``register``-style hook implementation registering each of ``records`` (a sequence,
    or ``"module:attribute"`` for one imported only when the hook runs)."""

    @hookimpl
    def register_each(register: Callable[[Any], None]) -> None:
        for record in _resolve(records):
            register(record)

    return register_each


def migrations(records: Records) -> Callable[[], list[Any]]:
    """An ``agent_link_schema`` implementation returning ``records`` (owned by the plugin)."""

    @hookimpl
    def schema() -> list[Any]:
        return list(_resolve(records))

    return schema


# -- declared now, imported when used ------------------------------------------------------
#
# A plugin's entry module is imported by every agent-link process (each CLI command, each MCP
# server), so what it contributes is declared there without importing the code behind it: a
# command by its name and help, a tool by its name, description and schemas. The module
# holding the code is imported the first time that command runs or that tool is called. A
# module that cannot be imported then breaks only that command or tool: the failure is the
# plugin's (reported like any hook failure) and ``--help``, ``tools/list`` and health still
# name what the plugin declared.


def import_target(target: str) -> Any:
    """The object ``"package.module:attribute"`` names (the module imported now).

    :raises ValueError: ``target`` has no ``:``.
    :raises Exception: whatever importing the module raises (``ImportError``, or the
        module's own failure), and ``AttributeError`` for a missing attribute.
    """
    module, sep, attribute = target.partition(":")
    if not sep or not module or not attribute:
        raise ValueError(f"{target!r} is not 'package.module:attribute'")
    return getattr(importlib.import_module(module), attribute)


def _owner_of(ctx: click.Context | None, target: str) -> tuple[Any, str]:
    """The invocation's hooks (the App's, or those the CLI loaded before opening it; or None)
    and the plugin whose package holds ``target``."""
    meta = ctx.find_root().meta if ctx is not None else {}
    hooks = getattr(meta.get("app"), "hooks", None) or meta.get("hooks")
    plugin = hooks.plugin_of_module(target.partition(":")[0]) if hooks is not None else None
    return hooks, plugin or target.partition(".")[0]


class LazyCommand(click.Command):
    """A click command declared by name and help; its code is imported when it runs.

    ``agent-link --help`` lists it from the declaration; ``agent-link NAME ...`` (and
    ``NAME --help``) imports ``target`` and runs the real command in its place. A target
    that cannot be imported ends that command alone with one stderr line naming the plugin
    and exit 1, and is reported as the plugin's problem (``agent-link plugins``, health).

    :param name: the command's name (``endpoints``, ``web``).
    :param target: ``"package.module:attribute"`` of the real :class:`click.Command`, or of
        a function without arguments returning it.
    :param help: the first paragraph of its help (the root ``--help`` shortens it as it
        would the real command's).
    """

    def __init__(self, name: str, target: str, help: str) -> None:
        super().__init__(name, help=help, add_help_option=False)
        self.target = target
        self._loaded: click.Command | None = None

    def load(self, ctx: click.Context | None = None) -> click.Command:
        """The real command (imported on first use).

        :raises SystemExit: exit 1 after one stderr line when it cannot be imported.
        """
        if self._loaded is not None:
            return self._loaded
        try:
            command = import_target(self.target)
            if not isinstance(command, click.Command) and callable(command):  # a factory building it
                command = command()
            if not isinstance(command, click.Command):
                raise TypeError(f"{self.target} is a {type(command).__name__}, not a click command")
        except (Exception, SystemExit) as exc:  # the plugin's fault: only this command is lost
            from agent_link_core.boundary import describe

            hooks, plugin = _owner_of(ctx, self.target)
            error = f"command {self.name!r} cannot load: {describe(exc)}"
            if hooks is not None:  # reported like any plugin failure: one log line on stderr, health, plugins
                hooks.boundary.fault(plugin, f"command {self.name}", error, exc=exc if isinstance(exc, Exception) else None)
            else:
                click.echo(f"agent-link {self.name}: the {plugin} plugin's {error}. Reinstall the plugin, or turn it off: "
                           f"AGENT_LINK_DISABLE_PLUGINS={plugin}", err=True)
            sys.exit(1)
        self._loaded = command
        return command

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        """Parse ``args`` with the real command (which then runs in this one's place)."""
        return self.load(parent).make_context(info_name, args, parent=parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the real command (for callers that invoke a declared command directly)."""
        return self.load(ctx).invoke(ctx)


def command(name: str, target: str, help: str) -> LazyCommand:
    """A :class:`LazyCommand` for ``cli.add_command(...)`` in ``agent_link_register_commands``."""
    return LazyCommand(name, target, help)


def commands(*declared: LazyCommand) -> Callable[[click.Group], None]:
    """An ``agent_link_register_commands`` implementation adding each declared command."""

    @hookimpl
    def register_commands(cli: click.Group) -> None:
        for cmd in declared:
            cli.add_command(cmd)

    return register_commands


def lazy_handler(target: str) -> Callable[..., Awaitable[dict[str, Any]]]:
    """A tool handler (``ToolSpec.handler``) whose code is imported at the tool's first call.

    :param target: ``"package.module:attribute"`` of the real ``async (app, arguments,
        call) -> dict`` handler.
    :returns: an ``async def`` handler; when the target cannot be imported, each call
        answers ``internal_error`` naming the plugin (``details.cause``: the exception
        class; the hint says how to turn it off), and the failure is reported as the
        plugin's problem (``tool handler <target>``), never disabling it.
    """
    loaded: list[Callable[..., Awaitable[dict[str, Any]]]] = []

    async def handler(app: Any, arguments: dict[str, Any], call: Any) -> dict[str, Any]:
        if not loaded:
            try:
                loaded.append(import_target(target))
            except (Exception, SystemExit) as exc:
                from agent_link_core.boundary import describe
                from agent_link_core.errors import AgentLinkError

                hooks = getattr(app, "hooks", None)
                plugin = (hooks.plugin_of_module(target.partition(":")[0]) if hooks is not None else None) \
                    or target.partition(".")[0]
                if hooks is not None:
                    hooks.boundary.fault(plugin, f"tool handler {target}", f"cannot load: {describe(exc)}",
                                         exc=exc if isinstance(exc, Exception) else None)
                raise AgentLinkError(
                    "internal_error", f"The {plugin} plugin's code for this tool cannot be loaded.",
                    {"cause": type(exc).__name__},
                    hint=f"agent_link_health lists the plugin's problem; reinstall it, or turn it off: "
                         f"AGENT_LINK_DISABLE_PLUGINS={plugin}") from None
        return await loaded[0](app, arguments, call)

    handler.__qualname__ = handler.__name__ = f"lazy:{target}"
    return handler
