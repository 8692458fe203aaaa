"""``agent-link machines status`` for people: what other machines listed and what the engine or a
stopped relay said reach the terminal one line each, their control and bidi characters escaped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent_link_core.cli import build_cli


def test_status_shows_others_text_escaped(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import agent_link_machines.status as status

    section: dict[str, Any] = {
        "configured": True, "machine": "ci", "engine": "nats://127.0.0.1:4222", "relayRunning": False, "reachable": False,
        "lastContactAgeMs": None, "outboxDepth": 0,
        "sharedAddresses": [{"address": "team:c\u202earol", "machines": ["ci", "dev\x1b[2Jbox"]}],
        "procedureMismatches": [{"role": "rev\aiewer", "machine": "devbox", "there": {"version": "2\u202e"}, "here": {"version": "3"}}],
        "machinesSeen": [{"name": "dev\x1b[2Jbox", "sessions": 2, "ageMs": 4000, "stale": False}],
        "problem": "the relay stopped: engine said \x1b]0;pwned\a\nforged line",
    }
    monkeypatch.setattr(status, "health_section", lambda app: section)
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "presence waits machines")
    got = CliRunner().invoke(build_cli(), ["machines", "status"])
    assert got.exit_code == 1, got.output
    lines = got.output.splitlines()
    assert len(lines) == 3 and all(line.isprintable() for line in lines), got.output
    assert "team:c\\u{202E}arol served on ci and dev\\u{001B}[2Jbox" in lines[0] and "rev\\u{0007}iewer" in lines[0]
    assert lines[1] == "  dev\\u{001B}[2Jbox: 2 sessions, listed 4 s ago"
    assert lines[2] == "problem: the relay stopped: engine said \\u{001B}]0;pwned\\u{0007}\\u{000A}forged line"
