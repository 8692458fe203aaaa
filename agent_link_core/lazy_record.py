"""Immutable records without :mod:`dataclasses`: every ``agent-link`` command imports the
modules holding its value types, and ``dataclasses`` imports :mod:`inspect` (about a tenth of
a short command's CPU). A :class:`Record` behaves as a frozen dataclass does: compared, hashed
and shown by its fields, assignment refused, :meth:`Record.replace` for a changed copy."""

from __future__ import annotations

from typing import Any


class Record:
    """Base of a frozen record whose fields are listed in ``_fields`` (in order) and set by
    the subclass's ``__init__`` through :meth:`_set`.

    :raises AttributeError: on assigning or deleting an attribute after construction.
    """

    _fields: tuple[str, ...] = ()

    def _set(self, **values: Any) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def replace(self, **changes: Any) -> Any:
        """A copy with ``changes`` (field name -> value), built through ``__init__`` as
        :func:`dataclasses.replace` does.

        :raises TypeError: a name that is no field.
        """
        unknown = set(changes) - set(self._fields)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {sorted(unknown)[0]!r}")
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
