"""The Claude plugin's part of ``import-legacy``: the original's older mailbox paths under
Claude Code's config dir, and Claude session ids stored bare or as ``local_<id>``
(docs/legacy.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_link_core.app import App
from agent_link_legacy.engine import import_legacy
from agent_link_testing.legacy_files import T0, message, state, write_lines

SESSION = "0f8fad5b-d9cb-469f-a165-70867728950e"
OLD, NEW, BOTH = "01HF0000000000000000000031", "01HF0000000000000000000032", "01HF0000000000000000000033"


def test_older_paths_first_and_claude_ids_as_addresses(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "codex")
    home = isolated_env.parent
    older = write_lines(home / ".claude" / "agent-link" / "mailbox.jsonl", [
        message(OLD, f"local_{SESSION}", "codex:thread-1", "from a Desktop session", to_kind="codex", at=T0),
        message(BOTH, SESSION, "codex:thread-1", "the first copy", at=T0 + 1),
    ])
    current = write_lines(isolated_env / "mailbox.jsonl", [
        message(BOTH, SESSION, "codex:thread-1", "a later copy", at=T0 + 2),
        state("delivered", OLD, T0 + 5, to="codex:thread-1", via="codex-turn"),  # an event for the older file's message
        message(NEW, "codex:thread-1", SESSION, "to a bare Claude id", from_kind="codex", at=T0 + 3),
    ])
    app = App.create()
    report = import_legacy(app)
    names = [i["name"] for i in report["importers"]]
    assert names.index("claude-mailbox") < names.index("mailbox")
    claude, core = (next(i for i in report["importers"] if i["name"] == n) for n in ("claude-mailbox", "mailbox"))
    assert claude["files"] == [str(older)] and core["files"] == [str(current)]
    # the copy in the later file is already present (stored by the older file's importer),
    # as a second run would count it: the counts add up to the lines
    assert (claude["imported"], core["imported"], core["alreadyPresent"]) == (2, 1, 1)
    assert "duplicateLines" not in core["details"]
    assert app.mailbox.stored(OLD)["from_addr"] == f"claude:{SESSION}"
    assert app.mailbox.stored(OLD)["delivered_via"] == "codex-turn"
    assert app.mailbox.stored(BOTH)["body"] == "the first copy"
    assert app.mailbox.stored(NEW)["recipient"] == f"claude:{SESSION}"
    legacy = app.health()["sections"]["legacyState"]
    assert {f["path"] for f in legacy["files"]} == {str(older), str(current)} and legacy["pending"] == 0
    app.close()
