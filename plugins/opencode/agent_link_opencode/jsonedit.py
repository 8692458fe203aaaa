"""Edits of a plain JSON text that leave everything else as it was written: a member set, added
or removed, an array item added or removed, each spliced into the text where it belongs, in the
layout of its neighbours (``agent-link install opencode`` and ``uninstall opencode``, which
check the result against the object they mean and otherwise rewrite the whole file).

Standard library only; every function raises ValueError (or IndexError) for text it cannot
follow, which callers take as "rewrite the file instead".
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

_DECODER = json.JSONDecoder()
_SPACE = " \t\r\n"


class Span(NamedTuple):
    """A member of an object (``key`` set, ``start`` at the key) or an item of an array (``key``
    None, ``start`` at the value), its value from ``value`` to ``end``."""

    key: str | None
    start: int
    value: int
    end: int


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _SPACE:
        i += 1
    return i


def spans(text: str, opening: int) -> tuple[list[Span], int]:
    """The members or items of the object or array whose ``{``/``[`` is at ``opening``, and the
    index of its closing bracket."""
    close = {"{": "}", "[": "]"}[text[opening]]
    found: list[Span] = []
    i = _skip(text, opening + 1)
    if text[i] == close:
        return found, i
    while True:
        start, key = i, None
        if close == "}":
            key, i = _DECODER.raw_decode(text, i)
            if not isinstance(key, str):
                raise ValueError("a key that is not a string")
            i = _skip(text, i)
            if text[i] != ":":
                raise ValueError("no colon after a key")
            i = _skip(text, i + 1)
        value = i
        _, end = _DECODER.raw_decode(text, i)
        found.append(Span(key, start, value, end))
        i = _skip(text, end)
        if text[i] == ",":
            i = _skip(text, i + 1)
            continue
        if text[i] != close:
            raise ValueError("no comma or closing bracket after a value")
        return found, i


class Style(NamedTuple):
    """How a text lays JSON out: its indent unit (None: all on one line) and separators."""

    indent: str | int | None
    comma: str
    colon: str


def style(text: str) -> Style:
    """The layout of ``text``: the indentation of its first indented line (not a ``"$schema"``
    line: opencode adds that with 2 spaces, whatever the file's own), ``": "`` or ``":"``."""
    indent: str | int | None = None
    lines = text.splitlines()[1:]
    for line in [*(line for line in lines if not line.lstrip().startswith('"$schema"')), *lines]:
        stripped = line.lstrip(" \t")
        if stripped and stripped != line:
            lead = line[: len(line) - len(stripped)]
            indent = lead if "\t" in lead else len(lead)
            break
    colon = ": " if '": ' in text or '":' not in text else ":"
    return Style(indent, "," if indent is not None else ("," if colon == ":" else ", "), colon)


def dump(value: Any, how: Style, lead: str = "") -> str:
    """``value`` in the layout ``how``, its later lines after ``lead`` (the line's indentation)."""
    text = json.dumps(value, indent=how.indent, ensure_ascii=False, separators=(how.comma, how.colon))
    return text.replace("\n", "\n" + lead)


def _lead(text: str, pos: int) -> str | None:
    """The indentation of the line ``pos`` is on (None when something comes before it there)."""
    start = text.rfind("\n", 0, pos) + 1
    return text[start:pos] if not text[start:pos].strip() else None


def _inline(how: Style) -> Style:
    """``how`` for a value inside a line (an inline object or array keeps to its line)."""
    return Style(None, ", " if how.colon == ": " else ",", how.colon)


def _piece(key: str | None, value: Any, how: Style, lead: str | None) -> str:
    """A member (``key``) or item, for a line indented ``lead`` (None: inside a line)."""
    dumped = dump(value, how, lead) if lead is not None else dump(value, _inline(how))
    return dumped if key is None else f"{json.dumps(key, ensure_ascii=False)}{how.colon}{dumped}"


def append(text: str, opening: int, key: str | None, value: Any, how: Style) -> str:
    """``text`` with ``value`` added last (as the member ``key`` of an object), laid out as the
    container's earlier members are."""
    found, close = spans(text, opening)
    if not found:
        return f"{text[:opening + 1]}{_piece(key, value, how, None)}{text[close:]}"
    if len(found) >= 2:
        sep = text[text.index(",", found[-2].end) + 1:found[-1].start]
    else:
        sep = text[opening + 1:found[0].start]
        if "\n" not in sep:  # one member on its line: a space after the comma unless the text is compact
            sep = " " if how.colon == ": " else ""
    lead = sep.rsplit("\n", 1)[1] if "\n" in sep else None
    end = found[-1].end
    return f"{text[:end]},{sep}{_piece(key, value, how, lead)}{text[end:]}"


def remove(text: str, opening: int, index: int) -> str:
    """``text`` without the ``index``-th member or item of the container at ``opening``, with
    the comma and line break that came with it."""
    found, close = spans(text, opening)
    if len(found) == 1:
        return f"{text[:opening + 1]}{text[close:]}"
    if index == 0:
        return text[:found[0].start] + text[found[1].start:]
    return text[:found[index - 1].end] + text[found[index].end:]


def replace(text: str, span: Span, value: Any, how: Style) -> str:
    """``text`` with the value of ``span`` replaced by ``value``."""
    return f"{text[:span.value]}{_piece(None, value, how, _lead(text, span.start))}{text[span.end:]}"


def top(text: str) -> int:
    """Where the top-level object opens.

    :raises ValueError: when the text is not an object.
    """
    i = _skip(text, 1 if text.startswith("\ufeff") else 0)  # a byte order mark stays where it is
    if i >= len(text) or text[i] != "{":
        raise ValueError("not an object")
    return i


def member(text: str, opening: int, key: str) -> tuple[int, Span] | None:
    """The (last, as JSON readers take it) member ``key`` of the object at ``opening``, with its index."""
    found, _ = spans(text, opening)
    hits = [(n, s) for n, s in enumerate(found) if s.key == key]
    return hits[-1] if hits else None
