"""How much database work one MCP send and one inbox read do, counted in SQL statements (never
timed: the speed is bench/readpath_bench.py's). A send stores its row with one statement and
reads it back from nobody: not from the database after the insert, not for its result, not
for the observers of its ``sent`` event."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from agent_link_core import hookimpl
from agent_link_core.app import App
from agent_link_core.tools.registry import call_tool

#: statements of one send of a new message to a plain address, core only (the loops plugin's
#: guard adds two in the transaction: the recent messages the same as this one, the pair's rate;
#: the presence plugin one before it: whether the recipient was ever served): BEGIN, the row's
#: INSERT ... RETURNING, its ``sent`` event, COMMIT
SEND_STATEMENTS = 4
#: statements of one inbox read that does not mark (core only): the running-wait check, the
#: unread and the open rows, their states (3), what is left unread
READ_STATEMENTS = 7
#: what a read that marks adds beyond the peek and two statements per message: BEGIN, the rows
#: to mark, COMMIT, then the marked rows, their states (2 queries), the running-wait check, the count
MARKING_STATEMENTS = 8
ROW_READ = "SELECT * FROM messages WHERE id"

pytestmark = pytest.mark.anyio


@contextmanager
def statements(app: App) -> Iterator[list[str]]:
    """The top-level statements ``app``'s connection runs inside the block (a trigger's own
    statements, which SQLite reports with a leading ``--``, left out)."""
    seen: list[str] = []
    app.store.conn.set_trace_callback(lambda sql: None if sql.startswith("--") else seen.append(sql))
    try:
        yield seen
    finally:
        app.store.conn.set_trace_callback(None)


async def _call(app: App, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result, _ = await call_tool(app, app.hooks.tools()[tool], arguments, {})
    assert result["ok"], result
    return result


def _app(address: str, *plugins: Any) -> App:
    """An App for ``address`` (core only, with ``plugins``)."""
    return App.create(env=dict(os.environ, AGENT_LINK_ADDRESS=address), extra_plugins=plugins)


async def test_a_send_and_a_read_stay_within_their_statement_counts() -> None:
    alice, bob = _app("team:alice"), _app("team:bob")
    await _call(alice, "message_agent", {"to": "team:bob", "message": "first"})
    with statements(alice) as sent:
        result = await _call(alice, "message_agent", {"to": "team:bob", "message": "second"})
    assert (result["delivery"], result["deliveryState"], result["messageStatus"]) == ("queued", "queued", None)
    assert len(sent) <= SEND_STATEMENTS, sent
    assert not [s for s in sent if s.startswith(ROW_READ)], sent
    with statements(bob) as read:
        inbox = await _call(bob, "read_agent_link_inbox", {"markAsDelivered": False})
    assert [m["id"] for m in inbox["messages"]][-1] == result["messageId"]
    assert len(read) <= READ_STATEMENTS, read


async def test_a_marking_read_reads_its_rows_in_batches_not_one_query_each() -> None:
    alice, bob = _app("team:alice"), _app("team:bob")
    for n in range(3):
        await _call(alice, "message_agent", {"to": "team:bob", "message": f"note {n}"})
    with statements(bob) as read:
        inbox = await _call(bob, "read_agent_link_inbox", {})
    assert len(inbox["messages"]) == 3 and len(inbox["markedDelivered"]) == 3
    # the rows to mark in one query inside the write, the marked rows in one after it
    assert len([s for s in read if s.startswith("SELECT * FROM messages WHERE id")]) <= 2, read
    # per message marked: its UPDATE and its ``delivered`` event; the rest does not grow with it
    assert len(read) <= READ_STATEMENTS + 3 * 2 + MARKING_STATEMENTS, read


class RowReader:
    """Observers of the ``sent`` event that read the message's row, as plugins do."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str]] = []

    @hookimpl
    def agent_link_record_event(self, event: Any, conn: Any, app: App) -> None:
        if event.kind == "sent":
            self.rows.append(("record", app.mailbox.get_row(event.message_id)["body"]))

    @hookimpl
    def agent_link_on_event(self, event: Any, app: App) -> None:
        if event.kind == "sent":
            self.rows.append(("on", app.mailbox.get_row(event.message_id)["body"]))


async def test_the_observers_of_a_send_get_its_row_without_reading_it_again() -> None:
    reader = RowReader()
    alice = _app("team:alice", reader)
    await _call(alice, "message_agent", {"to": "team:bob", "message": "warm-up"})
    with statements(alice) as sent:
        result = await _call(alice, "message_agent", {"to": "team:bob", "message": "watched"})
    assert reader.rows[-2:] == [("record", "watched"), ("on", "watched")]
    assert not [s for s in sent if s.startswith(ROW_READ)], sent
    # outside the send, the same question asks the database again
    with statements(alice) as later:
        assert alice.mailbox.get_row(result["messageId"])["body"] == "watched"
    assert [s for s in later if s.startswith(ROW_READ)]


async def test_a_resend_with_the_same_id_stores_nothing_and_other_words_are_refused() -> None:
    alice = _app("team:alice")
    args = {"to": "team:bob", "message": "once", "messageId": "01J00000000000000000000001"}
    first = await _call(alice, "message_agent", args)
    second = await _call(alice, "message_agent", args)
    assert (second["messageId"], second["duplicate"], first["duplicate"]) == (first["messageId"], True, False)
    counts = alice.store.conn.execute("SELECT (SELECT COUNT(*) FROM messages), (SELECT COUNT(*) FROM message_events)").fetchone()
    assert tuple(counts) == (1, 1)
    args["message"] = "other words"
    refused, _ = await call_tool(alice, alice.hooks.tools()["message_agent"], args, {})
    assert refused["error"]["details"]["errors"][0]["rule"] == "idempotency"
