"""JSON with comments, as opencode reads its config files.

opencode 1.18.33 parses every config file with ``jsonc-parser``'s ``parse(text, errors,
{allowTrailingComma: true})`` (its ``ConfigParse.jsonc``) and refuses the file on any error:
``//`` and ``/* */`` comments and a comma before ``}`` or ``]`` are accepted, everything else is
JSON. No JSONC package is a dependency of agent-link, so this is a small reader: comments and
trailing commas become spaces (lines and columns stay where they were, so an error names the
right place) and the rest goes to :func:`json.loads`. As in JavaScript, a key given twice keeps
its first place and its last value.
"""

from __future__ import annotations

import json
from typing import Any


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def strip(text: str) -> str:
    """``text`` with its comments and trailing commas replaced by spaces (newlines kept).

    :raises ValueError: a block comment that is never closed (with its line).
    """
    out: list[str] = []
    last = -1  # index in ``out`` of the last character outside strings and comments
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])  # an unclosed string is left for json.loads to report
            last = len(out) - 1
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise ValueError(f"a /* comment is not closed (line {text.count(chr(10), 0, i) + 1})")
            out.append("".join(ch if ch in "\r\n" else " " for ch in text[i:j + 2]))
            i = j + 2
        else:
            if c in "}]" and last >= 0 and out[last] == ",":
                out[last] = " "
            out.append(c)
            if not c.isspace():
                last = len(out) - 1
            i += 1
    return "".join(out)


def loads(text: str) -> Any:
    """``text`` parsed as opencode parses a config file (JSONC, trailing commas allowed).

    :raises json.JSONDecodeError: not JSONC (``lineno``/``colno`` point into ``text``).
    :raises ValueError: an unclosed comment, or ``NaN``/``Infinity`` (which JSONC refuses).
    :raises RecursionError: nested too deeply.
    """
    return json.loads(strip(text), parse_constant=_refuse_constant)
