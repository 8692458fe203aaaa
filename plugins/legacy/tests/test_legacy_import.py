"""``agent-link import-legacy``: the original's mailbox folded into the database exactly once,
dry runs, bad lines, a failing importer plugin, and health's ``legacyState`` (docs/legacy.md)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent_link_core import hookimpl
from agent_link_core.app import App
from agent_link_core.cli import build_cli
from agent_link_legacy.contract import LegacyContext, LegacyImporter, LegacyOutcome
from agent_link_legacy.engine import import_legacy
from agent_link_testing.legacy_files import T0, message, state, write_lines


def ulid(n: int) -> str:
    return f"01HF{n:022d}"


M1, M2, M3, M4, R1 = ulid(1), ulid(2), ulid(3), ulid(4), ulid(9)


def original_mailbox(state_dir: Path) -> Path:
    """A mailbox the original could have written: a resolved reply/action pair, a reminded
    message, a released delivery, an fyi, and three bad lines."""
    return write_lines(state_dir / "mailbox.jsonl", [
        message(M1, "team:alice", "team:bob", "Please review <this>", metadata={"sender": {"source": "runtime_context"}}),
        state("delivered", M1, T0 + 1000, to="team:bob", via="inbox"),
        message(R1, "team:bob", "team:alice", "Done, looks fine", at=T0 + 2000, anticipation="fyi", reply_to=M1),
        state("resolved", M1, T0 + 2000, kind="reply", by="team:bob", byAddress="team:bob", late=False, replyMessageId=R1),
        "{not json",
        message(M2, "carol", "dave", "bare ids with their kind", from_kind="team", to_kind="team", anticipation="action", at=T0 + 3000),
        state("delivered", M2, T0 + 3500, to="team:dave"),
        state("reminded", M2, T0 + 4000, n=1, via="prompt-hook", to="team:dave"),
        message(M3, "external", "team:erin", "pushed, then released", anticipation="fyi", at=T0 + 5000),
        state("delivered", M3, T0 + 5100, to="team:erin"),
        state("released", M3, T0 + 5200, to="team:erin"),
        message(M4, "team:alice", "nobody-knows-this", "no recipient form agent-link can address", at=T0 + 6000),
        ["a", "list"],
        # a second copy of M1: the first one wins
        message(M1, "team:alice", "team:bob", "an edited copy", at=T0 + 7000),
        # a resolution by someone who was not the recipient is not trusted
        state("resolved", M2, T0 + 8000, kind="done", by="team:mallory"),
    ])


def dump(db: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every ordinary table (FTS shadow tables left out)."""
    conn = sqlite3.connect(db)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"
                                            " AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '%fts%' AND name NOT LIKE 'session_titles%'")]
        return {n: sorted(map(tuple, conn.execute(f"SELECT * FROM {n}")), key=repr) for n in sorted(names)}
    finally:
        conn.close()


def only(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(i for i in report["importers"] if i["name"] == name)


def test_mailbox_is_imported_with_its_state_and_original_ids(isolated_env: Path) -> None:
    original_mailbox(isolated_env)
    app = App.create()
    report = import_legacy(app)
    mailbox = only(report, "mailbox")
    assert mailbox["ok"] and mailbox["imported"] == 4 and mailbox["alreadyPresent"] == 0
    assert mailbox["unreadable"] == 3
    assert [(b["line"], b["error"][:12]) for b in mailbox["badLines"]] == [
        (5, "not JSON: Ex"), (12, "message 01HF"), (13, "a JSON list,")]
    assert mailbox["badLines"][1]["error"].startswith(f"message {M4}: recipient 'nobody-knows-this'")
    assert all(b["file"] == str(isolated_env / "mailbox.jsonl") for b in mailbox["badLines"])

    m1 = app.mailbox.stored(M1)
    assert (m1["from_addr"], m1["recipient"], m1["body"]) == ("team:alice", "team:bob", "Please review <this>")
    assert m1["from_source"] == "runtime_context" and m1["delivered_at"] == T0 + 1000 and m1["open"] == 0
    view = app.mailbox.to_view(m1)
    assert view["status"] == "replied" and view["resolution"]["replyMessageId"] == R1
    assert app.mailbox.stored(R1)["reply_to"] == M1

    m2 = app.mailbox.stored(M2)
    assert (m2["from_addr"], m2["recipient"], m2["open"]) == ("team:carol", "team:dave", 1)
    reminders = app.store.conn.execute("SELECT n, at, via FROM reminders WHERE message_id = ?", (M2,)).fetchall()
    assert [tuple(r) for r in reminders] == [(1, T0 + 4000, "prompt-hook")]
    assert app.store.conn.execute("SELECT 1 FROM resolutions WHERE message_id = ?", (M2,)).fetchone() is None

    m3 = app.mailbox.stored(M3)
    assert m3["from_addr"] == "external" and m3["delivered_at"] is None and m3["open"] == 1
    with pytest.raises(Exception):
        app.mailbox.stored(M4)
    # the originals are kept as they were
    assert (isolated_env / "mailbox.jsonl").read_text().count("\n") == 15
    app.close()


def test_a_second_run_changes_nothing(isolated_env: Path) -> None:
    original_mailbox(isolated_env)
    app = App.create()
    first = import_legacy(app)
    before = dump(app.config.db_path)
    second = import_legacy(app)
    assert dump(app.config.db_path) == before
    assert only(second, "mailbox")["imported"] == 0
    assert only(second, "mailbox")["alreadyPresent"] == only(first, "mailbox")["imported"] == 4
    app.close()


def test_a_dry_run_counts_the_same_and_writes_nothing(isolated_env: Path) -> None:
    original_mailbox(isolated_env)
    app = App.create()
    before = dump(app.config.db_path)
    dry = import_legacy(app, dry_run=True)
    assert dump(app.config.db_path) == before
    assert dry["dryRun"] is True and only(dry, "mailbox")["imported"] == 4
    real = import_legacy(app)
    assert only(real, "mailbox") == only(dry, "mailbox")
    app.close()


def test_reminder_claim_files_add_reminders_the_events_lack(isolated_env: Path) -> None:
    write_lines(isolated_env / "mailbox.jsonl", [
        message(M1, "team:a", "team:b", "x", anticipation="action"), state("delivered", M1, T0 + 10, to="team:b")])
    claims = isolated_env / "mailbox.jsonl.claims"
    claims.mkdir()
    (claims / f"reminder-{M1}-2").write_text("")
    (claims / f"reminder-{M1}-x").write_text("")
    app = App.create()
    import_legacy(app)
    assert [r["n"] for r in app.store.conn.execute("SELECT n FROM reminders WHERE message_id = ?", (M1,))] == [2]
    app.close()


class Broken(LegacyImporter):
    """An importer that writes a message and then raises: its write must be undone."""

    name = "broken"
    order = 5

    def paths(self, ctx: LegacyContext) -> list[str]:
        return [os.path.join(ctx.source_dir, "broken.jsonl")]

    def run(self, ctx: LegacyContext, outcome: LegacyOutcome) -> None:
        ctx.conn.execute("INSERT INTO contacts (alias, address, created_at) VALUES ('ghost', 'team:ghost', 1)")
        raise RuntimeError("the broken importer gave up")


class BrokenPlugin:
    @hookimpl
    def agent_link_register_legacy_importers(self, register: Any) -> None:
        register(Broken())


def test_a_failing_importer_harms_only_itself(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "legacy listings")  # Broken writes a contact: listings owns the table
    original_mailbox(isolated_env)
    (isolated_env / "broken.jsonl").write_text("{}\n")
    app = App.create(extra_plugins=(("brokenplug", BrokenPlugin()),))
    report = import_legacy(app)
    assert report["failed"] == ["broken"]
    broken = only(report, "broken")
    assert broken["ok"] is False and "the broken importer gave up" in broken["error"] and "brokenplug" in broken["notes"][0]
    assert only(report, "mailbox")["imported"] == 4
    assert app.store.conn.execute("SELECT 1 FROM contacts WHERE alias = 'ghost'").fetchone() is None
    legacy = app.health()["sections"]["legacyState"]
    assert {f["importer"]: f["imported"] for f in legacy["files"]} == {"broken": False, "mailbox": True}
    app.close()


class Misnamed(LegacyImporter):
    name = "Not A Name"


class MisnamedPlugin:
    @hookimpl
    def agent_link_register_legacy_importers(self, register: Any) -> None:
        register(Misnamed())


def test_a_malformed_importer_is_refused_and_the_rest_import(isolated_env: Path) -> None:
    original_mailbox(isolated_env)
    app = App.create(extra_plugins=(("misnamed", MisnamedPlugin()),))
    report = import_legacy(app)
    assert [i["name"] for i in report["importers"]] == ["mailbox"] and report["failed"] == []
    problems = [p for p in app.hooks.boundary.report() if p["plugin"] == "misnamed"]
    assert problems and "Not A Name" in problems[0]["error"]
    app.close()


def test_health_says_which_legacy_files_exist_and_whether_imported(isolated_env: Path) -> None:
    app = App.create()
    assert app.health()["sections"]["legacyState"]["files"] == [] and "hint" not in app.health()["sections"]["legacyState"]
    path = original_mailbox(isolated_env)
    legacy = app.health()["sections"]["legacyState"]
    assert legacy["pending"] == 1 and legacy["files"][0]["path"] == str(path) and legacy["files"][0]["imported"] is False
    assert legacy["hint"].startswith("Run `agent-link import-legacy --dry-run`")  # the plugin is loaded: no install step
    import_legacy(app, dry_run=True)
    assert app.health()["sections"]["legacyState"]["files"][0]["imported"] is False
    import_legacy(app)
    done = app.health()["sections"]["legacyState"]
    assert done["pending"] == 0 and done["files"][0]["imported"] is True and done["files"][0]["importedAt"]
    with path.open("a") as fh:  # the original wrote more after the import
        fh.write(json.dumps(message(ulid(20), "team:a", "team:b", "later")) + "\n")
    changed = app.health()["sections"]["legacyState"]["files"][0]
    assert changed["imported"] is False and changed["changedSinceImport"] is True
    import_legacy(app)
    assert app.mailbox.stored(ulid(20))["body"] == "later"
    app.close()


@pytest.mark.parametrize("lines", [["{not json"], ["{not json", "", ["a", "list"]], [{"type": "message", "id": "bad"}]])
def test_a_file_with_nothing_readable_is_not_listed_as_imported(isolated_env: Path, lines: list[Any]) -> None:
    path = write_lines(isolated_env / "mailbox.jsonl", lines)
    app = App.create()
    try:
        report = import_legacy(app)
        assert only(report, "mailbox")["unreadable"] == len([x for x in lines if x != ""])
        legacy = app.health()["sections"]["legacyState"]
        assert legacy["files"][0]["path"] == str(path) and legacy["files"][0]["imported"] is False and legacy["pending"] == 1
        with path.open("a") as fh:  # one readable line: the file's content is imported now
            fh.write(json.dumps(message(ulid(30), "team:a", "team:b", "readable")) + "\n")
        import_legacy(app)
        assert app.health()["sections"]["legacyState"]["files"][0]["imported"] is True
    finally:
        app.close()


def test_cli_reports_counts_and_bad_lines_without_a_traceback(isolated_env: Path) -> None:
    original_mailbox(isolated_env)
    before = CliRunner().invoke(build_cli(), ["health"])
    assert "original's files: 1, 1 not imported (Run `agent-link import-legacy --dry-run`" in before.output
    dry = CliRunner().invoke(build_cli(), ["import-legacy", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "dry run: nothing written" in dry.output and "mailbox: would import 4, already present 0, unreadable 3" in dry.output
    assert f"{isolated_env / 'mailbox.jsonl'}:5: not JSON" in dry.output and "Traceback" not in dry.output
    real = CliRunner().invoke(build_cli(), ["import-legacy", "--json"])
    data = json.loads(real.output)
    assert real.exit_code == 0 and data["totals"] == {"imported": 4, "alreadyPresent": 0, "unreadable": 3}
    again = CliRunner().invoke(build_cli(), ["import-legacy"])
    assert "mailbox: imported 0, already present 4, unreadable 3" in again.output
    health = CliRunner().invoke(build_cli(), ["health"])
    assert "original's files: 1, 0 not imported" in health.output


def test_cli_imports_from_another_directory(isolated_env: Path, tmp_path: Path) -> None:
    old = tmp_path / "old-state"
    original_mailbox(old)
    result = CliRunner().invoke(build_cli(), ["import-legacy", "--from", str(old), "--json"])
    assert result.exit_code == 0 and json.loads(result.output)["sourceDir"] == str(old)
    app = App.create()
    assert app.mailbox.stored(M1)["body"] == "Please review <this>"
    app.close()


def test_cli_in_a_subprocess_with_an_unreadable_mailbox(isolated_env: Path) -> None:
    """A mailbox that cannot be read (a directory in its place, bytes that are not UTF-8)
    is reported, never a traceback."""
    isolated_env.mkdir(parents=True, exist_ok=True)
    (isolated_env / "mailbox.jsonl").write_bytes(b'\xff\xfe{"type":"message"}\n')
    proc = subprocess.run([sys.executable, "-m", "agent_link_core", "import-legacy"], capture_output=True, text=True,
                          timeout=120, env=os.environ.copy())
    assert proc.returncode == 0, proc.stderr
    assert "unreadable 1" in proc.stdout and "mailbox.jsonl:1: not JSON" in proc.stdout and "Traceback" not in proc.stderr


def test_a_lone_surrogate_in_the_original_is_stored_as_a_replacement_character(isolated_env: Path) -> None:
    line = json.dumps(message(M1, "team:a", "team:b", "half a pair: \ud800 here"))
    assert "\\ud800" in line
    write_lines(isolated_env / "mailbox.jsonl", [line, message(M2, "team:a", "team:b", "fine")])
    app = App.create()
    item = only(import_legacy(app), "mailbox")
    assert (item["imported"], item["unreadable"]) == (2, 0)
    assert app.mailbox.stored(M1)["body"] == "half a pair: \ufffd here"
    app.close()


def test_a_line_or_file_nested_too_deeply_is_one_bad_entry(isolated_env: Path) -> None:
    """JSON nested deeper than the parser goes (RecursionError, not ValueError) is counted
    bad like any other line that is not JSON; the rest imports."""
    deep = "[" * 100_000 + "]" * 100_000
    write_lines(isolated_env / "mailbox.jsonl", [message(M1, "team:a", "team:b", "fine"), deep, '{"a": ' * 50_000 + "1" + "}" * 50_000])
    app = App.create()
    try:
        item = only(import_legacy(app), "mailbox")
        assert (item["imported"], item["unreadable"]) == (1, 2)
        assert [b["line"] for b in item["badLines"]] == [2, 3] and all("nested too deeply" in b["error"] for b in item["badLines"])
        (isolated_env / "whole.json").write_text(deep)
        outcome = LegacyOutcome("test")
        assert LegacyContext(app, str(isolated_env), app.store.conn).read_json(str(isolated_env / "whole.json"), outcome) is None
        assert outcome.unreadable == 1 and "nested too deeply" in outcome.bad_lines[0]["error"]
    finally:
        app.close()


def test_health_never_counts_agent_links_own_files_as_the_originals(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh install whose only legacy-named file is one agent-link writes itself (roles.json):
    health says nothing of the original's files; with one of the original's, only it counts."""
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "legacy roles")  # roles writes roles.json
    isolated_env.mkdir(parents=True, exist_ok=True)
    (isolated_env / "roles.json").write_text('{"roles": {}}\n')
    app = App.create()
    try:
        files = app.health()["sections"]["legacyState"].get("files") or []
    finally:
        app.close()
    assert [f["path"] for f in files if f.get("writtenByAgentLink")] == [str(isolated_env / "roles.json")], files
    fresh = CliRunner().invoke(build_cli(), ["health"])
    assert "original's files" not in fresh.output, fresh.output
    original_mailbox(isolated_env)
    assert "original's files: 1, 1 not imported" in CliRunner().invoke(build_cli(), ["health"]).output
