"""Health's ``legacyState`` section (agent_link_legacy.state): the original's files another
plugin's importer knows, with no importer run; without this plugin nothing asks for importers."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from agent_link_core import hookimpl
from agent_link_core.app import App
from agent_link_legacy.contract import LegacyContext, LegacyImporter, LegacyOutcome


class NotesImporter(LegacyImporter):
    """The original's (made up) notes file, ``<state dir>/notes.jsonl``."""

    name = "notes"
    order = 30

    def paths(self, ctx: LegacyContext) -> list[str]:
        return [str(Path(ctx.source_dir) / "notes.jsonl"), str(Path(ctx.source_dir) / "absent.jsonl")]

    def run(self, ctx: LegacyContext, outcome: LegacyOutcome) -> None:
        raise AssertionError("health never runs an importer")


class Notes:
    def __init__(self) -> None:
        self.asked = 0

    @hookimpl(optionalhook=True)  # this plugin's hook: the implementer loads without it
    def agent_link_register_legacy_importers(self, register: Callable[[LegacyImporter], None]) -> None:
        self.asked += 1
        register(NotesImporter())


def test_health_names_the_originals_files_an_importer_knows(isolated_env: Path) -> None:
    app = App.create(extra_plugins=(("notes", Notes()),))
    try:
        (isolated_env / "notes.jsonl").write_text('{"note": 1}\n')
        state: dict[str, Any] = app.health()["sections"]["legacyState"]
        assert state["files"] == [{"importer": "notes", "path": str(isolated_env / "notes.jsonl"), "bytes": 12,
                                   "imported": False, "changedSinceImport": False}]
        assert state["pending"] == 1 and state["hint"].startswith("Run `agent-link import-legacy --dry-run`")
    finally:
        app.close()


def test_no_files_no_hint(isolated_env: Path) -> None:
    app = App.create()
    try:
        assert app.health()["sections"]["legacyState"] == {"sourceDir": str(isolated_env), "files": [], "pending": 0}
    finally:
        app.close()


def test_without_this_plugin_no_importer_is_asked_and_health_has_no_section(isolated_env: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "")
    notes = Notes()
    app = App.create(extra_plugins=(("notes", notes),))
    try:
        (isolated_env / "notes.jsonl").write_text('{"note": 1}\n')
        health = app.health()
        assert "legacyState" not in health["sections"] and "legacyState" not in health
        assert notes.asked == 0 and "notes" in app.hooks.loaded  # an optional hook: it loads
    finally:
        app.close()
