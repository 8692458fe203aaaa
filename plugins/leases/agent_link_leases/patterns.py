"""Lease patterns and the exact overlap rule (standard library only: the hook fast path uses it).

A pattern is read as git's wildmatch and :mod:`pathlib` read globs: ``*`` and ``?`` stay within
one path segment, a segment that is exactly ``**`` spans any number of segments (zero
included), ``[abc]``, ``[a-z]``, ``[!a]``/``[^a]`` are character classes and ``\\`` escapes
the next character. A pattern also covers everything below what it names (a lease of
``src`` holds ``src/a.py``; a glob may match directories), so it is read with an implicit
trailing ``/**``; only a plain path naming an existing file (not a directory) is read without
it, so that ``src/a.py`` does not clash with ``**/*.md`` through a directory ``src/a.py/``
that cannot exist.

Two patterns **overlap** when some path matches both. This is decided exactly, never by
sampling paths: each pattern is a sequence of segment automata, and :func:`overlap` searches
the product of the two sequences (``**`` on either side may skip or absorb segments); two
single segments are intersected as the product of their character automata, whose character
steps are sets of code-point intervals. Both searches visit each state pair once, so a check
costs O(len(a) * len(b)) segment comparisons.

:func:`normalise` turns what a caller typed into the stored form: relative to the project
root, ``.``/``..`` and symlinks resolved in the pattern's fixed prefix (the segments before
the first wildcard, resolved against the file system with :func:`os.path.realpath`), and
case folded on case-insensitive file systems (:func:`case_insensitive`).
"""

from __future__ import annotations

import os
from functools import lru_cache

MAX_CODE = 0x10FFFF
SLASH = ord("/")
# Characters a path segment can hold: any code point but NUL and "/".
Intervals = tuple[tuple[int, int], ...]
ANY: Intervals = ((1, SLASH - 1), (SLASH + 1, MAX_CODE))
STAR = "*"  # a segment token: any run of characters (zero included)
DOUBLE_STAR = "**"  # a whole segment: any number of segments (zero included)
MAGIC = frozenset("*?[")
#: the longest pattern (UTF-8 bytes) and path segment (a file name) a lease may name: Linux's
#: PATH_MAX and NAME_MAX (<linux/limits.h>), the longest path and file name it can open
MAX_PATTERN_BYTES = 4096
MAX_SEGMENT_BYTES = 255
# The largest class range folded character by character; wider ranges (rare: a class spanning
# thousands of code points) are kept as written, and also folded at their ASCII part.
FOLD_RANGE_LIMIT = 4096

Token = str | Intervals  # STAR, or the characters one position accepts
Segment = str | tuple[Token, ...]  # DOUBLE_STAR, or a segment glob's tokens


class PatternError(ValueError):
    """A pattern that cannot be leased.

    :param reason: ``empty``, ``nul``, ``too_long``, ``segment_too_long``, ``outside_root``, ``dotdot_after_wildcard``,
        ``unclosed_class``, ``unsupported_class`` or ``trailing_escape``.
    :param message: one sentence naming the pattern and what is wrong with it.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def _merge(ranges: list[tuple[int, int]]) -> Intervals:
    """Sorted, disjoint, non-adjacent intervals within :data:`ANY` (NUL and "/" removed)."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(r for r in ranges if r[0] <= r[1]):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return _intersection(tuple(out), ANY)


def _intersection(a: Intervals, b: Intervals) -> Intervals:
    out: list[tuple[int, int]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def _complement(a: Intervals) -> Intervals:
    out: list[tuple[int, int]] = []
    start = 0
    for lo, hi in a:
        if lo > start:
            out.append((start, lo - 1))
        start = hi + 1
    if start <= MAX_CODE:
        out.append((start, MAX_CODE))
    return _merge(out)


def _fold_char(c: int) -> int:
    low = chr(c).lower()
    return ord(low) if len(low) == 1 else c


def _fold(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The lower-case images of ``ranges`` (what they accept once names are case folded)."""
    out: list[tuple[int, int]] = []
    for lo, hi in ranges:
        if hi - lo > FOLD_RANGE_LIMIT:
            out.append((lo, hi))
            lo, hi = lo, min(hi, 0x24F)  # and the Latin part, folded
        out.extend((_fold_char(c), _fold_char(c)) for c in range(lo, hi + 1))
    return out


def _literal(ch: str, fold: bool) -> Intervals:
    c = ord(ch)
    return _merge([(_fold_char(c), _fold_char(c))] if fold else [(c, c)])


def _class(text: str, start: int, fold: bool, pattern: str) -> tuple[Intervals, int]:
    """Parse the class whose ``[`` is at ``text[start]``: its accepted characters and the index
    after its ``]``."""
    i = start + 1
    negate = i < len(text) and text[i] in "!^"
    if negate:
        i += 1
    ranges: list[tuple[int, int]] = []
    first = True
    while True:
        if i >= len(text):
            raise PatternError("unclosed_class", f"{pattern!r}: a '[' character class is not closed by ']'.")
        ch = text[i]
        if ch == "]" and not first:
            i += 1
            break
        if ch == "[" and text.startswith("[:", i):
            raise PatternError("unsupported_class", f"{pattern!r}: POSIX classes like [:alpha:] are not supported; list the characters.")
        if ch == "\\":
            i += 1
            if i >= len(text):
                raise PatternError("trailing_escape", f"{pattern!r}: '\\' at the end escapes nothing.")
            ch = text[i]
        lo = ord(ch)
        i += 1
        first = False
        if i + 1 < len(text) and text[i] == "-" and text[i + 1] != "]":
            hi_ch = text[i + 1]
            i += 2
            if hi_ch == "\\":
                if i >= len(text):
                    raise PatternError("trailing_escape", f"{pattern!r}: '\\' at the end escapes nothing.")
                hi_ch = text[i]
                i += 1
            ranges.append((lo, ord(hi_ch)))  # a reversed range is empty, as in fnmatch
        else:
            ranges.append((lo, lo))
    accepted = _merge(_fold(ranges) if fold else ranges)
    return (_complement(accepted) if negate else accepted), i


def parse_segment(text: str, fold: bool, pattern: str = "") -> Segment:
    """One segment (no "/") as :data:`DOUBLE_STAR` or its tokens.

    :param fold: read it case-insensitively (literals and classes folded to lower case).
    :param pattern: the whole pattern, for error messages.
    :raises PatternError: ``unclosed_class``, ``unsupported_class``, ``trailing_escape``.
    """
    if text == "**":
        return DOUBLE_STAR
    tokens: list[Token] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "*":
            if not tokens or tokens[-1] != STAR:
                tokens.append(STAR)
            i += 1
        elif ch == "?":
            tokens.append(ANY)
            i += 1
        elif ch == "[":
            accepted, i = _class(text, i, fold, pattern or text)
            tokens.append(accepted)
        elif ch == "\\":
            if i + 1 >= len(text):
                raise PatternError("trailing_escape", f"{pattern or text!r}: '\\' at the end escapes nothing.")
            tokens.append(_literal(text[i + 1], fold))
            i += 2
        else:
            tokens.append(_literal(ch, fold))
            i += 1
    return tuple(tokens)


def _is_magic(segment: str) -> bool:
    i = 0
    while i < len(segment):
        if segment[i] == "\\":
            i += 2
            continue
        if segment[i] in MAGIC:
            return True
        i += 1
    return False


def _unescape(segment: str) -> str:
    out, i = [], 0
    while i < len(segment):
        if segment[i] == "\\" and i + 1 < len(segment):
            i += 1
        out.append(segment[i])
        i += 1
    return "".join(out)


def escape(name: str) -> str:
    """``name`` as a pattern that matches only itself (``*?[\\`` escaped)."""
    return "".join("\\" + ch if ch in "*?[\\" else ch for ch in name)


@lru_cache(maxsize=65536)
def _segments_meet(a: tuple[Token, ...], b: tuple[Token, ...]) -> bool:
    """Is there a non-empty segment name both ``a`` and ``b`` match? (product automaton)"""
    seen: set[tuple[int, int, bool]] = set()
    stack = [(0, 0, False)]
    while stack:
        p, q, nonempty = stack.pop()
        if (p, q, nonempty) in seen:
            continue
        seen.add((p, q, nonempty))
        if p == len(a) and q == len(b) and nonempty:
            return True
        ta = a[p] if p < len(a) else None
        tb = b[q] if q < len(b) else None
        if ta == STAR:
            stack.append((p + 1, q, nonempty))
        if tb == STAR:
            stack.append((p, q + 1, nonempty))
        if ta is None or tb is None:
            continue
        chars_a = ANY if ta == STAR else ta
        chars_b = ANY if tb == STAR else tb
        assert not isinstance(chars_a, str) and not isinstance(chars_b, str)
        if _intersection(chars_a, chars_b):
            stack.append((p if ta == STAR else p + 1, q if tb == STAR else q + 1, True))
    return False


ANY_SEGMENT: tuple[Token, ...] = (STAR,)


def _segment_pair(a: Segment, b: Segment) -> bool:
    if a == DOUBLE_STAR and b == DOUBLE_STAR:
        return True
    left = ANY_SEGMENT if a == DOUBLE_STAR else a
    right = ANY_SEGMENT if b == DOUBLE_STAR else b
    assert not isinstance(left, str) and not isinstance(right, str)
    return _segments_meet(left, right)


class Pattern:
    """A parsed pattern.

    :param text: its normalised text, relative to the project root (``.`` for the root).
    :param fold: whether it is read case-insensitively.
    :param below: it covers what is below what it names (its segments end with ``**``).
    :param segments: its segments, the implicit trailing ``**`` included when ``below``.
    """

    # a plain class: dataclasses (and the inspect module it imports) would cost the hook ~9 ms
    __slots__ = ("text", "fold", "below", "segments")

    def __init__(self, text: str, fold: bool, below: bool, segments: tuple[Segment, ...]) -> None:
        self.text, self.fold, self.below, self.segments = text, fold, below, segments

    def __repr__(self) -> str:
        return f"Pattern({self.text!r}, fold={self.fold}, below={self.below})"

    @property
    def key(self) -> str:
        """The text as compared for identity (folded on case-insensitive file systems)."""
        return self.text.lower() if self.fold else self.text


@lru_cache(maxsize=65536)
def parse(text: str, fold: bool = False, below: bool = True) -> Pattern:
    """Parse a normalised pattern (as :func:`normalise` returns it).

    :param below: also cover everything below it; False for an existing file or a single
        path (a hook's edit target), which then matches only itself.
    :raises PatternError: as :func:`parse_segment`.
    """
    parts = [] if text == "." else text.split("/")
    segments = [parse_segment(s, fold, text) for s in parts]
    if below and (not segments or segments[-1] != DOUBLE_STAR):
        segments.append(DOUBLE_STAR)
    return Pattern(text, fold, below, tuple(segments))


def overlap(a: Pattern, b: Pattern) -> bool:
    """True when some path matches both ``a`` and ``b`` (symmetric).

    Both must come from the same project root; a pattern read case-insensitively on either
    side makes the comparison case-insensitive (both sides are parsed folded).
    """
    if a.fold != b.fold:
        a, b = parse(a.text, True, a.below), parse(b.text, True, b.below)
    sa, sb = a.segments, b.segments
    seen: set[tuple[int, int]] = set()
    stack = [(0, 0)]
    while stack:
        i, j = stack.pop()
        if (i, j) in seen:
            continue
        seen.add((i, j))
        if i == len(sa) and j == len(sb):
            return True
        ga = sa[i] if i < len(sa) else None
        gb = sb[j] if j < len(sb) else None
        if ga == DOUBLE_STAR:
            stack.append((i + 1, j))
        if gb == DOUBLE_STAR:
            stack.append((i, j + 1))
        if ga is not None and gb is not None and _segment_pair(ga, gb):
            stack.append((i if ga == DOUBLE_STAR else i + 1, j if gb == DOUBLE_STAR else j + 1))
    return False


def case_insensitive(root: str) -> bool:
    """Does the file system holding ``root`` (an existing absolute directory) ignore case?

    Decided by looking up the deepest path component that has cased letters with its case
    swapped: the same file means case is ignored there. A path without cased letters, or one
    that cannot be probed, counts as case-sensitive.
    """
    head = os.path.normpath(root)
    probe = head
    while True:
        parent, name = os.path.split(probe)
        if name and name.swapcase() != name:
            try:
                return os.path.samefile(probe, os.path.join(parent, name.swapcase()))
            except OSError:
                return False
        if not name or parent == probe:
            return False
        probe = parent


def normalise(pattern: str, root: str, *, fold: bool) -> Pattern:
    """What a caller typed, as a :class:`Pattern` relative to ``root``.

    :param pattern: a file, directory or glob, relative to ``root`` or absolute inside it.
    :param root: the project root, absolute and already resolved (:func:`os.path.realpath`).
    :param fold: the root's file system ignores case (:func:`case_insensitive`).
    A plain path that names an existing file covers only that file; anything else also covers
    what is below it (see the module docstring).

    :raises PatternError: ``empty`` (blank), ``nul``, ``too_long`` (over
        :data:`MAX_PATTERN_BYTES`), ``segment_too_long`` (a segment over
        :data:`MAX_SEGMENT_BYTES`), ``outside_root`` (``..`` climbing out,
        an absolute path elsewhere, a symlink leading out), ``dotdot_after_wildcard`` (``..``
        after a wildcard segment cannot be resolved), or a malformed glob (:func:`parse_segment`).
    """
    if not pattern.strip():
        raise PatternError("empty", "An empty pattern names nothing; give a file, directory or glob.")
    if "\0" in pattern:
        raise PatternError("nul", f"{pattern!r}: a path cannot contain a NUL character.")
    size = _size(pattern)
    if size > MAX_PATTERN_BYTES:
        raise PatternError("too_long", f"{_short(pattern)!r} is {size} bytes long; a path is at most {MAX_PATTERN_BYTES} bytes.")
    longest = max(pattern.split("/"), key=_size)
    if _size(longest) > MAX_SEGMENT_BYTES:
        raise PatternError("segment_too_long", f"{_short(pattern)!r} has a name of {_size(longest)} bytes;"
                                               f" a file or directory name is at most {MAX_SEGMENT_BYTES} bytes.")
    # Only what the caller typed below the root is read as a glob: the root's own name may hold
    # glob characters ("/tmp/a[1]/proj").
    base, typed = root, pattern
    if os.path.isabs(pattern):
        under = root.rstrip("/") + "/"
        base, typed = (root, pattern[len(under):]) if pattern.startswith(under) else ("/", pattern)
    parts = [p for p in typed.split("/") if p]
    first_magic = next((k for k, p in enumerate(parts) if _is_magic(p)), len(parts))
    rest = [p for p in parts[first_magic:] if p != "."]
    if ".." in rest:
        raise PatternError("dotdot_after_wildcard", f"{pattern!r}: '..' after a wildcard cannot be resolved; write the path without it.")
    for part in parts[:first_magic]:
        parse_segment(part, fold, pattern)  # a malformed escape is refused, not guessed at
    fixed = os.path.realpath(os.path.join(base, *(_unescape(p) for p in parts[:first_magic])))
    rel = os.path.relpath(fixed, root)
    if fold and _escapes(rel):  # the same directory spelt in another case
        rel = os.path.relpath(fixed.lower(), root.lower())
    if _escapes(rel):
        raise PatternError("outside_root", f"{pattern!r} is outside the project root {root}.")
    names = [] if rel == "." else [escape(n) for n in rel.split("/")]
    segments = names + rest
    # a plain path naming an existing file has nothing below it
    below = first_magic < len(parts) or not os.path.lexists(fixed) or os.path.isdir(fixed)
    return parse("/".join(segments) if segments else ".", fold, below)


def _size(text: str) -> int:
    """``text``'s length in bytes as a file name: UTF-8, an undecodable argv byte (PEP 383's
    lone surrogate) one byte, any other lone surrogate as UTF-8 would spell it (three)."""
    try:
        return len(text.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:
        return len(text.encode("utf-8", "surrogatepass"))


def _short(text: str) -> str:
    """``text`` cut to 60 characters for an error message (a refused path may be huge)."""
    return text if len(text) <= 60 else text[:57] + "..."


def covers_project(pattern: Pattern) -> bool:
    """True when ``pattern`` covers every file of its project: ``.``, ``**``, ``*``, ``**/*``
    (segments that are ``**``, and at most one that matches any name)."""
    names = [s for s in pattern.segments if s != DOUBLE_STAR]
    return pattern.below and len(names) <= 1 and all(all(t == STAR for t in s) for s in names)


def _escapes(rel: str) -> bool:
    return rel == ".." or rel.startswith("../") or os.path.isabs(rel)
