"""The overlap rule, pair by pair: globs, directories, ``..``, symlinks, case, and bad input."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_link_leases.patterns import MAX_PATTERN_BYTES, MAX_SEGMENT_BYTES, Pattern, PatternError, covers_project, normalise, overlap, parse

# (a, b, overlap?): every pair is checked both ways round (the rule is symmetric). "file:"
# marks a plain path naming an existing file, which covers nothing below it.
PAIRS = [
    # the same file, other files
    ("src/a.py", "src/a.py", True),
    ("src/a.py", "src/b.py", False),
    ("src/a.py", "src/a.pyc", False),
    # a directory covers what is below it, at any depth
    ("src", "src/a.py", True),
    ("src", "src/deep/er/a.py", True),
    ("src", "srcx/a.py", False),
    (".", "anything/at/all", True),
    ("src/a.py", "src/a.py/x", True),  # a "file" lease is a directory lease if it is one
    # * and ? stay within a segment
    ("src/*.py", "src/a.py", True),
    ("src/*.py", "src/a.txt", False),
    ("src/*.py", "src/sub", False),
    ("src/*.py", "src/sub/a.py", False),
    ("src/*", "src/sub/a.py", True),  # src/sub is matched, and covers below
    ("src/?.py", "src/ab.py", False),
    ("src/?.py", "src/a.py", True),
    ("*.py", "src/a.py", False),
    ("*", "src/a.py", True),
    # two globs: some name matches both?
    ("src/a*", "src/*b", True),  # "ab"
    ("src/a*.py", "src/*.txt", False),
    ("src/*.py", "src/*.py", True),
    ("src/test_*.py", "src/*_test.py", True),  # "test__test.py"
    ("src/?", "src/??", False),
    ("src/a?c", "src/*b*", True),
    ("*x", "*y", False),
    # ** spans segments, zero included
    ("src/**/a.py", "src/a.py", True),
    ("src/**/a.py", "src/x/y/a.py", True),
    ("src/**/a.py", "file:src/x/y/b.py", False),
    ("src/**/a.py", "src/x/y/b.py", True),  # b.py may yet be made a directory holding a.py
    ("**/*.md", "file:src/a.py", False),
    ("**/*.md", "file:src/a.md", True),
    ("file:src/a.py", "file:src/a.py", True),
    ("file:src/a.py", "src", True),
    ("**/*.md", "guide/x.md", True),
    ("**/*.md", "file:docs/x.py", False),
    ("src/**/test_*.py", "src/**/*_test.py", True),
    ("a/**/b/*.py", "a/*/c/*.py", True),  # a/x/c/y.py/b/z.py
    ("a/**/b/*.py", "file:a/x/c/y.py", False),
    ("a/*/b/*.py", "a/*/c/*.py", False),
    ("a/**/b/*.py", "a/*/b/x.py", True),
    ("**/*.md", "**/*.py", True),  # a directory named x.md holding y.py
    ("src/**", "lib/**", False),
    ("src/a**b", "src/x/b", False),  # ** inside a segment is a plain *
    # character classes
    ("src/[ab].py", "src/a.py", True),
    ("src/[ab].py", "src/c.py", False),
    ("src/[a-c].py", "src/[!b].py", True),
    ("src/[b].py", "src/[!b].py", False),
    ("src/[^b].py", "src/b.py", False),
    ("src/[a-c]", "src/[d-f]", False),
    ("src/[]]", "src/]", True),
    ("src/[z-a]", "src/*", False),  # a reversed range accepts nothing
    # escapes
    ("src/\\*.py", "src/*.py", True),
    ("src/\\*.py", "src/a.py", False),
    # hidden files are matched by * (as git and pathlib do)
    ("src/*", "src/.env", True),
]


@pytest.mark.parametrize(("a", "b", "expected"), PAIRS)
def test_pairs(a: str, b: str, expected: bool) -> None:
    assert overlap(read(a), read(b)) is expected
    assert overlap(read(b), read(a)) is expected


def read(typed: str) -> Pattern:
    return parse(typed.removeprefix("file:"), below=not typed.startswith("file:"))


FOLDED = [
    ("src/A.py", "src/a.py", True),
    ("SRC", "src/x", True),
    ("src/[A-C].py", "src/b.py", True),
    ("src/[!A].py", "src/a.py", False),
    ("src/*.PY", "src/x.py", True),
]


@pytest.mark.parametrize(("a", "b", "expected"), FOLDED)
def test_case_insensitive_pairs(a: str, b: str, expected: bool) -> None:
    assert overlap(parse(a, True), parse(b, True)) is expected
    assert overlap(parse(a, False), parse(b, True)) is expected  # folded on either side: folded
    if expected:
        assert overlap(parse(a), parse(b)) is False  # and distinct where case matters


@pytest.fixture
def root(tmp_path: Path) -> str:
    project = tmp_path / "proj"
    (project / "src" / "pkg").mkdir(parents=True)
    (project / "docs").mkdir()
    os.symlink(project / "src" / "pkg", project / "link")
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", project / "out")
    return os.path.realpath(project)


NORMALISED = [
    ("src/a.py", "src/a.py"),
    ("./src//a.py", "src/a.py"),
    ("src/../guide/x.md", "guide/x.md"),
    ("src/pkg/../../docs", "docs"),
    ("link/mod.py", "src/pkg/mod.py"),  # a symlink in the fixed prefix is resolved
    ("link/*.py", "src/pkg/*.py"),
    ("src/*/./x", "src/*/x"),
    (".", "."),
    ("src/", "src"),
    ("src/we*rd[x].py", "src/we*rd[x].py"),
]


@pytest.mark.parametrize(("typed", "stored"), NORMALISED)
def test_normalise(root: str, typed: str, stored: str) -> None:
    assert normalise(typed, root, fold=False).text == stored
    assert normalise(os.path.join(root, typed), root, fold=False).text == stored


def test_an_existing_file_covers_nothing_below(root: str) -> None:
    Path(root, "src", "a.py").write_text("")
    assert normalise("src/a.py", root, fold=False).below is False
    assert normalise("src/new.py", root, fold=False).below is True  # may be made a directory
    assert normalise("src", root, fold=False).below and normalise("src/*.py", root, fold=False).below
    assert not overlap(normalise("src/a.py", root, fold=False), normalise("**/*.md", root, fold=False))


def test_a_symlink_and_its_target_overlap(root: str) -> None:
    assert overlap(normalise("link/a.py", root, fold=False), normalise("src/pkg", root, fold=False))
    assert not overlap(normalise("link/a.py", root, fold=False), normalise("docs", root, fold=False))


def test_a_literal_name_with_glob_characters_is_escaped(root: str) -> None:
    Path(root, "src", "[x]").mkdir()
    named = normalise("src/\\[x]/f", root, fold=False)
    assert named.text == "src/\\[x]/f"
    assert overlap(named, parse("src/\\[x]")) and not overlap(named, parse("src/x"))


BAD = [
    ("", "empty"),
    ("   ", "empty"),
    ("a\0b", "nul"),
    ("../x", "outside_root"),
    ("src/../../x", "outside_root"),
    ("/etc/passwd", "outside_root"),
    ("/*", "outside_root"),
    ("out/file", "outside_root"),  # a symlink leading out of the project
    ("src/*/../x", "dotdot_after_wildcard"),
    ("src/[ab", "unclosed_class"),
    ("src/[[:alpha:]]", "unsupported_class"),
    ("src/x\\", "trailing_escape"),
    ("a" * 5000, "too_long"),  # longer than PATH_MAX, and its one name than NAME_MAX
    ("a/" * 2100, "too_long"),
    ("src/" + "b" * (MAX_SEGMENT_BYTES + 1) + "/x", "segment_too_long"),
    ("src/" + "é" * 128, "segment_too_long"),  # 256 bytes in UTF-8, 128 characters
]


@pytest.mark.parametrize(("typed", "reason"), BAD)
def test_bad_patterns_are_named(root: str, typed: str, reason: str) -> None:
    with pytest.raises(PatternError) as caught:
        normalise(typed, root, fold=False)
    assert caught.value.reason == reason and caught.value.message


def test_case_insensitive_root_spelt_otherwise(root: str) -> None:
    assert normalise(root.upper() + "/SRC/x", root, fold=True).text == "src/x"
    with pytest.raises(PatternError):
        normalise(root.upper() + "/SRC/x", root, fold=False)


def test_a_root_whose_name_holds_glob_characters(tmp_path: Path) -> None:
    project = tmp_path / "a[1]*" / "proj"
    (project / "src").mkdir(parents=True)
    root = os.path.realpath(project)
    assert normalise("src/*.py", root, fold=False).text == "src/*.py"
    assert normalise(os.path.join(root, "src", "x.py"), root, fold=False).text == "src/x.py"
    with pytest.raises(PatternError) as caught:
        normalise(str(tmp_path / "a[1]*" / "other"), root, fold=False)
    assert caught.value.reason == "outside_root"


def test_the_longest_path_and_name_pass(root: str) -> None:
    name = "n" * MAX_SEGMENT_BYTES
    assert normalise(f"src/{name}", root, fold=False).text == f"src/{name}"
    deep = "/".join([name] * (MAX_PATTERN_BYTES // (MAX_SEGMENT_BYTES + 1)))
    assert normalise(deep, root, fold=False).text == deep
    with pytest.raises(PatternError) as caught:
        normalise("x" * 9000, root, fold=False)
    assert "9000 bytes" in caught.value.message and len(caught.value.message) < 200  # the path is not repeated whole


@pytest.mark.parametrize(("text", "whole"), [
    (".", True), ("**", True), ("*", True), ("**/*", True), ("*/**", True),
    ("src", False), ("*/*", False), ("*.py", False), ("**/*.py", False), ("src/**", False), ("?", False),
])
def test_covers_project(text: str, whole: bool) -> None:
    assert covers_project(parse(text)) is whole
