"""The core's part of the original's files (agent_link_core.legacy): the importers' hook and
health's ``legacyState``, with no importer run (the legacy plugin's ``import-legacy`` runs
them; plugins/legacy/tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from agent_link_core import hookimpl
from agent_link_core.app import App
from agent_link_core.legacy import LegacyContext, LegacyImporter, LegacyOutcome


class NotesImporter(LegacyImporter):
    """The original's (made up) notes file, ``<state dir>/notes.jsonl``."""

    name = "notes"
    order = 30

    def paths(self, ctx: LegacyContext) -> list[str]:
        return [str(Path(ctx.source_dir) / "notes.jsonl"), str(Path(ctx.source_dir) / "absent.jsonl")]

    def run(self, ctx: LegacyContext, outcome: LegacyOutcome) -> None:
        raise AssertionError("health never runs an importer")


class Notes:
    @hookimpl
    def agent_link_register_legacy_importers(self, register: Callable[[LegacyImporter], None]) -> None:
        register(NotesImporter())


def test_health_names_the_originals_files_an_importer_knows(isolated_env: Path) -> None:
    app = App.create(extra_plugins=(("notes", Notes()),))
    try:
        (isolated_env / "notes.jsonl").write_text('{"note": 1}\n')
        state: dict[str, Any] = app.health()["legacyState"]
        # the core alone has no legacy_imports table (the legacy plugin's): nothing is imported yet
        assert state["files"] == [{"importer": "notes", "path": str(isolated_env / "notes.jsonl"), "bytes": 12,
                                   "imported": False, "changedSinceImport": False}]
        assert state["pending"] == 1 and "agent-link import-legacy" in state["hint"]
        assert state["hint"].startswith("Install the legacy plugin (agent-link-legacy, plugins/legacy); then run `agent-link")
    finally:
        app.close()


def test_no_importer_no_files(isolated_env: Path) -> None:
    app = App.create()
    try:
        (isolated_env / "mailbox.jsonl").write_text("{}\n")  # the mailbox importer is the legacy plugin's
        assert app.health()["legacyState"] == {"sourceDir": str(isolated_env), "files": [], "pending": 0}
    finally:
        app.close()
