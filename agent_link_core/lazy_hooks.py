"""Hook markers and hook tables read without pluggy.

A plugin's entry module is imported only when a call needs one of the hooks it declares
(docs/plugins.md, "Declare now, import when used"), and the short CLI commands call their
hooks without building pluggy's manager (:class:`agent_link_core.plugins.Hooks`). So the
markers here set exactly the attributes pluggy's ``HookimplMarker`` / ``HookspecMarker`` set
(``agent_link_impl`` / ``agent_link_spec``, dicts of the same keys) without importing pluggy,
and :func:`module_hooks` / :func:`argnames` read a module's implementations as pluggy would,
without :mod:`inspect`. Standard library only.
"""

from __future__ import annotations

import types

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, TypeVar

    F = TypeVar("F", bound=Callable[..., Any])

PROJECT = "agent_link"
#: the attribute a hook implementation's options are kept under (pluggy reads the same)
IMPL_ATTR = PROJECT + "_impl"
#: the attribute a hook specification's options are kept under (pluggy reads the same)
SPEC_ATTR = PROJECT + "_spec"
#: the attribute of a plugin package naming the hooks each of its entry modules implements
DECLARED_ATTR = "AGENT_LINK_HOOKS"
#: the attribute of a plugin package giving the settings each entry module registers, as
#: ``{entry module: ({"name": ..., "kind": ..., other Setting keywords}, ...)}``
SETTINGS_ATTR = "AGENT_LINK_SETTINGS"
#: the attribute of a plugin package giving the migrations each entry module returns, as
#: ``{entry module: {owner: (version, ...)}}``
SCHEMA_ATTR = "AGENT_LINK_SCHEMA"
#: the attribute of a plugin package giving the harnesses each entry module registers, as
#: ``{entry module: ({"name": ..., "target": ..., other HarnessDeclaration keywords}, ...)}``
#: (``sender_options`` as ``({"flag": ..., "key": ..., "help": ...}, ...)``)
HARNESSES_ATTR = "AGENT_LINK_HARNESSES"


def hookimpl(function: F | None = None, *, hookwrapper: bool = False, optionalhook: bool = False,
             tryfirst: bool = False, trylast: bool = False, specname: str | None = None,
             wrapper: bool = False) -> Any:
    """Mark a hook implementation (``@hookimpl`` or ``@hookimpl(tryfirst=True)``), with the
    options of pluggy's ``HookimplMarker`` and the same effect on pluggy.

    :returns: the function, marked (or a decorator when called with options only).
    """

    def mark(func: F) -> F:
        setattr(func, IMPL_ATTR, {"wrapper": wrapper, "hookwrapper": hookwrapper, "optionalhook": optionalhook,
                                  "tryfirst": tryfirst, "trylast": trylast, "specname": specname})
        return func

    return mark if function is None else mark(function)


def hookspec(function: F | None = None, *, firstresult: bool = False) -> Any:
    """Mark a hook specification, as pluggy's ``HookspecMarker`` does (agent-link has no
    historic hooks: a hook's implementations are called when it is called)."""

    def mark(func: F) -> F:
        setattr(func, SPEC_ATTR, {"firstresult": firstresult, "historic": False,
                                  "warn_on_impl": None, "warn_on_impl_args": None})
        return func

    return mark if function is None else mark(function)


def module_hooks(module: types.ModuleType) -> dict[str, tuple[Callable[..., Any], dict[str, Any]]]:
    """``{hook name: (function, options)}`` of a plugin module: each attribute marked as an
    implementation, under its ``specname`` or attribute name (what pluggy registers)."""
    found: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {}
    for name, value in vars(module).items():
        opts = getattr(value, IMPL_ATTR, None) if isinstance(value, (types.FunctionType, types.MethodType)) else None
        if isinstance(opts, dict):  # marked by hookimpl (or pluggy's marker)
            found[opts.get("specname") or name] = (value, opts)
    return found


def argnames(function: Callable[..., Any]) -> tuple[str, ...] | None:
    """The arguments pluggy passes to ``function``: its positional parameters without a
    default (``self`` of a bound method left out); None for anything but a plain function
    or bound method (the caller then goes through pluggy)."""
    bound = isinstance(function, types.MethodType)
    func = function.__func__ if bound else function  # type: ignore[attr-defined]
    if not isinstance(func, types.FunctionType):
        return None
    code = func.__code__
    names = code.co_varnames[:code.co_argcount]
    names = names[:len(names) - len(func.__defaults__ or ())]
    return names[1:] if bound else names


def declared_hooks(package: types.ModuleType, module: str) -> frozenset[str] | None:
    """The hooks ``package``'s :data:`DECLARED_ATTR` says entry module ``module`` implements,
    or None when it declares nothing for it (the module is then imported to find out).

    :param package: the plugin's top-level package, imported.
    :param module: the entry module's dotted name (the entry point's value before ``:``).
    """
    hooks = declared_records(package, DECLARED_ATTR, module)
    if not isinstance(hooks, (tuple, list, frozenset, set)) or not all(isinstance(h, str) for h in hooks):
        return None
    return frozenset(hooks)


def declared_records(package: types.ModuleType, attr: str, module: str) -> Any:
    """What ``package``'s table ``attr`` (:data:`SETTINGS_ATTR`, :data:`SCHEMA_ATTR` or
    :data:`HARNESSES_ATTR`) gives
    entry module ``module``, or None when it gives nothing (the module is then imported to
    call its hook). The shape is checked where it is used: a malformed entry is the plugin's
    fault, reported by the hook call that reads it."""
    table: Mapping[str, Any] | None = getattr(package, attr, None)
    return table.get(module) if isinstance(table, dict) else None
