"""One-line hook implementations for what a plugin contributes as fixed records, and commands and tool handlers
declared by name, imported when first used: docs/plugins.md, "Declare now, import when used"."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from agent_link_core.lazy import hookimpl, import_target

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    import click

    from agent_link_core.lazy_command import LazyCommand

    Records = Iterable[Any] | str


def registers(records: Records, optionalhook: bool = False) -> Callable[[Callable[[Any], None]], None]:
    """A ``register``-style hook implementation registering each of ``records`` (a sequence,
    or ``"module:attribute"`` for one imported only when the hook runs); ``optionalhook``: of a
    hook another plugin specifies, which may not be installed."""

    @hookimpl(optionalhook=optionalhook)
    def register_each(register: Callable[[Any], None]) -> None:
        for record in (import_target(records) if isinstance(records, str) else records):
            register(record)

    return register_each


def migrations(records: Records) -> Callable[[], list[Any]]:
    """An ``agent_link_schema`` implementation returning ``records`` (owned by the plugin)."""

    @hookimpl
    def schema() -> list[Any]:
        return list((import_target(records) if isinstance(records, str) else records))

    return schema


def command(name: str, target: str, help: str, sender: bool = False, reader: bool = False) -> LazyCommand:
    """A :class:`~agent_link_core.lazy_command.LazyCommand` (its arguments) for ``cli.add_command(...)`` (click imported now)."""
    from agent_link_core.lazy_command import LazyCommand

    return LazyCommand(name, target, help, sender, reader)


def commands(*declared: LazyCommand | tuple[str, ...]) -> Callable[[click.Group], None]:
    """An ``agent_link_register_commands`` implementation adding each :func:`command`, or its
    ``(name, target, help)``, ``(name, target, help, "reader")`` for a reader (made when the hook runs: no click at import)."""

    @hookimpl
    def register_commands(cli: click.Group) -> None:
        for cmd in declared:
            cli.add_command(command(cmd[0], cmd[1], cmd[2], reader="reader" in cmd[3:]) if isinstance(cmd, tuple) else cmd)

    return register_commands


def lazy_handler(target: str) -> Callable[..., Awaitable[dict[str, Any]]]:
    """A tool handler (``ToolSpec.handler``) whose code is imported at the tool's first call.

    :param target: ``"package.module:attribute"`` of the real ``async (app, arguments, call) -> dict``.
    :returns: an ``async def`` handler; when the target cannot be imported, each call raises
        ``internal_error`` naming the plugin (``details.cause``: the exception class), reported
        as the plugin's problem (``tool handler <target>``), never disabling it.
    """
    loaded: list[Callable[..., Awaitable[dict[str, Any]]]] = []

    async def handler(app: Any, arguments: dict[str, Any], call: Any) -> dict[str, Any]:
        if not loaded:
            try:
                loaded.append(import_target(target))
            except (Exception, SystemExit) as exc:
                from agent_link_core.boundary import load_failed
                from agent_link_core.errors import AgentLinkError

                plugin = load_failed(getattr(app, "hooks", None), target, f"tool handler {target}", "", exc)[0]
                raise AgentLinkError(
                    "internal_error", f"The {plugin} plugin's code for this tool cannot be loaded.",
                    {"cause": type(exc).__name__},
                    hint=f"agent_link_health lists the plugin's problem; reinstall it, or turn it off: "
                         f"AGENT_LINK_DISABLE_PLUGINS={plugin}") from None
        return await loaded[0](app, arguments, call)

    handler.__qualname__ = handler.__name__ = f"lazy:{target}"
    return handler
