"""Hook markers and hook tables read without pluggy or :mod:`inspect` (standard library only):
the markers set exactly the attributes pluggy's markers set, so the short CLI commands call
hooks without building pluggy's manager (docs/plugins.md, "Declare now, import when used").
"""

from __future__ import annotations

import types

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, TypeVar

    F = TypeVar("F", bound=Callable[..., Any])

PROJECT = "agent_link"
#: where a hook implementation's / specification's options are kept (pluggy reads the same)
IMPL_ATTR = PROJECT + "_impl"
SPEC_ATTR = PROJECT + "_spec"
#: the attribute of a plugin package naming the hooks each of its entry modules implements
DECLARED_ATTR = "AGENT_LINK_HOOKS"
#: a plugin package's settings of each entry module: ``{module: ({Setting keywords}, ...)}``
SETTINGS_ATTR = "AGENT_LINK_SETTINGS"
#: a plugin package's migrations of each entry module: ``{module: {owner: (version, ...)}}``
SCHEMA_ATTR = "AGENT_LINK_SCHEMA"
#: a plugin package's harnesses of each entry module: ``{module: ({HarnessDeclaration
#: keywords, sender_options as ({"flag", "key", "help"}, ...)}, ...)}``
HARNESSES_ATTR = "AGENT_LINK_HARNESSES"


def hookimpl(function: F | None = None, *, hookwrapper: bool = False, optionalhook: bool = False,
             tryfirst: bool = False, trylast: bool = False, specname: str | None = None,
             wrapper: bool = False) -> Any:
    """Mark a hook implementation (``@hookimpl`` or ``@hookimpl(tryfirst=True)``) as pluggy's
    ``HookimplMarker`` does; returns the function, or a decorator when called with options only."""

    def mark(func: F) -> F:
        setattr(func, IMPL_ATTR, {"wrapper": wrapper, "hookwrapper": hookwrapper, "optionalhook": optionalhook,
                                  "tryfirst": tryfirst, "trylast": trylast, "specname": specname})
        return func

    return mark if function is None else mark(function)


def hookspec(function: F | None = None, *, firstresult: bool = False) -> Any:
    """Mark a hook specification as pluggy's ``HookspecMarker`` does (no historic hooks)."""

    def mark(func: F) -> F:
        setattr(func, SPEC_ATTR, {"firstresult": firstresult, "historic": False,
                                  "warn_on_impl": None, "warn_on_impl_args": None})
        return func

    return mark if function is None else mark(function)


def module_hooks(module: object) -> dict[str, tuple[Callable[..., Any], dict[str, Any]]]:
    """``{hook name: (function, options)}`` of a plugin (a module, or any object: its
    attributes, as ``getattr`` gives them), as pluggy registers them."""
    found: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {}
    attrs: Mapping[str, Any] = vars(module) if isinstance(module, types.ModuleType) else {n: getattr(module, n, None) for n in dir(module)}
    for name, value in attrs.items():
        opts = getattr(value, IMPL_ATTR, None) if isinstance(value, (types.FunctionType, types.MethodType)) else None
        if isinstance(opts, dict):  # marked by hookimpl (or pluggy's marker)
            found[opts.get("specname") or name] = (value, opts)
    return found


def argnames(function: Callable[..., Any]) -> tuple[str, ...] | None:
    """The arguments pluggy passes to ``function`` (positional parameters without a default,
    no ``self``); None for anything but a plain function or bound method."""
    bound = isinstance(function, types.MethodType)
    func = function.__func__ if bound else function  # type: ignore[attr-defined]
    if not isinstance(func, types.FunctionType):
        return None
    code = func.__code__
    names = code.co_varnames[:code.co_argcount]
    names = names[:len(names) - len(func.__defaults__ or ())]
    implicit = bound or (names[:1] == ("self",) and "." in func.__qualname__)  # pluggy's rule
    return names[1:] if implicit else names


def declared_hooks(package: types.ModuleType, module: str) -> frozenset[str] | None:
    """The hooks ``package``'s (imported) :data:`DECLARED_ATTR` says entry module ``module``
    (dotted name) implements, or None when it declares nothing for it."""
    hooks = declared_records(package, DECLARED_ATTR, module)
    if not isinstance(hooks, (tuple, list, frozenset, set)) or not all(isinstance(h, str) for h in hooks):
        return None
    return frozenset(hooks)


def declared_records(package: types.ModuleType, attr: str, module: str) -> Any:
    """What ``package``'s table ``attr`` (:data:`SETTINGS_ATTR`, ...) gives entry module
    ``module``, or None; its shape is checked by the hook call that reads it."""
    table: Mapping[str, Any] | None = getattr(package, attr, None)
    return table.get(module) if isinstance(table, dict) else None
