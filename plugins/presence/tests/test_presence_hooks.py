"""The presence plugin's hooks as the core calls them: the MCP server's record as it starts (agent_link_server_tasks),
an inbox read's, and the one statement a send to a served plain address costs."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError
from agent_link_core.model import Caller
from agent_link_core.tools.registry import call_tool
from agent_link_presence import plugin, startup, table


def only_presence(address: str) -> App:
    """An App for ``address`` with the core and this plugin alone."""
    return App.create(env=dict(os.environ, AGENT_LINK_ADDRESS=address, AGENT_LINK_LOAD_PLUGINS="presence"))


def row(app: App, address: str) -> tuple[object, ...] | None:
    found = app.store.conn.execute("SELECT pid, source FROM presence WHERE address = ?", (address,)).fetchone()
    return None if found is None else tuple(found)


def test_the_server_records_its_configured_address_and_takes_back_a_start_record_that_was_not_it(isolated_env: Path) -> None:
    app = only_presence("team:srv")
    try:
        assert plugin.agent_link_server_tasks(app) is None  # recorded as it is called: no background task
        assert row(app, "team:srv") == (os.getpid(), "mcp")
        startup.record_at_start(dict(os.environ, AGENT_LINK_ADDRESS="team:other"))
        assert row(app, "team:other") == (os.getpid(), "mcp")
        app.caller = lambda *a, **k: Caller("fake:one", "runtime_context", "fake")  # type: ignore[method-assign]
        plugin.agent_link_server_tasks(app)  # this server serves a harness's session: the start record goes
        assert row(app, "team:other") is None
    finally:
        app.close()


def test_a_read_only_or_busy_server_records_nothing_and_says_so_only_when_busy(isolated_env: Path, monkeypatch: pytest.MonkeyPatch,
                                                                               caplog: pytest.LogCaptureFixture) -> None:
    app = only_presence("team:ro")
    try:
        caplog.set_level(logging.WARNING)
        app.read_only = AgentLinkError("state_io_error", "read-only", {"reason": "read_only"})
        plugin.agent_link_server_tasks(app)  # the core says once why it only reads
        assert row(app, "team:ro") is None and "presence of" not in caplog.text
        app.read_only = None

        def busy(*args: object, **kwargs: object) -> None:
            raise AgentLinkError("state_io_error", "database is locked", {"reason": "busy"})

        monkeypatch.setattr(table, "record", busy)
        plugin.agent_link_server_tasks(app)
        assert "presence of team:ro not recorded: database is locked" in caplog.text
        plugin.agent_link_inbox_read("team:ro", app)  # a read goes on: presence is a hint
    finally:
        app.close()


def test_a_marking_inbox_read_records_the_reader_and_a_peek_does_not(isolated_env: Path) -> None:
    app = only_presence("team:alice")
    try:
        app.inbox(Caller("team:peek", "explicit"), mark=False)
        app.inbox(Caller("team:reader", "explicit"))
        assert row(app, "team:peek") is None and row(app, "team:reader") == (None, "inbox")
        assert [s.address for s in app.hooks.present_sessions("all")] == ["team:reader"]
    finally:
        app.close()


@pytest.mark.anyio
async def test_a_send_to_a_served_plain_address_costs_one_statement_more_than_the_core_alone(isolated_env: Path) -> None:
    """tests/test_send_statements.py counts the core's (SEND_STATEMENTS); this plugin asks once whether the recipient
    was ever served, outside the write."""
    alice = only_presence("team:alice")
    try:
        table.record(alice.store, "team:bob", "mcp", os.getpid())
        spec = alice.hooks.tools()["message_agent"]
        await call_tool(alice, spec, {"to": "team:bob", "message": "first"}, {})
        seen: list[str] = []
        alice.store.conn.set_trace_callback(lambda sql: None if sql.startswith("--") else seen.append(sql))
        try:
            result, _ = await call_tool(alice, spec, {"to": "team:bob", "message": "second"}, {})
        finally:
            alice.store.conn.set_trace_callback(None)
        assert result["ok"] and "warnings" not in result, result
        assert len(seen) <= 5 and sum("FROM presence" in s for s in seen) == 1, seen
    finally:
        alice.close()
