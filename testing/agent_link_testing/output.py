"""What a command said on stderr, less the plugin boundary's timing note; its output with ids and times masked.

agent-link logs ``agent-link plugin 'NAME' took N ms in HOOK (slow)`` when a plugin's hook
takes longer than agent_link_core/boundary.py's ``SLOW_MS``; on a loaded machine (parallel
test workers, a shared CI box) any hook may. Tests of what a command prints compare the rest.
"""

from __future__ import annotations

import re

#: the boundary's slow-hook note, one line
SLOW_HOOK = re.compile(r"agent-link plugin '[^']+' took \d+ ms in \w+ \(slow\)")


def said(stderr: str) -> list[str]:
    """The non-blank lines of ``stderr`` other than slow-hook notes."""
    return [line for line in stderr.splitlines() if line.strip() and not SLOW_HOOK.search(line)]


def said_text(stderr: str) -> str:
    """``stderr`` without its slow-hook note lines (the other lines as they were, each ending in a newline)."""
    return "".join(line for line in stderr.splitlines(keepends=True) if not SLOW_HOOK.search(line))


#: a message id (a ULID, Crockford base 32)
ULID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")
#: a time stamp, a duration in ms, a wait's measured or asked time, an epoch time in ms
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z|\b\d+ ms\b|\"(waitedMs|requestedTimeoutMs)\": ?\d+|\b1\d{12}\b")


def masked(text: str) -> str:
    """``text`` with message ids and times masked, so two runs of one command compare equal."""
    return TIME.sub("<time>", ULID.sub("<id>", text))
