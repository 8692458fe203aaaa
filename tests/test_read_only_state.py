"""A state dir agent-link cannot write (read-only, a full disk, a file damaged where it opens,
a file in its way): what health says can be read is read by every reading command and MCP
tool, nothing is marked or lost, and what needs a write is refused in one line (the tool's
error object). Also the reading commands' own lines found wrong on the way (a peek's "more").
The listings plugin's commands: plugins/listings/tests."""

from __future__ import annotations

import json
import sqlite3
import os
import subprocess
import sys
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError
from agent_link_testing.mcp_client import agent_link_mcp
from tests.test_bad_configuration import NO_HOSTS, one_line_error, run, unwritable

BOB = {"AGENT_LINK_ADDRESS": "test:bob"}


def sent(body: str, *options: str) -> str:
    done = run("send", "test:bob", body, "--from", "test:alice", "--json", *options)
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["messageId"])


def test_every_reading_command_reads_an_unwritable_state_dir(isolated_env: Path) -> None:
    first = sent("first question", "--anticipation", "reply")
    sent("second note")
    before = sorted((p.name, p.stat().st_size) for p in isolated_env.iterdir())
    with unwritable(isolated_env):
        inbox = run("inbox", env=BOB)  # a read that would mark
        peek = run("inbox", "--peek", "--json", env=BOB)
        done = {name: run(*argv, env=BOB) for name, argv in {
            "status": ("status", first), "show": ("show", first),  # the listings: plugins/listings/tests
        }.items()}
        refused = run("send", "test:alice", "an answer", env=BOB)
        after = sorted((p.name, p.stat().st_size) for p in isolated_env.iterdir())
    assert inbox.returncode == 0, inbox.stderr
    assert "first question" in inbox.stdout and "second note" in inbox.stdout
    warning = [line for line in inbox.stderr.splitlines() if line.strip()]
    assert len(warning) == 1 and "not writable" in warning[0] and "Nothing was marked" in warning[0], inbox.stderr
    assert peek.returncode == 0 and peek.stderr == "", peek.stderr
    assert [m["delivery"] for m in json.loads(peek.stdout)["messages"]] == ["queued", "queued"]
    for name, result in done.items():
        assert result.returncode == 0 and "Traceback" not in result.stderr, (name, result.stderr)
    assert "first question" in done["show"].stdout and first in done["status"].stdout
    assert refused.returncode == 1
    one_line_error(refused, "AGENT_LINK_STATE_DIR")
    assert after == before  # nothing was written
    # writable again: nothing was marked read while it was not
    again = json.loads(run("inbox", "--peek", "--json", env=BOB).stdout)
    assert [m["delivery"] for m in again["messages"]] == ["queued", "queued"]


@pytest.mark.anyio
async def test_the_mcp_server_reads_an_unwritable_state_dir(isolated_env: Path, capfd: pytest.CaptureFixture[str]) -> None:
    message_id = sent("for the server", "--anticipation", "reply")
    with unwritable(isolated_env):
        async with agent_link_mcp({**NO_HOSTS, **BOB}) as client:
            inbox = await client.call("read_agent_link_inbox", {})
            status = await client.call("get_agent_link_message_status", {"messageId": message_id})
            refused = await client.call("reply_agent_link_message", {"messageId": message_id, "resolution": "done"})
    assert inbox["ok"] is True and [m["id"] for m in inbox["messages"]] == [message_id]
    assert inbox["markedDelivered"] == []
    assert [w["details"]["reason"] for w in inbox["warnings"]] == ["read_only"]
    assert status["ok"] is True and status["delivery"] == "queued"
    assert refused["ok"] is False and refused["error"]["code"] == "state_io_error"
    log = capfd.readouterr().err  # the server's log: why it only reads, once, and no write it tried on the way
    assert log.count("serves reads only") == 1 and "presence of" not in log, log


def full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """The state dir's disk has no space left, and SQLite, unable to make the WAL index,
    reports a plain I/O error when the database is opened (what it does on a full disk)."""
    from agent_link_core import store as store_module

    class NoSpace:
        f_bavail, f_frsize = 0, 4096

    def open_fails(self: Any, path: str, migrations: list[Any]) -> Any:
        raise store_module.database_error(path, __import__("sqlite3").OperationalError("disk I/O error"))

    monkeypatch.setattr(App, "_open_store", open_fails)
    monkeypatch.setattr(os, "statvfs", lambda path: NoSpace())


def test_a_full_disk_is_named_and_its_mail_still_read(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sent("before the disk filled")
    full_disk(monkeypatch)
    with pytest.raises(AgentLinkError) as refused:  # a command that writes: the disk, not the path
        App.create()
    assert refused.value.details["reason"] == "disk_full" and "full" in refused.value.message
    assert "AGENT_LINK_STATE_DIR" not in refused.value.message
    app = App.create(read_only_ok=True)  # a command that reads
    try:
        assert app.read_only is not None and app.read_only.details["reason"] == "disk_full"
        rows = app.store.conn.execute("SELECT body FROM messages").fetchall()
        assert [r[0] for r in rows] == ["before the disk filled"]
        with pytest.raises(AgentLinkError) as write:  # a write says why, not SQLite's "readonly database"
            with app.store.write():
                pass
        assert write.value.details["reason"] == "disk_full" and "nothing of this call was stored" in write.value.message
    finally:
        app.close()


def test_health_names_a_full_disk(isolated_env: Path) -> None:
    """Through the real command: health's JSON names the full disk and exits 1."""
    sent("before the disk filled")
    code = ("import os, sqlite3, sys\n"
            "from agent_link_core import store\n"
            "from agent_link_core.app import App\n"
            "class NoSpace: f_bavail, f_frsize = 0, 4096\n"
            "os.statvfs = lambda path: NoSpace()\n"
            "def fail(self, path, migrations): raise store.database_error(path, sqlite3.OperationalError('disk I/O error'))\n"
            "App._open_store = fail\n"
            "sys.argv = ['agent-link', 'health', '--json']\n"
            "from agent_link_core.cli import main\n"
            "main()\n")
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, **NO_HOSTS, **BOB},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    database = json.loads(done.stdout)["database"]
    assert database["readOnly"] is True and database["problem"]["details"]["reason"] == "disk_full"
    assert database["pendingForCaller"] == 1 and "refused until space is freed" in database["problem"]["message"]


class NoSpace:
    f_bavail, f_frsize = 0, 4096


def test_health_finds_a_disk_that_filled_after_the_database_opened(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The database opens (its -shm exists), but no write has room: health says so as when the open found the disk full."""
    sent("before the disk filled")
    monkeypatch.setenv("AGENT_LINK_ADDRESS", "test:bob")
    app = App.create(read_only_ok=True)
    try:
        assert app.read_only is None and app.health()["database"]["ok"] is True
        monkeypatch.setattr(os, "statvfs", lambda path: NoSpace())
        health = app.health()
    finally:
        app.close()
    assert health["database"]["ok"] is False and health["database"]["problem"]["details"]["reason"] == "disk_full"
    assert health["stateDir"]["writable"] is False and health["database"]["pendingForCaller"] == 1
    said = health["database"]["problem"]["message"]  # health stores nothing: the disk's state, not a call's fate
    assert "refused until space is freed" in said and "this call" not in said


def test_health_of_a_filled_disk_exits_1(isolated_env: Path) -> None:
    """Through the real command, the database opening as usual: one problem line and exit 1, the JSON's ok false."""
    sent("before the disk filled")
    code = ("import os, sys\n"
            "class NoSpace: f_bavail, f_frsize = 0, 4096\n"
            "os.statvfs = lambda path: NoSpace()\n"
            "sys.argv = ['agent-link', *sys.argv[1:]]\n"
            "from agent_link_core.cli import main\n"
            "main()\n")
    for args in (["health"], ["health", "--json"]):
        done = subprocess.run([sys.executable, "-c", code, *args], env={**os.environ, **NO_HOSTS, **BOB},
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        if "--json" in args:
            data = json.loads(done.stdout)
            assert data["ok"] is False and data["database"]["problem"]["details"]["reason"] == "disk_full"
        else:
            assert "REFUSING WRITES" in done.stdout and done.stdout.count("is full") == 1, done.stdout
            assert "refused until space is freed" in done.stdout and "this call" not in done.stdout, done.stdout
        assert "not repaired" not in done.stderr, done.stderr


@pytest.fixture
def tiny_disk(isolated_env: Path) -> Iterator[Path]:
    """A state dir on a 1.2 MB tmpfs (root only: mounting needs it), unmounted after."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    state = isolated_env.parent / "tiny"
    state.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1200k", "tmpfs", str(state)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield state / "state"
    finally:
        subprocess.run(["umount", "-l", str(state)], check=False)


@pytest.mark.installed_plugins("receipts", "presence")
def test_health_on_a_full_tmpfs_says_so(tiny_disk: Path) -> None:
    """A real full disk (a filler file took the rest): health exits 1 naming it, send says it too, every stderr line is
    agent-link's (prefixed), and the MCP tool's health reports it."""
    env = {"AGENT_LINK_STATE_DIR": str(tiny_disk)}
    assert run("send", "test:bob", "before the disk filled", "--from", "test:alice", env=env).returncode == 0
    with open(tiny_disk.parent / "filler", "wb") as filler:
        with pytest.raises(OSError):
            while True:
                filler.write(b"x" * 65536)
                filler.flush()
    done = run("health", "--json", env={**env, **BOB})
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    assert data["ok"] is False and data["database"]["problem"]["details"]["reason"] == "disk_full"
    assert data["stateDir"]["writable"] is False
    assert all(line.startswith("agent-link") for line in done.stderr.splitlines()), done.stderr
    send = run("send", "test:bob", "x" * 60_000, "--from", "test:alice", env=env)
    assert send.returncode == 1 and "is full" in send.stderr, send.stderr
    script = ("import asyncio, json\n"
              "from agent_link_testing.mcp_client import agent_link_mcp\n"
              "async def main():\n"
              "    async with agent_link_mcp({}) as client:\n"
              "        print(json.dumps(await client.call('agent_link_health', {})))\n"
              "asyncio.run(main())\n")
    served = subprocess.run([sys.executable, "-c", script], env={**os.environ, **NO_HOSTS, **BOB, **env},
                            capture_output=True, text=True, timeout=120)
    health = json.loads(served.stdout.splitlines()[-1])
    assert health["database"]["ok"] is False and health["database"]["problem"]["details"]["reason"] == "disk_full", health


# The child's disk fills at a chosen moment of the first open: SQLite then refuses to grow
# the file (SQLITE_FULL, what a full disk makes it say).
FILLS_DURING_MIGRATIONS = (
    "import sys\n"
    "from agent_link_core.store import Store\n"
    "migrate = Store.migrate\n"
    "def filling(self, migrations):\n"
    "    migrations = list(migrations)\n"
    "    if sys.argv[1] == 'core' or any(m.owner != 'core' for m in migrations):\n"
    "        pages = self.conn.execute('PRAGMA page_count').fetchone()[0]\n"
    "        self.conn.execute(f'PRAGMA max_page_count = {pages}')\n"
    "    migrate(self, migrations)\n"
    "Store.migrate = filling\n"
    "sys.argv[1:2] = []\n"
    "from agent_link_core.cli import main\n"
    "main()\n"
)


@pytest.mark.installed_plugins("waits")
@pytest.mark.parametrize("fills_at", ["core", "plugins"])
@pytest.mark.parametrize("command", [("inbox",), ("health", "--json"), ("send", "test:alice", "hello")])
def test_a_disk_full_on_first_use_is_the_disk_not_a_plugin(isolated_env: Path, fills_at: str, command: tuple[str, ...]) -> None:
    """A disk that fills while a new state dir is migrated (the core's migrations or a plugin's)
    is reported as a full disk in one line, no plugin is blamed or disabled, and once there is
    room the next command completes every migration."""
    done = subprocess.run([sys.executable, "-c", FILLS_DURING_MIGRATIONS, fills_at, *command], env={**os.environ, **NO_HOSTS, **BOB},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    if "--json" in command:  # the error object
        assert json.loads(done.stdout)["error"]["details"]["reason"] == "disk_full"
    else:
        assert done.stdout == ""
    one_line_error(done, "is full", "Free disk space")
    assert "plugin" not in done.stderr
    assert not (isolated_env / "plugin-problems.json").exists()  # no plugin blamed for later either
    sent("after space was freed")  # nothing half-made stays: the next open completes every migration
    health = json.loads(run("health", "--json", env=BOB).stdout)
    assert health["database"]["ok"] is True and health["database"]["pendingForCaller"] == 1
    assert not health.get("pluginProblems") and not (isolated_env / "plugin-problems.json").exists()


def damage_the_migrations_index(db: Path) -> None:
    """Overwrite the page of the schema_migrations table's index, which every open reads
    first: the database can no longer be opened for writing, its mail is intact."""
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page = conn.execute("SELECT rootpage FROM sqlite_master WHERE type = 'index' AND tbl_name = 'schema_migrations'").fetchone()[0]
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    with open(db, "r+b") as f:
        f.seek((page - 1) * size)
        f.write(b"\xde\xad" * (size // 2))


def test_a_database_damaged_where_it_opens_is_still_read(isolated_env: Path) -> None:
    sent("before the damage")
    damage_the_migrations_index(isolated_env / "agent-link.db")
    health = run("health", "--json", env=BOB)  # finds the damage and records it
    inbox = run("inbox", env=BOB)
    refused = run("send", "test:alice", "into a damaged file", env=BOB)
    assert inbox.returncode == 0 and "before the damage" in inbox.stdout, inbox.stderr
    warning = [line for line in inbox.stderr.splitlines() if line.strip()]
    assert len(warning) == 1 and "damaged" in warning[0], inbox.stderr
    assert health.returncode == 1
    database = json.loads(health.stdout)["database"]
    assert database["problem"]["details"]["reason"] == "corrupt" and ".recover" in database["problem"]["hint"]
    assert database["pendingForCaller"] == 1
    assert refused.returncode == 1
    one_line_error(refused, "damaged")


def test_a_marking_failure_keeps_the_error_words(capsys: pytest.CaptureFixture[str]) -> None:
    """The line saying what stays unread keeps a capitalised name (SQLite) as it is."""
    from agent_link_core.cli_run import not_marked

    with pytest.raises(SystemExit):
        not_marked(AgentLinkError("state_io_error", "SQLite reports the database as damaged."), "the message shown was not marked read")
    assert "read: SQLite reports" in capsys.readouterr().err


def test_marking_nothing_asks_no_write_of_a_damaged_database(isolated_env: Path) -> None:
    """An inbox read that shows nothing unread marks nothing: a database that refuses writes
    is not asked for a write transaction (which it would refuse, failing the read)."""
    sent("already there")
    damage_the_migrations_index(isolated_env / "agent-link.db")
    assert run("health").returncode == 1  # finds the damage and records it: every write is refused now
    app = App.create(read_only_ok=True)
    try:
        assert app.read_only is not None and app.read_only.details["reason"] == "corrupt"
        assert app.mailbox.mark_many_delivered([], "inbox") == []
    finally:
        app.close()


def test_a_peek_that_showed_every_message_says_none_waits(isolated_env: Path) -> None:
    """``inbox --peek`` marks nothing; what it showed is not announced as more mail waiting."""
    for n in range(3):
        sent(f"note {n}")
    peek = run("inbox", "--peek", env=BOB)
    assert peek.returncode == 0 and "note 2" in peek.stdout
    assert "more message(s) wait" not in peek.stdout, peek.stdout
    one = run("inbox", "--peek", "--limit", "1", env=BOB)
    assert "2 more message(s) wait" in one.stdout, one.stdout


@pytest.mark.parametrize("below", ["", "sub/state"])
def test_a_state_dir_where_a_file_is_names_the_file(tmp_path: Path, below: str) -> None:
    """A state dir that is, or lies under, a regular file: one line naming that file (not
    "File exists", which sends the user looking for the wrong thing)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    done = run("inbox", env={**BOB, "AGENT_LINK_STATE_DIR": str(blocker / below) if below else str(blocker)})
    assert done.returncode == 1
    one_line_error(done, f"{blocker} is a file, not a directory", "AGENT_LINK_STATE_DIR")


@pytest.mark.installed_plugins("waits")
def test_wait_shows_a_reply_in_an_unwritable_state_dir(isolated_env: Path) -> None:
    """A wait whose reply is there shows it and succeeds, with one warning that it stays
    unread (as an inbox read there), not the exit 1 of a marking that failed by surprise."""
    alice = {"AGENT_LINK_ADDRESS": "test:alice"}
    question = json.loads(run("send", "test:bob", "a question?", "--anticipation", "reply", "--json", env=alice).stdout)["messageId"]
    assert run("reply", question, "the answer", env=BOB).returncode == 0
    with unwritable(isolated_env):
        waited = run("wait", question, "--timeout-ms", "2000", env=alice)
    assert waited.returncode == 0 and "the answer" in waited.stdout, waited.stderr
    warning = [line for line in waited.stderr.splitlines() if line.strip()]
    assert len(warning) == 1 and "not writable" in warning[0] and "not marked read" in warning[0], waited.stderr


def test_a_command_declares_that_it_only_reads() -> None:
    """The core reads each command's declaration (cli_run.Command.reader, contribute.command/commands), no list of names."""
    import click

    from agent_link_core.cli import CORE_COMMANDS, click_command
    from agent_link_core.cli_run import import_target
    from agent_link_core.contribute import commands

    readers = {name for name, target in CORE_COMMANDS.items() if import_target(target).reader}
    assert readers == {"inbox", "status", "show", "health", "plugins"}
    assert click_command(import_target(CORE_COMMANDS["show"])).reader is True  # what click's path looks at
    group = click.Group()
    commands(("looks", "pkg.cli:looks", "Look.", "reader"), ("writes", "pkg.cli:writes", "Write."))(group)
    assert group.commands["looks"].reader is True and group.commands["writes"].reader is False
