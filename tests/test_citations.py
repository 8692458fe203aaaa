"""Docstrings and docs cite only what a clone has: files inside the repository (or public
sources), never a folder next to it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The steering folder beside a checkout, assembled so this file names none of its paths itself.
_FOLDER = "sha" + "red"
OUTSIDE = re.compile("|".join((rf"\.\./{_FOLDER}", rf"/work/{_FOLDER}", *(rf"{_FOLDER}/{d}" for d in ("reference", "DESIGN", "STYLE")))))
DOC_CITATION = re.compile(r"docs/[A-Za-z0-9_/.-]+\.md")


def tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", *patterns], cwd=REPO, capture_output=True, text=True, check=True).stdout
    return [REPO / line for line in out.splitlines() if (REPO / line).is_file()]


def test_nothing_cites_a_folder_outside_the_repository() -> None:
    offenders = []
    for path in tracked("*.py", "*.md", "*.toml", "*.json", "*.sh"):
        for lineno, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{path.relative_to(REPO)}:{lineno}: {line.strip()}")
    assert not offenders, "citations of files a clone does not have:\n" + "\n".join(offenders)


def test_every_cited_doc_exists() -> None:
    missing = set()
    for path in tracked("*.py", "*.md"):
        for cited in DOC_CITATION.findall(path.read_text(encoding="utf-8", errors="replace")):
            if not (REPO / cited).is_file() and not (path.parent / cited).is_file():
                missing.add(f"{path.relative_to(REPO)} cites {cited}")
    assert not missing, "\n".join(sorted(missing))


# [text](target): a relative link, up to its #anchor (a web address or a bare #anchor is not a file of the clone)
MARKDOWN_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)\s]*)?\)")


def test_every_relative_link_of_the_docs_names_a_file_of_the_clone() -> None:
    """README and docs link files, which moves and renames break silently (the README linked
    agent_link_core/handoff.py, which does not exist)."""
    broken = []
    for path in tracked("*.md"):
        for target in MARKDOWN_LINK.findall(path.read_text(encoding="utf-8", errors="replace")):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (path.parent / target).exists():
                broken.append(f"{path.relative_to(REPO)} links {target}")
    assert not broken, "\n".join(sorted(broken))


# "docs/behaviour.md §10", "hosts/codex.md §6-7", "behaviour.md §10.3 step 7": a section number,
# or a numbered item of a section (§10.3 = item 3 of section 10), or a range of either.
SECTION_CITATION = re.compile(r"(?<![\w/-])((?:docs/)?(?:[\w-]+/)?[\w-]+\.md)\)?[^\S\n]?§[^\S\n]?(\d+(?:\.\d+)?)(?:[-–](\d+(?:\.\d+)?))?")
SECTION_HEADING = re.compile(r"^#+ (\d+(?:\.\d+)*)\.? ")


def sections(doc: Path) -> set[str]:
    """The citable numbers of ``doc``: its numbered headings (``## 10. The envelope`` gives
    ``10``) and the numbered items under each (``3. **Escaping**`` in section 10 gives ``10.3``)."""
    found: set[str] = set()
    current = None
    for line in doc.read_text(encoding="utf-8").splitlines():
        heading = SECTION_HEADING.match(line)
        if heading:
            current = heading.group(1)
            found.add(current)
            continue
        item = re.match(r"^(\d+)\. ", line)
        if item and current is not None:
            found.add(f"{current}.{item.group(1)}")
    return found


def cited_doc(path: Path, name: str) -> Path | None:
    for base in (REPO, REPO / "docs", path.parent):
        if (base / name).is_file() and (base / name).resolve().is_relative_to(REPO):
            return base / name
    return None


def test_every_cited_section_exists() -> None:
    wrong = []
    for path in tracked("*.py", "*.md"):
        text = path.read_text(encoding="utf-8", errors="replace")
        for lineno, line in enumerate(text.splitlines(), 1):
            for match in SECTION_CITATION.finditer(line):
                doc = cited_doc(path, match.group(1))
                if doc is None:
                    continue  # a file the repository does not have: test_every_cited_doc_exists' concern
                known = sections(doc)
                for number in filter(None, match.group(2, 3)):
                    if number not in known:
                        wrong.append(f"{path.relative_to(REPO)}:{lineno}: {match.group(0)} ({number} is not a section or item)")
    assert not wrong, "citations of sections that do not exist:\n" + "\n".join(wrong)
