"""Standard-library stand-ins that keep a short command cheap: a logger importing :mod:`logging` when used, records
without :mod:`dataclasses` (it imports :mod:`inspect`), hook markers setting exactly pluggy's attributes and hook tables
read without pluggy (docs/plugins.md, "Declare now, import when used")."""

from __future__ import annotations

import importlib
import sys
import types

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, ClassVar, TypeVar, dataclass_transform

    F = TypeVar("F", bound=Callable[..., Any])
else:
    def dataclass_transform(**_: object) -> Callable[[type], type]:
        """A no-op at run time: importing :mod:`typing` costs every short command milliseconds."""
        return lambda cls: cls


def import_target(target: str) -> Any:
    """The object ``"package.module:attribute"`` names, imported now.
    :raises Exception: ``ValueError`` without ``:``, what the import raises, ``AttributeError`` for a missing attribute."""
    module, sep, attribute = target.partition(":")
    if not sep or not module or not attribute:
        raise ValueError(f"{target!r} is not 'package.module:attribute'")
    out, sys.stdout = sys.stdout, sys.stderr  # what a plugin prints as it is imported never reaches stdout
    try:
        return getattr(importlib.import_module(module), attribute)
    finally:
        sys.stdout = out if out is not sys.stderr else sys.stdout


class LazyLogger:
    """Stands for ``logging.getLogger(name)``: every attribute is the real logger's, imported on first use."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, attribute: str) -> Any:
        import logging

        return getattr(logging.getLogger(self.name), attribute)


class _Factory(tuple):
    """The default of a :func:`field`: ``(default_factory,)``."""


def field(*, default_factory: Callable[[], Any]) -> Any:
    """A :class:`Struct` field whose default ``default_factory()`` builds per instance."""
    return _Factory((default_factory,))


@dataclass_transform(field_specifiers=(field,))
class Struct:
    """A record whose fields, ``_fields``, are its class annotations in order, with their defaults, built by keyword or
    position: ``class X(Struct, frozen=True)`` acts as a frozen dataclass; without ``frozen``, as a plain one.
    :raises TypeError: on construction, a field too many, missing or unknown. :raises AttributeError: on assigning or
    deleting an attribute of a frozen one."""

    _fields: ClassVar[tuple[str, ...]] = ()
    _defaults: ClassVar[dict[str, Any]] = {}

    def __init_subclass__(cls, frozen: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = [name for name, kind in cls.__dict__.get("__annotations__", {}).items() if "ClassVar" not in str(kind)]
        cls._fields = (*cls._fields, *(name for name in own if name not in cls._fields))
        cls._defaults = {name: getattr(cls, name) for name in cls._fields if hasattr(cls, name)}
        if not frozen:
            cls.__setattr__, cls.__delattr__, cls.__hash__ = object.__setattr__, object.__delattr__, None  # type: ignore[method-assign,assignment]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if len(args) > len(self._fields):
            raise TypeError(f"{type(self).__name__} takes {len(self._fields)} fields, {len(args)} given")
        values = dict(zip(self._fields, args))
        for key in self._fields[len(args):]:
            if key not in kwargs and key not in self._defaults:
                raise TypeError(f"{type(self).__name__} is missing field {key!r}")
            default = self._defaults.get(key)
            values[key] = kwargs.pop(key) if key in kwargs else default[0]() if isinstance(default, _Factory) else default
        if kwargs:
            raise TypeError(f"{type(self).__name__} has no field {sorted(kwargs)[0]!r} (or it was given twice)")
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def replace(self, **changes: Any) -> Any:
        """A copy with ``changes`` (field name -> value), built through ``__init__`` (``TypeError`` for a name that is no field)."""
        return type(self)(**{**{name: getattr(self, name) for name in self._fields}, **changes})

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r} of a frozen {type(self).__name__}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r} of a frozen {type(self).__name__}")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n in self._fields)})"


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
#: its harnesses: ``{module: ({HarnessDeclaration keywords, sender_options as ({"flag", "key", "help"}, ...)}, ...)}``
HARNESSES_ATTR = "AGENT_LINK_HARNESSES"
#: the hooks a plugin specifies for others to implement: ``{hookspecs module: (hook name, ...)}``
HOOKSPECS_ATTR = "AGENT_LINK_HOOKSPECS"
#: how the boundary guards a plugin's hookspec (:func:`hookspec`'s ``check``, ``refuses``, ``awaitable``)
GUARD_ATTR = PROJECT + "_guard"


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


def hookspec(function: F | None = None, *, firstresult: bool = False, check: Callable[[Any, str], str | None] | None = None,
             refuses: bool = False, awaitable: bool = False, bound_s: float | None = None) -> Any:
    """Mark a hook specification as pluggy's ``HookspecMarker`` does (no historic hooks), with how the boundary guards its
    calls: ``check(answer, plugin)`` gives why a non-None answer is refused (the core's: ``boundary.RESULT_CHECKS``),
    ``refuses``: an implementation may raise ``AgentLinkError``, ``awaitable``: may answer with an awaitable, which runs
    up to ``bound_s`` seconds (None: the hook budget)."""
    def mark(func: F) -> F:
        setattr(func, GUARD_ATTR, {"check": check, "refuses": refuses, "awaitable": awaitable, "bound_s": bound_s})
        setattr(func, SPEC_ATTR, {"firstresult": firstresult, "historic": False, "warn_on_impl": None, "warn_on_impl_args": None})
        return func

    return mark if function is None else mark(function)


def module_hooks(module: object) -> dict[str, tuple[Callable[..., Any], dict[str, Any]]]:
    """``{hook name: (function, options)}`` of a plugin (a module, or any object), as pluggy
    registers them: functions, bound methods, staticmethods and classmethods, read without
    running a property or other descriptor, marked themselves or on their function."""
    found: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {}
    for name in vars(module) if isinstance(module, types.ModuleType) else dir(module):
        hookable = _hookable(module, name)
        if hookable is None:
            continue
        holder, function = hookable
        opts = getattr(holder, IMPL_ATTR, None)
        if opts is None:
            opts = getattr(getattr(holder, "__func__", None), IMPL_ATTR, None)
        if isinstance(opts, dict):  # marked by hookimpl (or pluggy's marker)
            found[opts.get("specname") or name] = (function, opts)
    return found


def _hookable(plugin: object, name: str) -> tuple[Any, Callable[..., Any]] | None:
    """``(marker carrier, bound function)`` of ``plugin.name``, or None where pluggy takes no hook (``_static_hook_attr``)."""
    if isinstance(plugin, types.ModuleType):
        static = vars(plugin).get(name)
    else:
        kind = plugin if isinstance(plugin, type) else type(plugin)
        static = next((vars(k)[name] for k in kind.__mro__ if name in vars(k)), None)
        own: Any = {} if kind is plugin else getattr(plugin, "__dict__", {})
        if kind is not plugin and (name in own or isinstance(static, types.MemberDescriptorType)):
            value = own[name] if name in own else getattr(plugin, name, None)  # the instance's own: never bound
            if isinstance(value, types.MethodType):
                return value.__func__, value
            return (value, value) if isinstance(value, types.FunctionType) else None
    if isinstance(static, staticmethod):
        return static, static.__func__
    if isinstance(static, classmethod):
        owner = plugin if isinstance(plugin, type) else type(plugin)
        return static, static.__get__(owner, owner)
    if isinstance(static, types.MethodType):
        return static.__func__, static
    if not isinstance(static, types.FunctionType):
        return None
    return static, static if isinstance(plugin, (type, types.ModuleType)) else static.__get__(plugin, type(plugin))


def argnames(function: Callable[..., Any]) -> tuple[str, ...] | None:
    """The arguments pluggy passes to ``function`` (positional parameters without a default,
    no ``self`` or ``cls``; of the function it wraps, if it names one in ``__wrapped__``); None
    for anything but a plain function or bound method."""
    bound = isinstance(function, types.MethodType)
    func = function.__func__ if bound else function  # type: ignore[attr-defined]
    while hasattr(func, "__wrapped__"):  # as inspect.unwrap
        func = func.__wrapped__
    if not isinstance(func, types.FunctionType):
        return None
    code = func.__code__
    names = code.co_varnames[:code.co_argcount]
    names = names[:len(names) - len(func.__defaults__ or ())]
    method = "." in func.__qualname__.rpartition("<locals>.")[2]  # defined in a class
    implicit = bound or (method and names[:1] in (("self",), ("cls",)))  # pluggy's rule
    return names[1:] if implicit and names else names
