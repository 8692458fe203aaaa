"""One-line hook implementations for what a plugin contributes as fixed records.

Most plugins register a constant list of settings, tools or migrations; instead of writing
the same loop in every plugin::

    from agent_link_core.contribute import migrations, registers

    agent_link_register_settings = registers(SETTINGS)
    agent_link_register_tools = registers("agent_link_mine.tools:TOOLS")  # imported when called
    agent_link_schema = migrations(MIGRATIONS)

pluggy finds them by the module attribute's name, like any hook implementation.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Any

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
