"""``agent_link_record_event``: records written in the transaction of the change they
record, so a crash can never leave a change without its record (issue: a message stored
without its receipt forever)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agent_link_core import hookimpl
from agent_link_core.app import App
from agent_link_core.records import Event
from agent_link_core.model import Caller
from agent_link_core.store import Migration

ALICE = Caller("test:alice", "config", "test")


class Audit:
    """A plugin keeping one audit row per event, in the change's transaction."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.fail_on = fail_on
        self.after_commit: list[tuple[str, bool]] = []

    @hookimpl
    def agent_link_schema(self) -> list[Migration]:
        return [Migration("audit", 1, "CREATE TABLE audit (kind TEXT NOT NULL, message_id TEXT)")]

    @hookimpl
    def agent_link_record_event(self, event: Event, conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO audit VALUES (?, ?)", (event.kind, event.message_id))
        # The uncommitted change is visible through the same connection.
        assert conn.execute("SELECT 1 FROM messages WHERE id = ?", (event.message_id,)).fetchone()
        if event.kind == self.fail_on:
            raise RuntimeError("observer bug")
        event.notes["audit"] = True

    @hookimpl
    def agent_link_on_event(self, event: Event) -> None:
        self.after_commit.append((event.kind, bool(event.notes.get("audit"))))


@pytest.fixture
def make(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "codex claude receipts roles")
    apps: list[App] = []

    def build(plugin: Audit) -> App:
        apps.append(App.create(extra_plugins=(("audit", plugin),)))
        return apps[-1]

    yield build
    for app in apps:
        app.store.close()


@pytest.mark.anyio
async def test_records_commit_with_the_change(make: Any) -> None:
    plugin = Audit()
    app = make(plugin)
    sent = await app.send(caller=ALICE, to="test:bob", body="hello", anticipation="reply")
    app.inbox(Caller("test:bob", "config", "test"))
    rows = app.store.conn.execute("SELECT kind FROM audit ORDER BY rowid").fetchall()
    assert [r[0] for r in rows] == ["sent", "delivered"]
    assert plugin.after_commit == [("sent", True), ("delivered", True)]
    assert sent.message["id"]


@pytest.mark.anyio
async def test_a_failing_observer_never_undoes_the_change(make: Any) -> None:
    app = make(Audit(fail_on="sent"))
    sent = await app.send(caller=ALICE, to="test:bob", body="still stored")
    assert app.mailbox.get_row(sent.message["id"]) is not None
    assert app.store.conn.execute("SELECT COUNT(*) FROM audit").fetchone()[0] == 0  # its own writes undone


@pytest.mark.installed_plugins  # the receipts plugin as installed
def test_a_crash_after_the_commit_keeps_the_receipt(isolated_env: Path) -> None:
    pytest.importorskip("agent_link_receipts")
    # The process dies right after the send committed (before any after-commit observer ran):
    # the receipt, written in the send's transaction, is there.
    script = textwrap.dedent("""
        import asyncio, os
        from agent_link_core import hookimpl
        from agent_link_core.app import App
        from agent_link_core.model import Caller

        class Crash:
            @hookimpl(trylast=True)  # first in the core's observer loop, before any other plugin
            def agent_link_on_event(self, event):
                os._exit(9)

        app = App.create(extra_plugins=(("crash", Crash()),))
        asyncio.run(app.send(caller=Caller("test:alice", "config", "test"), to="test:bob", body="crash after this"))
    """)
    env = {"AGENT_LINK_DISABLE_PLUGINS": "codex claude roles"}
    done = subprocess.run([sys.executable, "-c", script], env={**os.environ, **env}, timeout=120)
    assert done.returncode == 9
    conn = sqlite3.connect(isolated_env / "agent-link.db")
    message = conn.execute("SELECT id FROM messages").fetchone()[0]
    receipts = conn.execute("SELECT action FROM receipts WHERE message_id = ?", (message,)).fetchall()
    conn.close()
    assert receipts == [("message_agent",)]


class Quiet:
    """An observer that writes nothing (most observers, for most events)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    @hookimpl
    def agent_link_record_event(self, event: Event) -> None:
        self.seen.append(event.kind)


class Later:
    """An observer writing to the audit table (pluggy calls it before the ones registered
    before it: ahead of ``failing``)."""

    @hookimpl
    def agent_link_record_event(self, event: Event, conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO audit VALUES (?, ?)", ("later", event.message_id))


class Failing:
    """An observer that writes a row, then fails."""

    @hookimpl
    def agent_link_record_event(self, event: Event, conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO audit VALUES (?, ?)", ("failing", event.message_id))
        raise RuntimeError("observer bug")


@pytest.mark.anyio
async def test_observers_that_write_nothing_share_one_savepoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "codex claude receipts roles")
    quiet = [Quiet() for _ in range(3)]
    app = App.create(extra_plugins=tuple((f"quiet{n}", q) for n, q in enumerate(quiet)))
    seen: list[str] = []
    app.store.conn.set_trace_callback(lambda sql: None if sql.startswith("--") else seen.append(sql))
    try:
        await app.send(caller=ALICE, to="test:bob", body="hello")
    finally:
        app.store.conn.set_trace_callback(None)
        app.store.close()
    assert all(q.seen == ["sent"] for q in quiet)
    assert len([s for s in seen if s.startswith("SAVEPOINT")]) == 1, seen


@pytest.mark.anyio
async def test_a_failing_observer_after_a_writing_one_undoes_only_its_own_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """The restore point a failing observer is undone to is taken after the rows of the
    observers before it, whatever they wrote; observers after it still write theirs."""
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "codex claude receipts roles")
    app = App.create(extra_plugins=(("audit", Audit()), ("failing", Failing()), ("quiet", Quiet()), ("later", Later())))
    try:
        sent = await app.send(caller=ALICE, to="test:bob", body="hello")
        rows = app.store.conn.execute("SELECT kind FROM audit ORDER BY rowid").fetchall()
        problems = app.hooks.boundary.report()
    finally:
        app.store.close()
    assert sent.message["id"]
    assert sorted(r[0] for r in rows) == ["later", "sent"]  # the failing one's row undone, the others' kept
    assert [(p["plugin"], p["hook"]) for p in problems] == [("failing", "agent_link_record_event")]


@pytest.mark.anyio
async def test_an_event_recorded_outside_a_transaction_gets_one_for_its_observers(make: Any) -> None:
    app = make(Audit())
    sent = await app.send(caller=ALICE, to="test:bob", body="hello")
    assert not app.store.conn.in_transaction
    app.hooks.record_event(Event("noted", sent.message["id"], 0, None, {}))
    assert not app.store.conn.in_transaction  # committed
    rows = app.store.conn.execute("SELECT kind FROM audit ORDER BY rowid").fetchall()
    assert [r[0] for r in rows] == ["sent", "noted"]


class Releasing:
    """An observer that ends the savepoint it was given (``store.write()`` names it
    ``agent_link_1`` in a send's transaction), then fails."""

    @hookimpl
    def agent_link_record_event(self, conn: sqlite3.Connection) -> None:
        conn.execute("RELEASE agent_link_1")
        raise RuntimeError("observer bug")


@pytest.mark.anyio
async def test_an_observer_that_ends_its_savepoint_and_fails_is_reported_and_the_change_stands(make: Any) -> None:
    app = make(Releasing())
    sent = await app.send(caller=ALICE, to="test:bob", body="still stored")
    assert app.mailbox.get_row(sent.message["id"]) is not None
    errors = [p["error"] for p in app.hooks.boundary.report() if p["hook"] == "agent_link_record_event"]
    assert any("could not be undone" in e for e in errors), errors
