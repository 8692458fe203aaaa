"""The core must stay host-neutral: no host's name and no host's concepts in agent_link_core/.

Names are easy to catch. Concepts are what a host calls its own things (Codex threads and
turns, steering, app-servers, rollouts) leaking into the core's code, schemas and wording; a
host's plugin declares what it needs instead (``SenderOption``, the arguments and result fields it adds
with ``agent_link_extend_tools``). The few that remain for compatibility are listed with a reason.
"""

from __future__ import annotations

import re
from pathlib import Path

import agent_link_core

CORE = Path(agent_link_core.__file__).parent
HOST_WORDS = re.compile(r"codex|claude|anthropic|openai", re.IGNORECASE)
# Identifiers and phrases of one host's model (word boundaries keep "return", "threading",
# "to_thread" and an OS "worker thread" out).
HOST_CONCEPTS = re.compile(
    r"thread_?id|\bthread ids?\b|from-thread|endpoint_?id|turn_?id|(?-i:\bturns?\b)(?! (it|them|these|those|a|an|the|on|off)\b)"
    r"|start_turn|steer|app-?servers?\b|\brollouts?\b",
    re.IGNORECASE,
)
# (file, text on the line): kept on purpose.
ALLOWED = {
    ("model.py", "turn_id: str | None"): "Caller.turn_id is public API plugins fill and read",
    ("model.py", '_fields = ("address", "source", "host", "turn_id"'): "Caller.turn_id, the record's field list",
    ("model.py", "self._set(address=address, source=source, host=host, turn_id=turn_id"): "Caller.turn_id, set once",
    ("errors.py", '"active_turn_conflict": '): "the closed list of error codes is the original contract's, host codes included",
    ("core_tools.py", '"originThreadId": STR, "originTurnId": STR'): "the receipts plugin's receipt argument: only "
    "harnesses can declare message_agent arguments so far",
}


def offenders(pattern: re.Pattern[str]) -> list[str]:
    found = []
    for path in sorted(CORE.rglob("*.py")):
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line) and not any(path.name == f and text in line for f, text in ALLOWED):
                found.append(f"{path.relative_to(CORE)}:{lineno}: {line.strip()}")
    return found


def test_core_mentions_no_host() -> None:
    bad = offenders(HOST_WORDS)
    assert not bad, "host-specific code in the core:\n" + "\n".join(bad)


def test_core_uses_no_host_concept() -> None:
    bad = offenders(HOST_CONCEPTS)
    assert not bad, "a host's concepts in the core (let the harness declare them):\n" + "\n".join(bad)


def test_the_checks_would_catch_a_host_word_or_concept() -> None:
    assert HOST_WORDS.search("if host == 'Codex':")
    assert HOST_WORDS.search("CLAUDE_CODE_SESSION_ID")
    for concept in ('"expectedTurnId": STR', 'click.option("--from-thread")', "steer the active turn",
                    'meta = {"threadId": t}', "probe the app-server", "rollout files"):
        assert HOST_CONCEPTS.search(concept), concept
    for neutral in ("return value", "import threading", "asyncio.to_thread(f)", "turn it off", "a worker thread"):
        assert not HOST_CONCEPTS.search(neutral), neutral


def test_core_imports_no_plugin_package() -> None:
    """The core knows no plugin: what a plugin adds reaches it through hooks and declared entry
    points (the start-up front: ``agent_link_core.discovery.mcp_front``), never an import."""
    import ast

    found = []
    for path in sorted(CORE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            found += [f"{path.relative_to(CORE)}:{node.lineno}: {name}" for name in names
                      if name.startswith("agent_link_") and name.split(".")[0] != "agent_link_core"]
    assert not found, "the core imports a plugin package:\n" + "\n".join(found)
