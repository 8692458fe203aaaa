"""The roles plugin imports the original's role table and role state (docs/legacy.md)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_legacy.contract import importers
from agent_link_legacy.engine import import_legacy
from agent_link_roles.procedures import latest_version

PROCEDURE = "# Reviewer\nRead the diff, answer within the hour.\n"


def original_roles(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "roles.json").write_text(json.dumps({"version": 1, "enforcement": "warn", "roles": {
        "reviewer": {"address": "team:rita", "assignedAt": "2023-11-14T22:13:20.000Z"},
        "tester": {"address": "team:tom", "assignedAt": "2023-11-14T22:13:20.000Z"}}}))
    (folder / "roles").mkdir(exist_ok=True)
    (folder / "roles" / "reviewer.md").write_text(PROCEDURE)
    (folder / "roles" / "tester.md").write_text("edited after the original recorded it\n")
    sha = hashlib.sha256(PROCEDURE.encode()).hexdigest()
    (folder / "role-state.json").write_text(json.dumps({"version": 1, "procedures": {
        "reviewer": {"version": 3, "sha256": sha, "updatedAt": "2023-11-14T22:13:20.000Z"},
        "tester": {"version": 1, "sha256": "0" * 64, "updatedAt": "2023-11-14T22:13:20.000Z"},
        "Bad Name": {"version": 1, "sha256": "x"}},
        "deliveries": {"reviewer": {"team:rita": sha, "not an address": sha}}}))


def roles_item(report: dict[str, object]) -> dict[str, object]:
    return next(i for i in report["importers"] if i["name"] == "roles")  # type: ignore[union-attr,index]


def test_role_state_in_place_keeps_version_numbers_and_what_was_shown(isolated_env: Path, app: App) -> None:
    original_roles(isolated_env)
    item = roles_item(import_legacy(app))
    # two roles read in place, one procedure version imported, two bad entries
    assert (item["imported"], item["alreadyPresent"], item["unreadable"]) == (1, 2, 2)
    assert item["details"] == {"proceduresChangedSince": 1, "shownImported": 1}
    assert latest_version(app.store, "reviewer")["version"] == 3  # type: ignore[index]
    assert latest_version(app.store, "tester") is None
    shown = app.store.conn.execute("SELECT holder, message_id FROM role_procedure_shown").fetchall()
    assert [tuple(r) for r in shown] == [("team:rita", "legacy-import")]
    again = roles_item(import_legacy(app))
    assert (again["imported"], again["alreadyPresent"]) == (0, 3) and again["details"] == {"proceduresChangedSince": 1, "shownPresent": 1}


def test_role_table_from_another_directory_is_copied_once(isolated_env: Path, tmp_path: Path, app: App) -> None:
    old = tmp_path / "old"
    original_roles(old)
    dry = roles_item(import_legacy(app, dry_run=True, source_dir=str(old)))
    assert dry["imported"] == 3 and not (isolated_env / "roles.json").exists()
    item = roles_item(import_legacy(app, source_dir=str(old)))
    assert item["imported"] == 3
    assert (isolated_env / "roles.json").read_bytes() == (old / "roles.json").read_bytes()
    assert (isolated_env / "roles" / "reviewer.md").read_text() == PROCEDURE
    assert (isolated_env / "roles.json").stat().st_mode & 0o077 == 0
    again = roles_item(import_legacy(app, source_dir=str(old)))
    assert again["imported"] == 0 and again["alreadyPresent"] == 3
    (isolated_env / "roles.json").write_text(json.dumps({"version": 1, "roles": {}}))
    differs = roles_item(import_legacy(app, source_dir=str(old)))
    assert differs["imported"] == 0 and "left as it is" in differs["notes"][0]


def test_roles_importer_is_registered(make_app: Callable[..., App]) -> None:
    assert "roles" in [importer.name for _, importer in importers(make_app())]


@pytest.mark.anyio
async def test_the_role_table_agent_link_writes_is_never_pending_in_health(isolated_env: Path, tmp_path: Path, app: App,
                                                                          run_tool: Any) -> None:
    """roles.json in the state dir is this plugin's own file: neither a copy an import made nor
    a later set_agent_role makes health count it as an original waiting to be imported."""
    old = tmp_path / "old"
    original_roles(old)
    (old / "role-state.json").unlink()
    import_legacy(app, source_dir=str(old))
    legacy = app.health()["sections"]["legacyState"]
    table = next(f for f in legacy["files"] if f["path"] == str(isolated_env / "roles.json"))
    assert table["writtenByAgentLink"] is True and legacy["pending"] == 0
    out = await run_tool(app, "set_agent_role", {"role": "builder", "agent": "test:bob"})
    assert out["ok"] is True, out
    assert app.health()["sections"]["legacyState"]["pending"] == 0


@pytest.mark.anyio
async def test_a_role_table_set_before_any_import_is_not_pending(isolated_env: Path, app: App, run_tool: Any) -> None:
    assert (await run_tool(app, "set_agent_role", {"role": "builder", "agent": "test:bob"}))["ok"] is True
    legacy = app.health()["sections"]["legacyState"]
    assert [f["writtenByAgentLink"] for f in legacy["files"]] == [True] and legacy["pending"] == 0
