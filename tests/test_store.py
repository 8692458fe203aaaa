"""The state database: permissions, migrations once, many processes writing at once."""

from __future__ import annotations

import multiprocessing
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from agent_link_core.config import load_config
from agent_link_core.errors import AgentLinkError
from agent_link_core.mailbox import Mailbox, new_message_id
from agent_link_core.records import OutgoingMessage
from agent_link_core.model import Caller
from agent_link_core.store import CORE_MIGRATIONS, Migration, Store, record_damage


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_dir_0700_files_0600(isolated_env: Path) -> None:
    old = os.umask(0o022)
    try:
        store = Store(isolated_env / "agent-link.db")
        store.conn.execute("SELECT 1")
    finally:
        os.umask(old)
    assert mode(isolated_env) == 0o700
    assert mode(isolated_env / "agent-link.db") == 0o600
    for side in ("agent-link.db-wal", "agent-link.db-shm"):
        if (isolated_env / side).exists():
            assert mode(isolated_env / side) == 0o600
    store.close()


def test_existing_dir_is_left_alone_and_reported(isolated_env: Path) -> None:
    # It may be shared on purpose (a home directory, /tmp): never change its permissions.
    isolated_env.mkdir(mode=0o755)
    isolated_env.chmod(0o1777)
    Store(isolated_env / "agent-link.db").close()
    assert mode(isolated_env) == 0o1777
    from agent_link_core.app import App

    app = App.create()
    try:
        state = app.health()["stateDir"]
        assert state["private"] is False and state["warning"]["code"] == "state_dir_not_private"
        assert f"chmod 700 {isolated_env}" in state["warning"]["hint"]
    finally:
        app.close()
    shown = subprocess.run([str(Path(sys.executable).with_name("agent-link")), "health"], capture_output=True, text=True,
                           timeout=120, env=dict(os.environ))
    assert f"warning: other users can open the state dir, where the mailbox is. Run `chmod 700 {isolated_env}`" in shown.stdout
    isolated_env.chmod(0o700)
    app = App.create()
    try:
        assert "warning" not in app.health()["stateDir"]
    finally:
        app.close()


def test_migrations_apply_once_per_owner(isolated_env: Path) -> None:
    extra = [Migration("plug", 1, "CREATE TABLE plug_a (x INTEGER);"), Migration("plug", 2, "ALTER TABLE plug_a ADD COLUMN y TEXT;")]
    Store(isolated_env / "a.db", list(CORE_MIGRATIONS) + extra).close()
    store = Store(isolated_env / "a.db", list(CORE_MIGRATIONS) + extra)  # second open: nothing re-applied
    rows = store.conn.execute("SELECT owner, version FROM schema_migrations ORDER BY owner, version").fetchall()
    core = [("core", m.version) for m in CORE_MIGRATIONS]
    assert [tuple(r) for r in rows] == core + [("plug", 1), ("plug", 2)]
    store.close()


def test_failed_migration_keeps_nothing(isolated_env: Path) -> None:
    bad = [Migration("plug", 1, "CREATE TABLE ok_t (x INTEGER); CREATE TABLE broken (;")]
    with pytest.raises(AgentLinkError) as e:
        Store(isolated_env / "b.db", list(CORE_MIGRATIONS) + bad)
    assert e.value.code == "state_io_error"
    store = Store(isolated_env / "b.db")
    assert store.conn.execute("SELECT name FROM sqlite_master WHERE name = 'ok_t'").fetchone() is None
    store.close()


def test_unwritable_state_dir_is_state_io_error(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    if os.geteuid() == 0:
        pytest.skip("root ignores directory permissions")
    with pytest.raises(AgentLinkError) as e:
        Store(locked / "sub" / "x.db")
    assert e.value.code == "state_io_error"


def _sender(args: tuple[str, int, int]) -> list[str]:
    state_dir, worker, count = args
    os.environ["AGENT_LINK_STATE_DIR"] = state_dir
    config = load_config()
    box = Mailbox(Store(config.db_path), config)
    sender = Caller(f"test:w{worker}", "config", "test")
    ids = []
    for i in range(count):
        mid = new_message_id()
        box.store_message(OutgoingMessage(mid, sender, "test:sink", "test:sink", f"w{worker} #{i}", "fyi", None, None))
        ids.append(mid)
    return ids


def test_many_processes_sending_at_once(isolated_env: Path) -> None:
    Store(isolated_env / "agent-link.db").close()  # migrate once up front, like a running server
    workers, per_worker = 8, 60
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(workers) as pool:
        results = pool.map(_sender, [(str(isolated_env), w, per_worker) for w in range(workers)])
    sent = [mid for ids in results for mid in ids]
    store = Store(isolated_env / "agent-link.db")
    rows = store.conn.execute("SELECT id, body FROM messages").fetchall()
    assert len(sent) == len(set(sent)) == workers * per_worker
    assert sorted(r["id"] for r in rows) == sorted(sent)  # every message stored once, none lost
    bodies = {r["body"] for r in rows}
    assert all(f"w{w} #{i}" in bodies for w in range(workers) for i in range(per_worker))
    events = store.conn.execute("SELECT COUNT(*) FROM message_events WHERE kind = 'sent'").fetchone()[0]
    assert events == workers * per_worker
    store.close()


@pytest.mark.parametrize("content", [b"[1, 2]", b'"damaged"', b"[" * 100_000 + b"]" * 100_000, b"{", b""])
def test_a_damage_marker_that_is_not_an_object_names_no_file(isolated_env: Path, content: bytes) -> None:
    """record_damage writes its marker atomically, so one that is not a JSON object (another
    program's file, absurdly nested) names no database: it is ignored, and nothing raises."""
    store = Store(isolated_env / "agent-link.db")
    try:
        Path(store.damage_marker).write_bytes(content)
        assert store.damage() is None
        record_damage(store.path, store.identity, "test")  # a real marker still refuses
        found = store.damage()
        assert found is not None and found.details["reason"] == "corrupt"
    finally:
        store.close()


def test_the_damage_marker_is_read_again_only_when_it_changed(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every write asks for the marker twice: while it is unchanged it is stat'ed, not read; a
    new marker (another process's, written by replacing the file) and its removal are seen."""
    import agent_link_core.store as store_module

    reads: list[str] = []
    real = store_module.read_json_object
    monkeypatch.setattr(store_module, "read_json_object", lambda path: reads.append(path) or real(path))
    store = Store(isolated_env / "agent-link.db")
    try:
        assert store.damage() is None and reads == []  # no marker: nothing to read
        record_damage(store.path, store.identity, "first")
        assert [store.damage() is not None for _ in range(3)] == [True] * 3 and len(reads) == 1
        with pytest.raises(AgentLinkError):
            store.check_writable()
        record_damage(store.path, store.identity, "second")  # replaced: read again
        assert store.damage() is not None and len(reads) == 2
        os.unlink(store.damage_marker)
        assert store.damage() is None
        store.check_writable()
    finally:
        store.close()


def test_open_read_only_reads_and_never_writes(isolated_env: Path) -> None:
    writer = Store(isolated_env / "agent-link.db")
    try:
        writer.conn.execute("CREATE TABLE probe (address TEXT)")
        writer.conn.execute("INSERT INTO probe VALUES ('t:a')")
        reader = Store.open_read_only(isolated_env / "agent-link.db")  # the writer's -shm exists: a read-only WAL reader
        try:
            assert reader.conn.execute("SELECT address FROM probe").fetchall()[0][0] == "t:a"
            with pytest.raises(AgentLinkError) as refused:
                with reader.write() as conn:
                    conn.execute("DELETE FROM probe")
            assert refused.value.code == "state_io_error"
            assert reader.check_health()["ok"] is True
        finally:
            reader.close()
        assert writer.conn.execute("SELECT count(*) FROM probe").fetchone()[0] == 1
    finally:
        writer.close()
    with pytest.raises(AgentLinkError) as missing:
        Store.open_read_only(isolated_env / "absent.db")
    assert missing.value.code == "state_io_error"
