"""Immutable records without :mod:`dataclasses` (which imports :mod:`inspect`, a tenth of a
short command's CPU). A :class:`Record` behaves as a frozen dataclass: compared, hashed and
shown by its fields, assignment refused; a :class:`Struct` declares fields as a dataclass does."""

from __future__ import annotations

from collections.abc import Callable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar, dataclass_transform
else:
    def dataclass_transform(**_: object) -> Callable[[type], type]:
        """A no-op at run time: importing :mod:`typing` costs every short command milliseconds."""
        return lambda cls: cls


class Record:
    """Base of a frozen record whose fields, ``_fields``, the subclass's ``__init__`` sets
    through :meth:`_set`. :raises AttributeError: on assigning or deleting an attribute."""

    _fields: tuple[str, ...] = ()

    def _set(self, **values: Any) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def replace(self, **changes: Any) -> Any:
        """A copy with ``changes`` (field name -> value), built through ``__init__``.
        :raises TypeError: a name that is no field."""
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


class _Factory(tuple):
    """The default of a :func:`field`: ``(default_factory,)``."""


def field(*, default_factory: Callable[[], Any]) -> Any:
    """A :class:`Struct` field whose default ``default_factory()`` builds per instance."""
    return _Factory((default_factory,))


@dataclass_transform(field_specifiers=(field,))
class Struct(Record):
    """A record whose fields are its class annotations in order, with their defaults, built by
    keyword or position. ``class X(Struct, frozen=True)`` acts as a frozen dataclass; without
    ``frozen``, as a plain one (fields assignable, no hash).

    :raises TypeError: on construction, a field too many, missing or unknown.
    """

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
        self._set(**values)
