"""What ``agent-link import-legacy`` holds an importer plugin to, and the edges of its input
(docs/legacy.md): an importer cannot end the run's transaction, any exception or a bad outcome
fails that importer alone, ``--from`` must name a directory, long bodies and lower-case ULIDs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent_link_core import hookimpl
from agent_link_core.app import App
from agent_link_core.cli import build_cli
from agent_link_core.envelope import MAX_BODY_BYTES
from agent_link_legacy.contract import LegacyContext, LegacyImporter, LegacyOutcome
from agent_link_legacy.engine import import_legacy
from agent_link_testing.cli_plugins import add_cli_plugins
from agent_link_testing.legacy_files import T0, message, state, write_lines

M1, M2 = "01HF0000000000000000000001", "01HF0000000000000000000002"


@pytest.fixture(autouse=True)
def with_contacts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The importers below write a contact: the listings plugin owns that table."""
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "legacy listings")


def mailbox(state_dir: Path) -> Path:
    return write_lines(state_dir / "mailbox.jsonl", [
        message(M1, "team:alice", "team:bob", "one"), message(M2, "team:alice", "team:bob", "two", at=T0 + 1)])


def only(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(i for i in report["importers"] if i["name"] == name)


def plugin_of(importer: LegacyImporter) -> Any:
    class Plugin:
        @hookimpl
        def agent_link_register_legacy_importers(self, register: Any) -> None:
            register(importer)

    return Plugin()


def db_rows(app: App) -> dict[str, list[tuple[Any, ...]]]:
    conn = app.store.conn
    return {t: sorted(map(tuple, conn.execute(f"SELECT * FROM {t}")), key=repr)
            for t in ("messages", "contacts", "legacy_imports")}


class Ender(LegacyImporter):
    """Writes a row, then tries to end the transaction with ``statement`` and swallows the
    refusal, as a careless importer catching sqlite3 errors would."""

    name = "ender"
    order = 70  # after the mailbox: its work must survive the ender's failure

    def __init__(self, statement: str) -> None:
        self.statement = statement

    def run(self, ctx: LegacyContext, outcome: LegacyOutcome) -> None:
        ctx.conn.execute("INSERT INTO contacts (alias, address, created_at) VALUES ('ghost', 'team:ghost', 1)")
        try:
            if self.statement == "commit()":
                ctx.conn.commit()
            elif self.statement == "rollback()":
                ctx.conn.rollback()
            else:
                ctx.conn.execute(self.statement)
        except Exception:  # noqa: BLE001 - the point: even a swallowed refusal fails the importer
            pass
        ctx.conn.execute("UPDATE messages SET body = 'overwritten'")
        outcome.imported += 1


ENDINGS = ["commit()", "rollback()", "COMMIT", "ROLLBACK", "BEGIN", "END", "SAVEPOINT mine", "RELEASE agent_link_1",
           "ROLLBACK TO agent_link_1"]


@pytest.mark.parametrize("statement", ENDINGS)
def test_an_importer_cannot_end_the_runs_transaction(isolated_env: Path, statement: str) -> None:
    mailbox(isolated_env)
    app = App.create(extra_plugins=(("enderplug", plugin_of(Ender(statement))),))
    before = db_rows(app)
    dry = import_legacy(app, dry_run=True)
    assert db_rows(app) == before  # a dry run writes nothing, whatever the importer did
    assert dry["failed"] == ["ender"] and "end the import's transaction" in only(dry, "ender")["error"]
    assert only(dry, "mailbox")["imported"] == 2
    real = import_legacy(app)
    assert real["failed"] == ["ender"] and only(real, "ender")["imported"] == 0
    assert only(real, "mailbox") == only(dry, "mailbox")
    assert app.store.conn.execute("SELECT 1 FROM contacts WHERE alias = 'ghost'").fetchone() is None
    assert app.mailbox.stored(M1)["body"] == "one" and app.mailbox.stored(M2)["body"] == "two"
    app.close()


def test_a_dry_run_through_the_cli_says_the_truth_about_an_ender(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mailbox(isolated_env)
    app = App.create(extra_plugins=(("enderplug", plugin_of(Ender("commit()"))),))
    before = db_rows(app)
    app.close()
    real_create = App.create
    add_cli_plugins(monkeypatch, ("enderplug", plugin_of(Ender("commit()"))))
    result = CliRunner().invoke(build_cli(), ["import-legacy", "--dry-run"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "ender: FAILED, nothing imported: it tried to end the import's transaction (COMMIT)" in result.output
    again = real_create()
    assert db_rows(again) == before
    again.close()


class Leaver(LegacyImporter):
    """Raises a BaseException, or leaves an outcome that is not counts."""

    name = "leaver"

    def __init__(self, how: str) -> None:
        self.how = how

    def run(self, ctx: LegacyContext, outcome: LegacyOutcome) -> None:
        ctx.conn.execute("INSERT INTO contacts (alias, address, created_at) VALUES ('ghost', 'team:ghost', 1)")
        if self.how == "exit":
            raise SystemExit(3)
        if self.how == "generator":
            raise GeneratorExit
        if self.how == "text":
            outcome.imported = "lots"  # type: ignore[assignment]
        elif self.how == "negative":
            outcome.present = -1
        elif self.how == "details":
            outcome.details["x"] = 1.5  # type: ignore[assignment]
        elif self.how == "files":
            outcome.files = "mailbox.jsonl"  # type: ignore[assignment]


@pytest.mark.parametrize("how", ["exit", "generator", "text", "negative", "details", "files"])
def test_any_exception_or_a_bad_outcome_fails_that_importer_alone(isolated_env: Path, how: str) -> None:
    mailbox(isolated_env)
    app = App.create(extra_plugins=(("leaverplug", plugin_of(Leaver(how))),))
    report = import_legacy(app)
    assert report["failed"] == ["leaver"] and only(report, "mailbox")["imported"] == 2
    item = only(report, "leaver")
    assert item["ok"] is False and item["imported"] == 0 and item["error"]
    assert ("SystemExit" in item["error"]) if how == "exit" else True
    assert ("outcome that is not counts" in item["error"]) if how not in ("exit", "generator") else True
    assert app.store.conn.execute("SELECT 1 FROM contacts WHERE alias = 'ghost'").fetchone() is None
    json.dumps(report)  # the report is plain JSON whatever the importer left
    app.close()


def test_cli_reports_a_bad_outcome_without_a_traceback(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mailbox(isolated_env)
    add_cli_plugins(monkeypatch, ("leaverplug", plugin_of(Leaver("text"))))
    for args in (["import-legacy"], ["import-legacy", "--json"]):
        result = CliRunner().invoke(build_cli(), args)
        assert result.exit_code == 1 and result.exception is None or isinstance(result.exception, SystemExit), result.output
        assert "Traceback" not in result.output
    assert "leaver: FAILED, nothing imported: it left an outcome that is not counts: imported = 'lots'" in CliRunner().invoke(
        build_cli(), ["import-legacy"]).output


@pytest.mark.parametrize("given", ["/nonexistent/agent-link-state", "", "  ", "FILE"])
def test_from_must_name_a_directory(isolated_env: Path, tmp_path: Path, given: str) -> None:
    mailbox(isolated_env)  # would be imported if --from fell back to the state dir
    if given == "FILE":
        given = str(write_lines(tmp_path / "a-file", ["{}"]))
    result = CliRunner().invoke(build_cli(), ["import-legacy", "--from", given])
    assert result.exit_code != 0 and "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines and "--from" in lines[0] and not any("imported" in line for line in lines), result.output
    app = App.create()
    assert app.store.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0
    app.close()


def test_a_body_over_the_read_limit_is_imported_and_named(isolated_env: Path) -> None:
    big = "x" * (MAX_BODY_BYTES + 1)
    path = write_lines(isolated_env / "mailbox.jsonl", [
        message(M1, "team:a", "team:b", "small"), message(M2, "team:a", "team:b", big),
        message("01HF0000000000000000000003", "team:a", "team:b", "y" * MAX_BODY_BYTES)])
    app = App.create()
    item = only(import_legacy(app), "mailbox")
    assert item["imported"] == 3 and item["details"]["bodiesCutOnReading"] == 1
    assert item["flagged"] == [{"file": str(path), "line": 2, "note": item["flagged"][0]["note"]}]
    assert f"{MAX_BODY_BYTES + 1} bytes is cut to {MAX_BODY_BYTES} bytes on reading" in item["flagged"][0]["note"]
    assert app.mailbox.stored(M2)["body"] == big
    app.close()
    out = CliRunner().invoke(build_cli(), ["import-legacy", "--dry-run"]).output
    assert "already present 3" in out  # flagged only when it is imported


def test_the_cli_names_long_bodies_and_says_how_many_bad_lines_it_left_out(isolated_env: Path) -> None:
    write_lines(isolated_env / "mailbox.jsonl", [message(M2, "team:a", "team:b", "x" * (MAX_BODY_BYTES + 10)),
                                                 *["garbage"] * 7])
    out = CliRunner().invoke(build_cli(), ["import-legacy"]).output
    assert "mailbox: imported 1, already present 0, unreadable 7 (bodiesCutOnReading 1)" in out
    assert f"mailbox.jsonl:1: message {M2}: imported, but its body" in out
    assert "... and 2 more unreadable (only the first 5 are named)" in out


def test_lower_case_ulids_are_accepted_and_stored_upper_case(isolated_env: Path) -> None:
    lower, reply = M1.lower(), M2.lower()
    write_lines(isolated_env / "mailbox.jsonl", [
        message(lower, "team:a", "team:b", "lower-case id"),
        state("delivered", lower, T0 + 5, to="team:b"),
        message(reply, "team:b", "team:a", "the reply", at=T0 + 6, anticipation="fyi", reply_to=lower),
        state("resolved", lower, T0 + 6, kind="reply", by="team:b", replyMessageId=reply),
        message(M1, "team:a", "team:b", "upper-case copy of the same id"),
    ])
    claims = isolated_env / "mailbox.jsonl.claims"
    claims.mkdir()
    (claims / f"reminder-{lower}-1").write_text("")
    app = App.create()
    item = only(import_legacy(app), "mailbox")
    assert (item["imported"], item["unreadable"], item["details"].get("duplicateLines")) == (2, 0, 1)
    stored = app.mailbox.stored(M1)
    assert stored["body"] == "lower-case id" and stored["delivered_at"] == T0 + 5
    assert app.mailbox.stored(M2)["reply_to"] == M1
    assert app.store.conn.execute("SELECT reply_message_id FROM resolutions WHERE message_id = ?", (M1,)).fetchone()[0] == M2
    assert [r[0] for r in app.store.conn.execute("SELECT n FROM reminders WHERE message_id = ?", (M1,))] == [1]
    app.close()


def test_a_message_in_two_mailboxes_adds_up(isolated_env: Path, tmp_path: Path) -> None:
    """An id in an older mailbox and the current one: the current one counts it already
    present, the first run as the second, and the human line shows every detail count."""

    class Older(LegacyImporter):
        name = "older"
        order = 5

        def run(self, ctx: LegacyContext, outcome: LegacyOutcome) -> None:
            from agent_link_legacy.engine import MailboxImporter

            MailboxImporter("older", lambda _ctx: [str(tmp_path / "older.jsonl")]).run(ctx, outcome)

    write_lines(tmp_path / "older.jsonl", [message(M1, "team:a", "team:b", "first copy")])
    write_lines(isolated_env / "mailbox.jsonl", [message(M1, "team:a", "team:b", "second copy"),
                                                 message(M2, "team:a", "team:b", "new")])
    app = App.create(extra_plugins=(("olderplug", plugin_of(Older())),))
    first = [(only(r, "mailbox")["imported"], only(r, "mailbox")["alreadyPresent"]) for r in (import_legacy(app), import_legacy(app))]
    assert first == [(1, 1), (0, 2)]
    assert app.mailbox.stored(M1)["body"] == "first copy"
    app.close()


class GuardBreaker(LegacyImporter):
    """Takes the guard off and commits: the run cannot go on, and says so."""

    name = "breaker"

    def run(self, ctx: LegacyContext, outcome: LegacyOutcome) -> None:
        ctx.conn.set_authorizer(None)
        ctx.conn.execute("INSERT INTO contacts (alias, address, created_at) VALUES ('ghost', 'team:ghost', 1)")
        ctx.conn.commit()


def test_an_importer_that_takes_the_guard_off_stops_the_run_with_a_clear_error(
        isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mailbox(isolated_env)
    add_cli_plugins(monkeypatch, ("breakerplug", plugin_of(GuardBreaker())))
    result = CliRunner().invoke(build_cli(), ["import-legacy", "--dry-run"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "the breaker legacy importer (breakerplug plugin) ended the import's transaction" in result.output


def test_the_database_named_by_the_mailbox_path_is_never_read_as_a_mailbox(
        isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The original's AGENT_LINK_MAILBOX_PATH named its JSONL mailbox; here it names the
    database, which can then sit where the original's mailbox was."""
    monkeypatch.setenv("AGENT_LINK_MAILBOX_PATH", str(isolated_env / "mailbox.jsonl"))
    app = App.create()
    legacy = app.health()["sections"]["legacyState"]
    assert [f.get("writtenByAgentLink") for f in legacy["files"]] == [True] and legacy["pending"] == 0
    item = only(import_legacy(app), "mailbox")
    assert (item["imported"], item["unreadable"], item["files"]) == (0, 0, [])
    assert "agent-link's own database" in item["notes"][0]
    app.close()


def test_the_report_shows_the_files_text_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    from agent_link_legacy.cli import _human

    _human({"dryRun": True, "sourceDir": "/old\u202edir", "failed": ["roles"], "importers": [
        {"name": "roles", "ok": False, "error": "ValueError: bad role 'x\x1b[2J\a'"},
        {"name": "mailbox", "ok": True, "files": 1, "unreadable": 1, "imported": 0, "alreadyPresent": 0,
         "badLines": [{"file": "/old/in\u202ebox.jsonl", "line": 3, "error": "not JSON: {\"to\": \"\a\nforged\""}],
         "notes": ["kept \u202eas is"]}]})
    out = capsys.readouterr().out.splitlines()
    assert all(line.isprintable() for line in out), out
    assert out[0] == "original's files in /old\\u{202E}dir (dry run: nothing written)"
    assert out[1] == "  roles: FAILED, nothing imported: ValueError: bad role 'x\\u{001B}[2J\\u{0007}'"
    assert out[3] == "    /old/in\\u{202E}box.jsonl:3: not JSON: {\"to\": \"\\u{0007}\\u{000A}forged\""
    assert out[4] == "    kept \\u{202E}as is"
