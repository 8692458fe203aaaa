"""Nothing acknowledged is lost: a database deleted, moved, replaced, damaged, full, busy or
foreign is refused with its own error, never silently written to (issue reproductions)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent_link_core.app import App
from agent_link_core.cli import build_cli
from agent_link_core.errors import AgentLinkError
from agent_link_core.model import Caller
from agent_link_core.store import Store, recovery_step
from agent_link_testing.locks import hold_write_lock
from agent_link_testing import tool_app
from agent_link_testing.mcp_client import agent_link_mcp
from agent_link_testing.plugin_suites import call_tool

ALICE = Caller("test:alice", "config", "test")
BOB = Caller("test:bob", "config", "test")


@pytest.fixture
def app(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "codex claude")
    apps: list[App] = []

    def make() -> App:
        apps.append(App.create())
        return apps[-1]

    yield make
    for a in apps:
        a.store.close()


async def send(app: App, text: str) -> dict[str, Any]:
    try:
        return await call_tool(app, "message_agent", {"to": "test:bob", "message": text}, ALICE)
    except sqlite3.DatabaseError as exc:  # what the MCP layer (tools.registry.run_tool) does with it
        return {"ok": False, "error": app.store.failure(exc).to_dict()}


def count(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0])
    finally:
        conn.close()


def no_move_advice(error: dict[str, Any]) -> None:
    text = f"{error.get('message')} {error.get('hint')}".lower()
    assert "aside" not in text and "start afresh" not in text


@pytest.mark.anyio
async def test_deleted_database_refuses_and_rescues(app: Any, isolated_env: Path) -> None:
    a = app()
    db = Path(a.store.path)
    for n in range(10):
        assert (await send(a, f"before {n}"))["ok"]
    db.unlink()
    refused = await send(a, "after the delete")
    assert refused["ok"] is False and refused["error"]["details"]["reason"] == "replaced"
    no_move_advice(refused["error"])
    rescued = Path(refused["error"]["details"]["rescuedTo"])
    assert count(rescued) == 10 and stat.S_IMODE(rescued.stat().st_mode) == 0o600  # all ten acknowledged sends kept
    health = a.health()
    assert health["database"]["ok"] is False and health["database"]["problem"]["details"]["reason"] == "replaced"
    # A new process must not start a fresh database beside the WAL the old file still uses.
    with pytest.raises(AgentLinkError) as orphan:
        App.create()
    assert orphan.value.details["reason"] == "orphan_wal"



def test_a_database_another_process_made_meanwhile_is_not_taken_for_an_orphan_wal(isolated_env: Path) -> None:
    """Processes starting together on a new state dir: one saw no database and went to make one
    while another made it and opened it (its WAL files appeared). The first must use that one,
    not refuse it as the WAL of a deleted database (several sessions opened at once did)."""
    from agent_link_core.store import Store

    first = Store(isolated_env / "agent-link.db")  # the other process: made it, holds it open
    try:
        first.conn.execute("INSERT INTO schema_migrations (owner, version, applied_at) VALUES ('race', 1, 0)")
        late = Store.__new__(Store)  # this one found no database a moment before
        late.path = first.path
        late._create()
        again = Store(first.path)
        assert again.conn.execute("SELECT COUNT(*) FROM schema_migrations WHERE owner = 'race'").fetchone()[0] == 1
        again.close()
    finally:
        first.close()

@pytest.mark.anyio
@pytest.mark.parametrize("how", ["deleted", "replaced"])
async def test_a_process_exiting_after_the_file_went_keeps_what_it_acknowledged(app: Any, isolated_env: Path, how: str) -> None:
    a = app()
    db = Path(a.store.path)
    for n in range(10):
        assert (await send(a, f"before {n}"))["ok"]
    if how == "deleted":
        db.unlink()
    else:
        other = Store(isolated_env / "other.db")
        other.close()
        os.replace(isolated_env / "other.db", db)
    await a.aclose()  # the server exits without another write: its last close would drop the WAL's mail
    rescued = list(isolated_env.glob("agent-link.db.rescued-*"))
    assert len(rescued) == 1 and count(rescued[0]) == 10
    assert stat.S_IMODE(rescued[0].stat().st_mode) == 0o600


@pytest.mark.anyio
async def test_moved_database_refuses_until_it_is_back(app: Any, isolated_env: Path) -> None:
    a = app()
    db = Path(a.store.path)
    for n in range(15):
        assert (await send(a, f"before {n}"))["ok"]
    aside = db.with_name("moved.db")
    db.rename(aside)
    refused = await send(a, "while moved")
    assert refused["ok"] is False and refused["error"]["details"]["reason"] == "replaced"
    cli = CliRunner().invoke(build_cli(), ["health"])
    assert cli.exit_code == 1  # no fresh database is made while the WAL of the open one is there
    aside.rename(db)
    assert (await send(a, "back again"))["ok"]
    assert a.health()["database"]["ok"] is True
    a.store.close()
    assert count(db) == 16


@pytest.mark.anyio
async def test_replaced_database_is_refused(app: Any, isolated_env: Path) -> None:
    a = app()
    db = Path(a.store.path)
    assert (await send(a, "first"))["ok"]
    other = Store(isolated_env / "other.db")
    other.close()
    os.replace(isolated_env / "other.db", db)
    refused = await send(a, "second")
    assert refused["error"]["details"]["reason"] == "replaced" and "restart" in refused["error"]["hint"]


def corrupt(db: Path) -> None:
    """Overwrite the pages of the messages table's secondary indexes with garbage (the file is closed)."""
    conn = sqlite3.connect(db)
    pages = [r[0] for r in conn.execute(
        "SELECT rootpage FROM sqlite_master WHERE type = 'index' AND tbl_name = 'messages'"
        " AND name NOT LIKE 'sqlite_autoindex%'")]
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    with open(db, "r+b") as f:
        for page in pages:
            f.seek((page - 1) * page_size)
            f.write(b"\xff" * page_size)


@pytest.mark.anyio
async def test_corruption_stops_writes_and_health_fails(app: Any, isolated_env: Path) -> None:
    a = app()
    sent = [await send(a, f"message {n}") for n in range(5)]
    db = Path(a.store.path)
    a.store.close()
    corrupt(db)
    b = app()
    health = b.health()
    assert health["database"]["ok"] is False and health["database"]["integrity"] != "ok"
    problem = health["database"]["problem"]
    assert problem["details"]["reason"] == "corrupt" and ".recover" in problem["hint"]
    no_move_advice(problem)
    refused = await send(b, "into a damaged file")
    assert refused["ok"] is False and refused["error"]["details"]["reason"] == "corrupt"
    # What can be read still is: a message by its id (the table itself is intact).
    status = await call_tool(b, "get_agent_link_message_status", {"messageId": sent[0]["messageId"]}, ALICE)
    assert status["ok"] and status["delivery"] == "queued"
    # Another process finds the damage recorded and refuses too; the CLI health exits 1.
    c = app()
    assert (await send(c, "from another process"))["error"]["details"]["reason"] == "corrupt"
    result = CliRunner().invoke(build_cli(), ["health"])
    assert result.exit_code == 1 and ".recover" in result.output
    # Inbox reads go on without marking anything delivered.
    inbox = b.inbox(BOB)
    assert inbox["markedDelivered"] == [] and inbox["warnings"][0]["details"]["reason"] == "corrupt"


SQLITE3 = shutil.which("sqlite3")


@pytest.mark.skipif(SQLITE3 is None, reason="no sqlite3 shell on PATH: the printed recovery step runs it")
@pytest.mark.anyio
async def test_the_printed_recovery_step_rebuilds_a_damaged_database(app: Any, isolated_env: Path) -> None:
    # Debian's sqlite3 3.40 has no sqlite_dbpage: its .recover fails and the step falls back to .dump
    a = app()
    sent = [await send(a, f"message {n}") for n in range(3)]
    db = Path(a.store.path)
    a.store.close()
    corrupt(db)
    problem = app().health()["database"]["problem"]
    assert recovery_step(str(db)) in problem["hint"]
    Path(f"{db}-wal").write_bytes(b"left by a process that crashed")  # goes with the damaged file, never replayed into the new one
    subprocess.run(["sh", "-c", recovery_step(str(db))], check=True, capture_output=True, timeout=60)
    assert Path(f"{db}.damaged-copy").stat().st_size > 0 and not Path(f"{db}.recovered").exists()
    assert Path(f"{db}.damaged-copy-wal").read_bytes() == b"left by a process that crashed" and not Path(f"{db}-wal").exists()
    first_copy, rebuilt = Path(f"{db}.damaged-copy").read_bytes(), db.read_bytes()
    again = subprocess.run(["sh", "-c", recovery_step(str(db))], capture_output=True, text=True, timeout=60)
    assert again.returncode != 0 and "move the earlier" in again.stderr  # a second run keeps the first copy, and the database
    assert Path(f"{db}.damaged-copy").read_bytes() == first_copy and db.read_bytes() == rebuilt
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    b = app()
    assert b.health()["database"]["ok"] is True
    assert [m["id"] for m in b.inbox(BOB)["messages"]] == [m["messageId"] for m in sent]
    assert (await send(b, "after the rebuild"))["ok"]


@pytest.mark.skipif(SQLITE3 is None, reason="no sqlite3 shell on PATH: the printed recovery step runs it")
def test_the_recovery_step_never_installs_a_failed_rebuild(app: Any, isolated_env: Path, tmp_path: Path) -> None:
    # a shell whose .recover and .dump both fail and print nothing: the rebuilt file is empty and must stay unused
    a = app()
    db = Path(a.store.path)
    a.store.close()
    before = db.read_bytes()
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "sqlite3").write_text(f'#!/bin/sh\ncase "$*" in *.recover*|*.dump*) echo "sql error: SQL logic error (1)" >&2; exit 1;; esac\n'
                                  f'exec {SQLITE3} "$@"\n')
    (shim / "sqlite3").chmod(0o755)
    env = {**os.environ, "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(["sh", "-c", recovery_step(str(db))], env=env, capture_output=True, timeout=60)
    assert db.read_bytes() == before and not Path(f"{db}.damaged-copy").exists()


@pytest.mark.anyio
async def test_an_mcp_server_on_a_damaged_database_still_serves_reads(app: Any, isolated_env: Path) -> None:
    a = app()
    sent = await send(a, "before the damage")
    db = Path(a.store.path)
    a.store.close()
    corrupt(db)
    assert app().health()["database"]["ok"] is False  # the damage is found and recorded
    env = {"AGENT_LINK_DISABLE_PLUGINS": "codex claude"}
    async with agent_link_mcp({**env, "AGENT_LINK_ADDRESS": "test:alice"}) as alice:  # it starts and answers
        health = await alice.call("agent_link_health")
        assert health["database"]["ok"] is False and health["database"]["problem"]["details"]["reason"] == "corrupt"
        status = await alice.call("get_agent_link_message_status", {"messageId": sent["messageId"]})
        assert status["ok"] and status["delivery"] == "queued"
        refused = await alice.call("message_agent", {"to": "test:bob", "message": "into a damaged file"})
        assert refused["ok"] is False and refused["error"]["details"]["reason"] == "corrupt"


@pytest.mark.anyio
async def test_full_disk_is_its_own_error_and_loses_nothing(app: Any) -> None:
    a = app()
    assert (await send(a, "fits"))["ok"]
    pages = a.store.conn.execute("PRAGMA page_count").fetchone()[0]
    a.store.conn.execute(f"PRAGMA max_page_count = {pages}")  # the file may not grow: SQLITE_FULL
    big = "x" * 60_000
    outcome = None
    for _ in range(20):
        outcome = await send(a, big)
        if not outcome["ok"]:
            break
    assert outcome is not None and outcome["ok"] is False
    assert outcome["error"]["details"]["reason"] == "disk_full" and "full" in outcome["error"]["message"]
    no_move_advice(outcome["error"])
    assert a.health()["database"]["ok"] is True  # full is not damage
    a.store.conn.execute("PRAGMA max_page_count = 1073741823")
    assert (await send(a, "after space was freed"))["ok"]
    inbox = a.inbox(BOB, limit=50, mark=False)
    assert inbox["messages"][0]["bodyBytes"] == len("fits")


@pytest.mark.anyio
async def test_busy_database_is_busy_not_damaged(app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_BUSY_TIMEOUT_MS", "300")
    a = app()
    first = await send(a, "before the lock")
    with hold_write_lock(a.store.path):  # another process holds the write lock
        peek = a.inbox(BOB, mark=False)  # pure reads never wait on the writer
        assert [m["id"] for m in peek["messages"]] == [first["messageId"]]
        status = await call_tool(a, "get_agent_link_message_status", {"messageId": first["messageId"]}, ALICE)
        assert status["ok"]
        assert len(a.mailbox.addressed_to(BOB.address, 20)) == 1  # the mailbox listing (inbox --all)
        busy = await send(a, "while locked")
        assert busy["ok"] is False and busy["error"]["code"] == "state_busy" and "300 ms" in busy["error"]["message"]
        assert busy["error"]["details"]["retryable"] is True and "retry" in busy["error"]["hint"].lower()
        no_move_advice(busy["error"])
        assert a.health()["database"]["ok"] is True
    assert (await send(a, "after the lock"))["ok"]


@pytest.mark.anyio
async def test_reads_that_would_note_something_never_wait_on_a_writer(app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_BUSY_TIMEOUT_MS", "600000")  # a read that waited would outlast the holder
    a = app()
    asked = await a.send(caller=ALICE, to="test:bob", body="answer me", anticipation="reply")
    message_id = asked.message["id"]
    a.inbox(BOB)
    a.store.conn.execute("UPDATE messages SET reply_by = 1 WHERE id = ?", (message_id,))  # its replyBy has passed
    with hold_write_lock(a.store.path) as held:  # another process holds the write lock
        # Each read below would record the expiry (status_changed) or repair receipts on the way.
        status = await call_tool(a, "get_agent_link_message_status", {"messageId": message_id}, ALICE)
        assert status["ok"] and status["status"] == "expired"
        peek = a.inbox(BOB, mark=False, include_open=True)
        assert [m["id"] for m in peek["messages"]] == [message_id]
        assert [m["id"] for m in a.mailbox.addressed_to(BOB.address, 20)] == [message_id]
        assert not held.waited, "a read waited for the writer's lock"
    # The first read of a writable database records what the busy one could not.
    assert (await call_tool(a, "get_agent_link_message_status", {"messageId": message_id}, ALICE))["status"] == "expired"
    recorded = a.store.conn.execute("SELECT status FROM status_transitions WHERE message_id = ?", (message_id,)).fetchall()
    assert [r[0] for r in recorded] == ["expired"]


def test_wal_stays_bounded_under_a_writer_that_never_pauses(isolated_env: Path) -> None:
    limit = 64 * 1024
    store = Store(isolated_env / "agent-link.db", wal_limit_bytes=limit)
    store.conn.execute("CREATE TABLE IF NOT EXISTS filler (x BLOB)")
    stop = threading.Event()

    def readers() -> None:
        # Two connections whose read transactions always overlap: one is open at every moment.
        conns = [sqlite3.connect(store.path, isolation_level=None, check_same_thread=False) for _ in range(2)]
        conns[0].execute("BEGIN")
        conns[0].execute("SELECT COUNT(*) FROM filler").fetchone()
        turn = 1
        # each snapshot held about a millisecond: still always one open, and the loop does not
        # spin (spinning took 80-100 CPU-seconds on an idle machine, its checkpoints starved)
        while not stop.wait(0.001):
            conns[turn].execute("BEGIN")
            conns[turn].execute("SELECT COUNT(*) FROM filler").fetchone()
            conns[1 - turn].execute("COMMIT")
            turn = 1 - turn
        conns[1 - turn].execute("COMMIT")
        for c in conns:
            c.close()

    reader = threading.Thread(target=readers)
    reader.start()
    biggest = 0
    try:
        for _ in range(120):  # ~480 KB of rows through the WAL (1.5 MB of WAL unchecked): 7 times the limit
            with store.write() as conn:
                conn.execute("INSERT INTO filler VALUES (randomblob(4000))")
            biggest = max(biggest, store.wal_bytes())
    finally:
        stop.set()
        reader.join()
    assert biggest <= 2 * limit
    assert store.check_health()["walBytes"] <= 2 * limit
    store.close()


@pytest.mark.anyio
async def test_a_second_opening_in_one_process_keeps_its_commits_visible(app: Any, isolated_env: Path) -> None:
    """Two Stores of one process (bench/waits_bench.py's sender and replier) and another process that
    opens and closes the database: what the first Store commits afterwards reaches other processes.
    Opening the file a second time once dropped the process's SQLite locks, so that other process's
    close took the WAL for unused and deleted it, and later commits went to the deleted file."""
    a = app()
    app()
    db = a.store.path
    opened = subprocess.run([sys.executable, "-c", "import sys; from agent_link_core.store import Store; Store(sys.argv[1]).close()", db],
                            capture_output=True, text=True, timeout=60)
    assert opened.returncode == 0, opened.stderr
    assert os.path.exists(db + "-wal")
    assert (await send(a, "after the other process closed"))["ok"]
    counted = subprocess.run([sys.executable, "-c", "import sqlite3, sys; "
                              "print(sqlite3.connect(sys.argv[1]).execute('SELECT COUNT(*) FROM messages').fetchone()[0])", db],
                             capture_output=True, text=True, timeout=60)
    assert counted.stdout.strip() == "1", counted.stderr


@pytest.mark.parametrize("content", [b"", b"my notes\n", b"SQLite format 3\x00" + b"\x00" * 100, "sqlite-other", "dir"])
def test_a_foreign_file_is_refused_untouched(isolated_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               content: Any) -> None:
    target = tmp_path / "notes.txt"
    if content == "dir":
        target.mkdir()
    elif content == "sqlite-other":
        conn = sqlite3.connect(target)
        conn.execute("CREATE TABLE mine (x)")
        conn.commit()
        conn.close()
    else:
        target.write_bytes(content)
    if not target.is_dir():
        target.chmod(0o644)
    before = (target.stat().st_mode, None if target.is_dir() else target.read_bytes())
    monkeypatch.setenv("AGENT_LINK_MAILBOX_PATH", str(target))
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "codex claude")
    with pytest.raises(AgentLinkError) as refused:
        App.create()
    assert refused.value.details["reason"] == "not_agent_link"
    assert "AGENT_LINK_MAILBOX_PATH" in (refused.value.hint or "")
    assert (target.stat().st_mode, None if target.is_dir() else target.read_bytes()) == before
    result = CliRunner().invoke(build_cli(), ["health"])
    assert result.exit_code == 1 and "not an agent-link database" in result.output and "Traceback" not in result.output
    # --json still prints one object: health's answer is that the database does not open
    result = CliRunner().invoke(build_cli(), ["health", "--json"])
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    data = json.loads(result.stdout)
    assert data["version"] and data["ok"] is False and data["error"]["details"]["reason"] == "not_agent_link"
    assert "not an agent-link database" in result.stderr


@pytest.mark.anyio
async def test_busy_and_health_through_a_real_mcp_session(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """alice through a real server; bob's read (a connection of its own) in this process."""
    env = {"AGENT_LINK_DISABLE_PLUGINS": "codex claude", "AGENT_LINK_BUSY_TIMEOUT_MS": "300"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    async with agent_link_mcp({**env, "AGENT_LINK_ADDRESS": "test:alice"}) as alice:
        first = await alice.call("message_agent", {"to": "test:bob", "message": "before the lock"})
        assert first["ok"]
        health = await alice.call("agent_link_health")
        assert health["database"]["ok"] is True and health["database"]["walBytes"] >= 0
        with tool_app.app_as(monkeypatch, "test:bob") as bob, hold_write_lock(isolated_env / "agent-link.db"):
            peek = await tool_app.call_tool(bob, "read_agent_link_inbox", markAsDelivered=False)
            assert peek["ok"] and [m["id"] for m in peek["messages"]] == [first["messageId"]]
            busy = await alice.call("message_agent", {"to": "test:bob", "message": "while locked"})
            assert busy["ok"] is False and busy["error"]["code"] == "state_busy"
            no_move_advice(busy["error"])
        assert (await alice.call("message_agent", {"to": "test:bob", "message": "after"}))["ok"]
