"""The one rule for shown text (agent_link_core/visible.py): what it escapes, and that the walk
over a tool result (:func:`visible_data`, with its shortcuts for printable strings and scalars)
gives what applying :func:`visible` to every string of the result gives."""

from __future__ import annotations

import enum
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agent_link_core.visible import plain_json, visible, visible_data


class Kind(str, enum.Enum):
    """A str subclass, as an enum value in a result would be."""

    PLAIN = "plain"
    HIDDEN = "hid\u202eden"


def reference(value: Any) -> Any:
    """:func:`visible` on every string, keys included; tuples as lists (the rule, walked plainly)."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, dict):
        return {visible(k) if isinstance(k, str) else k: reference(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [reference(v) for v in value]
    return value


def same(a: Any, b: Any) -> bool:
    """Equal with the same types all the way down (a tuple is not a list, a key's type counts)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return [(type(k), k) for k in a] == [(type(k), k) for k in b] and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and a != a:
        return b != b
    return bool(a == b)


TRICKY = st.sampled_from(["a", "é", "字", " ", "\n", "\t", "\r", "\r\n", "\x1b", "\x7f", "\x85", "\u00a0",
                          "\u200b", "\u200d", "\u202e", "\u2028", "\u2029", "\ufeff", "\ud800", "\ue000", "\U000e0001", "\\u0041"])
TEXT = st.lists(TRICKY, max_size=6).map("".join) | st.text(max_size=8)
SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | TEXT | st.sampled_from(list(Kind))
KEYS = TEXT | st.sampled_from(list(Kind)) | st.integers(0, 3)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.lists(inner, max_size=4).map(tuple)
                      | st.dictionaries(KEYS, inner, max_size=4), max_leaves=25)


@given(VALUES)
def test_the_walk_is_the_rule_applied_to_every_string(value: Any) -> None:
    assert same(visible_data(value), reference(value))


def test_hidden_characters_in_values_and_keys_are_shown_and_the_rest_is_kept() -> None:
    result = {"ok": True, "title\u200b": "fix \u202eparser", "body": "line\r\nnext\tcol", "n": 3, "none": None,
              "items": ("a", Kind.HIDDEN, 2.5)}
    assert visible_data(result) == {"ok": True, "title\\u{200B}": "fix \\u{202E}parser", "body": "line\nnext\tcol",
                                    "n": 3, "none": None, "items": ["a", "hid\\u{202E}den", 2.5]}


def test_the_line_and_paragraph_separators_are_shown_as_the_envelope_escapes_them() -> None:
    """U+2028/U+2029 can break a line where a viewer lays text out; the envelope escapes them, so does the rule."""
    assert visible("a\u2028b\u2029c") == "a\\u{2028}b\\u{2029}c"
    assert visible_data({"body": "x\u2028y"}) == {"body": "x\\u{2028}y"}


def test_printable_strings_come_back_as_they_are() -> None:
    text = "Réparer le parseur des titres"
    assert visible_data({"title": text})["title"] is text


@given(VALUES)
def test_a_result_serialised_once_is_one_the_rule_leaves_as_it_is(value: Any) -> None:
    text = plain_json(value)
    if text is not None:  # the text stands for the result: the walk would change none of its strings
        assert json.dumps(visible_data(value), ensure_ascii=False) == text == json.dumps(value, ensure_ascii=False)


def test_plain_results_are_serialised_once_and_the_others_walked() -> None:
    plain = {"ok": True, "title": "Réparer 字 \"quoted\" \\ back", "body": "line\nnext\tcol", "items": ["a", 2.5, None]}
    assert plain_json(plain) == json.dumps(plain, ensure_ascii=False)
    for hidden in ("\x1b[31m", "line\r\n", "\u202e", "\ufeff", "\ud800", "\x7f", "\x08", "\x0c"):
        assert plain_json({"ok": True, "title": hidden}) is None, hidden
    assert plain_json({"ok": True, "set": {1, 2}}) is None  # not JSON: the caller's checks say so
