"""The one rule for text from another agent or a host shown to a person or a model (the CLI, and every string of every
MCP tool result): Unicode category ``C`` characters and U+2028/U+2029 become visible ``\\u{XXXX}`` escapes (line breaks
and tabs kept where text is laid out in lines); the ``&#xHHHH;`` escapes of envelopes are left alone."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def visible(text: str, keep: str = "\n\t") -> str:
    """``text`` with every category-``C`` character and U+2028/U+2029 except those in ``keep`` as ``\\u{XXXX}`` (upper-case
    hex, at least 4 digits); CRLF becomes LF first when LF is kept."""
    probe = text
    for c in keep:
        probe = probe.replace(c, "")
    if probe.isprintable():  # no category-C character (nor a separator): the common case, in C
        return text
    import unicodedata  # only for text with such a character: loading it costs every command

    if "\n" in keep:
        text = text.replace("\r\n", "\n")
    # the line and paragraph separators (U+2028, U+2029) too: a viewer may break lines there (envelopes escape them)
    return "".join(c if c in keep or (unicodedata.category(c)[0] != "C" and c not in "\u2028\u2029") else f"\\u{{{ord(c):04X}}}"
                   for c in text)


#: values :func:`visible_data` keeps as they are, by exact type (JSON numbers, booleans, null)
_KEPT = frozenset({int, float, bool, type(None)})


def visible_data(value: Any) -> Any:
    """``value`` (JSON-shaped: dicts, lists, strings, numbers, booleans, None) with :func:`visible` applied to every string
    in it, keys included; tuples become lists, other values are unchanged. Every tool result goes through here: a plain
    printable ``str``, a number, a boolean and None are kept without a call."""
    kind = type(value)
    if kind is dict:
        return {k if type(k) is str and k.isprintable() else _visible_key(k):
                v if ((t := type(v)) is str and v.isprintable()) or t in _KEPT else _visible_item(v)
                for k, v in value.items()}
    if kind is list or kind is tuple:
        return [v if ((t := type(v)) is str and v.isprintable()) or t in _KEPT else _visible_item(v) for v in value]
    return _visible_item(value)


def _visible_item(value: Any) -> Any:
    kind = type(value)
    if kind is str:
        return value if value.isprintable() else visible(value)
    if kind in _KEPT:
        return value
    if kind is dict or kind is list or kind is tuple:
        return visible_data(value)
    if isinstance(value, str):  # a subclass (an enum's value): the rule as for any string
        return visible(value)
    if isinstance(value, dict):
        return {_visible_key(k): _visible_item(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_visible_item(v) for v in value]
    return value


def _visible_key(key: Any) -> Any:
    return visible(key) if isinstance(key, str) else key


def plain_json(value: Any) -> str | None:
    """``json.dumps(value, ensure_ascii=False)`` when :func:`visible_data` would leave every string of ``value`` as it is,
    else None (also for a value that is not JSON): one serialisation and two scans in C instead of a walk (below U+0020
    only the JSON escapes of LF and TAB may appear; :meth:`str.isprintable` finds the other category-``C`` characters)."""
    import json  # here: the CLI's human output never calls this, and an empty read then loads neither json nor re
    import re

    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return None
    return text if text.isprintable() and re.search(r"\\(?:[bfr]|u00)", text) is None else None
