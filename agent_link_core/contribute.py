"""One-line hook implementations for what a plugin contributes as fixed records.

Most plugins register a constant list of settings, tools or migrations; instead of writing
the same loop in every plugin::

    from agent_link_core.contribute import migrations, registers

    agent_link_register_settings = registers(SETTINGS)
    agent_link_register_tools = registers("agent_link_mine.tools:TOOLS")  # imported when called
    agent_link_schema = migrations(MIGRATIONS)

pluggy finds them by the module attribute's name, like any hook implementation.

Commands and tool handlers are declared here and imported when used
(:class:`~agent_link_core.lazy_command.LazyCommand`, :func:`lazy_handler`; the plugin guide, docs/plugins.md, section 1).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from agent_link_core.cli_run import import_target
from agent_link_core.hookspecs import hookimpl

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    import click

    from agent_link_core.lazy_command import LazyCommand

    Records = Iterable[Any] | str


def _resolve(records: Records) -> Iterable[Any]:
    """``records``, or the attribute a ``"module:attribute"`` string names (imported now)."""
    return import_target(records) if isinstance(records, str) else records  # type: ignore[no-any-return]


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


def command(name: str, target: str, help: str) -> LazyCommand:
    """A :class:`~agent_link_core.lazy_command.LazyCommand` for ``cli.add_command(...)`` in
    ``agent_link_register_commands`` (click is imported then, never to register a plugin)."""
    from agent_link_core.lazy_command import LazyCommand

    return LazyCommand(name, target, help)


def commands(*declared: LazyCommand | tuple[str, str, str]) -> Callable[[click.Group], None]:
    """An ``agent_link_register_commands`` implementation adding each declared command: a
    :func:`command`, or its ``(name, target, help)`` (made into one when the hook runs, so a
    plugin module declaring its commands at import imports no click)."""

    @hookimpl
    def register_commands(cli: click.Group) -> None:
        for cmd in declared:
            cli.add_command(command(*cmd) if isinstance(cmd, tuple) else cmd)

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
