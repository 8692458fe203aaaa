"""The presence table: suggestions for an unknown plain address name only addresses a send reaches, the start-up
record of ``agent-link mcp``, and a bare id finding a live plain address."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_link_core.app import App
from agent_link_core.mailbox import new_message_id
from agent_link_core.records import OutgoingMessage
from agent_link_core.model import Caller
from agent_link_presence import startup, table as presence


def signed(app: App, sender: str) -> None:
    """Store a message that ``sender`` signed (as ``send --from`` does); nobody reads as it."""
    msg = OutgoingMessage(id=new_message_id(), sender=Caller(sender, "explicit"), to="team:zed", recipient="team:zed",
                          body="x", anticipation="fyi", reply_by_ms=None, reply_to=None)
    app.mailbox.store_message(msg)


def test_only_served_addresses_and_harness_sessions_are_suggested(app: App) -> None:
    presence.record(app.store, "team:bob", "inbox")
    signed(app, "team:bobby")  # only ever a sender
    signed(app, "sx:bobby")  # a session of an installed harness: the harness delivers to it
    with app.store.write() as conn:  # a contact nobody ever served (the row `agent-link contacts add` writes)
        conn.execute("INSERT INTO contacts (alias, address, created_at) VALUES ('robert', 'team:boby', 0)")
    assert set(presence.known_addresses(app.store)) >= {"team:bob", "team:bobby", "sx:bobby", "team:boby"}
    assert presence.reachable_addresses(app.store) == ["team:bob"]
    assert presence.reachable_addresses(app.store, {"sx"}) == ["sx:bobby", "team:bob"]
    assert presence.suggestions(app.store, "team:bobb") == ["team:bob"]
    assert presence.suggestions(app.store, "tx:bobby", harnesses={"sx"})[0] == "sx:bobby"
    for name in ("erin", "dave", "alice"):  # the shared "team:" makes no id close to another
        presence.record(app.store, f"team:{name}", "inbox")
    assert presence.suggestions(app.store, "team:frank") == []
    assert presence.suggestions(app.store, "team:davd") == ["team:dave"]
    assert presence.suggestions(app.store, "teambob") == ["team:bob"]
    warning = presence.unseen_warning(app.store, "team:bobb")
    assert warning["details"]["suggestions"] == ["team:bob"] and "Did you mean team:bob?" in warning["message"]


def test_an_mcp_server_counts_as_serving_its_address_once_it_answers_initialize(app: App) -> None:
    """The start-up front answers `initialize` before the full server loads: the address is
    recorded before that answer, so a send right after it carries no unknown_address warning."""
    import json
    import os
    import subprocess
    import sys

    agent_link = str(Path(sys.executable).with_name("agent-link"))
    env = {**os.environ, "AGENT_LINK_ADDRESS": "team:bob"}
    init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    for start in ("the front learns the answer", "the front answers"):
        with app.store.write() as conn:
            conn.execute("DELETE FROM presence WHERE address = 'team:bob'")
        proc = subprocess.Popen([agent_link, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=env, text=True)
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(init + "\n")
            proc.stdin.flush()
            assert json.loads(proc.stdout.readline())["id"] == 1  # bob's server answered initialize
            assert presence.seen(app.store, "team:bob"), start  # what a send checks before it warns unknown_address
        finally:
            proc.stdin.close()
            proc.wait(120)


def test_record_at_start_creates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "state" / "agent-link.db"
    startup.record_at_start({"HOME": str(tmp_path), "AGENT_LINK_STATE_DIR": str(db.parent), "AGENT_LINK_ADDRESS": "team:bob"})
    assert not db.parent.exists()
    db.parent.mkdir()
    db.write_bytes(b"not a database")
    startup.record_at_start({"HOME": str(tmp_path), "AGENT_LINK_STATE_DIR": str(db.parent), "AGENT_LINK_ADDRESS": "team:bob"})
    assert db.read_bytes() == b"not a database"


def test_a_start_record_that_was_not_the_servers_identity_is_taken_back(app: App) -> None:
    """The full server serves a harness session, not AGENT_LINK_ADDRESS: what the start-up
    record wrote is removed (a new row) or put back as it was (an existing one)."""
    import os

    env = {**os.environ, "AGENT_LINK_ADDRESS": "team:me"}
    startup.record_at_start(env)
    assert presence.seen(app.store, "team:me")
    startup.undo_start_record(app.store)
    assert not presence.seen(app.store, "team:me")
    presence.record(app.store, "team:me", "inbox")
    before = tuple(app.store.conn.execute("SELECT * FROM presence WHERE address = 'team:me'").fetchone())
    startup.record_at_start(env)
    assert app.store.conn.execute("SELECT pid FROM presence WHERE address = 'team:me'").fetchone()[0] == os.getpid()
    startup.undo_start_record(app.store)
    assert tuple(app.store.conn.execute("SELECT * FROM presence WHERE address = 'team:me'").fetchone()) == before
    startup.undo_start_record(app.store)  # nothing left to take back


def test_known_senders_are_read_by_index_seeks_not_a_scan_of_every_message(app: App) -> None:
    """Each distinct sender costs one seek of the ``messages_from`` index: the statement reads
    every message nowhere (a send to a never-served address asks this on a growing table)."""
    for sender in ("team:a", "team:b", "team:a", "team:c", "team:b"):
        signed(app, sender)
    assert {"team:a", "team:b", "team:c"} <= set(presence.known_addresses(app.store))
    statements: list[str] = []
    app.store.conn.set_trace_callback(statements.append)
    try:
        presence.known_addresses(app.store)
    finally:
        app.store.conn.set_trace_callback(None)
    senders = next(s for s in statements if "from_addr" in s)
    plan = " ".join(str(row[-1]) for row in app.store.conn.execute("EXPLAIN QUERY PLAN " + senders))
    assert "SCAN messages" not in plan, plan


@pytest.mark.anyio
async def test_a_bare_id_finds_a_live_plain_address_as_list_agents_lists_it(app: App) -> None:
    """list_agents lists a served plain address with its id; resolving that id (resolve_agent, message_agent's ``to``)
    found nothing: plain addresses were left out of the bare-id search."""
    presence.record(app.store, "team:mbob", "inbox")
    listed = await app.list_agents()
    assert [s["id"] for s in listed["sessions"] if s["address"] == "team:mbob"] == ["mbob"]
    verdict = await app.resolve_agent("mbob")
    assert verdict["status"] == "resolved" and verdict["best"]["address"] == "team:mbob", verdict
    assert (await app.directory.target_address("mbob", Caller("team:alice", "explicit")))[0] == "team:mbob"
    assert (await app.resolve_agent("nobody-here"))["status"] == "not_found"


def test_other_plugins_read_the_table_and_see_nothing_served_where_it_is_missing(app: App) -> None:
    """machines and leases read served addresses through these; on a database this plugin never opened (it is
    disabled, or not loaded, there) they see no address served instead of failing."""
    import sqlite3

    presence.record(app.store, "team:old", "inbox")
    presence.record(app.store, "team:new", "mcp", 4242)
    with app.store.write() as conn:  # served later than team:old
        conn.execute("UPDATE presence SET last_seen = last_seen + 1000 WHERE address = 'team:new'")
    assert presence.served_addresses(app.store.conn) == ["team:new", "team:old"]
    assert presence.served_addresses(app.store.conn, 1) == ["team:new"]
    row = presence.served_row(app.store.conn, "team:new")
    assert row is not None and row[1] == 4242 and presence.served_row(app.store.conn, "team:none") is None
    bare = sqlite3.connect(":memory:")
    assert presence.served_row(bare, "team:new") is None and presence.served_addresses(bare) == []
    bare.execute("CREATE TABLE presence (address TEXT)")  # any other error is not hidden
    with pytest.raises(sqlite3.OperationalError):
        presence.served_row(bare, "team:new")
