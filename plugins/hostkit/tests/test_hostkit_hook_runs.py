"""A host plugin's health reads when each prompt hook last ran (plugins/hostkit/agent_link_hostkit/hook_runs.py)."""

from __future__ import annotations

from pathlib import Path

from agent_link_hostkit.hook_runs import last_runs


def test_last_runs_reads_each_heartbeat_and_skips_what_is_not_one(tmp_path: Path) -> None:
    assert last_runs(tmp_path) == {}  # no hook ran yet: no folder
    beats = tmp_path / "hooks"
    beats.mkdir()
    (beats / "claude-UserPromptSubmit.last").write_text("1700000000123")
    (beats / "codex-Stop.last").write_text("")  # cut short: counts as never
    (beats / "codex-Prompt.last").write_text("garbled")
    (beats / "notes.txt").write_text("42")
    assert last_runs(tmp_path) == {"claude-UserPromptSubmit": 1700000000123, "codex-Stop": 0}
