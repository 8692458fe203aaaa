"""The core must stay host-neutral: no word of a specific host in agent_link_core/."""

from __future__ import annotations

import re
from pathlib import Path

import agent_link_core

CORE = Path(agent_link_core.__file__).parent
HOST_WORDS = re.compile(r"codex|claude|anthropic|openai", re.IGNORECASE)


def test_core_mentions_no_host() -> None:
    offenders = []
    for path in sorted(CORE.rglob("*.py")):
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if HOST_WORDS.search(line):
                offenders.append(f"{path.relative_to(CORE)}:{lineno}: {line.strip()}")
    assert not offenders, "host-specific code in the core:\n" + "\n".join(offenders)


def test_the_check_would_catch_a_host_word(tmp_path: Path) -> None:
    assert HOST_WORDS.search("if host == 'Codex':")
    assert HOST_WORDS.search("CLAUDE_CODE_SESSION_ID")
