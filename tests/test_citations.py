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
