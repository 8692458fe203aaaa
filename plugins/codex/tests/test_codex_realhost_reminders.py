"""Reminder turns in a REAL Codex thread (the pinned Codex CLI app-server, stub Responses API).

The codex plugin's reminder sweep (``agent_link_server_tasks`` → :meth:`CodexHarness.remind_every`)
runs only while an MCP server serves, so an in-process App serves one MCP connection over memory
streams (:func:`agent_link_core.server.serve_streams`, as ``agent-link mcp`` does over stdio); its
only endpoint is the app-server's socket. Two knobs keep the test short: the sweep's period
(:data:`agent_link_codex.harness.REMINDER_SWEEP_S`, 15 s) is set to a fraction of a second before
the server starts, and the message's first delivery is moved back by the reminder interval (the
core's ``AGENT_LINK_REMINDER_INTERVAL_MS``, at least 30 s) so the first reminder is due at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp.shared.message import SessionMessage

from agent_link_codex import harness as harness_mod
from agent_link_codex.appserver import AppServerClient
from agent_link_core.app import App
from agent_link_core.envelope import reminder_notice
from agent_link_core.model import Caller
from agent_link_core.server import serve_streams
from agent_link_testing.codex_host import CodexAppServer
from agent_link_testing.responses_stub import ResponsesStub

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(90)]

WAIT_MS = 15_000
WAIT_S = WAIT_MS / 1000
SWEEP_S = 0.2
ALICE = Caller("test:alice", "config", "test")


@asynccontextmanager
async def serving(host: CodexAppServer, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[App]:
    """An App serving one MCP connection (its server tasks running, the sweep every :data:`SWEEP_S`); at the end the
    client leaves (the server cancels its tasks, bounded by :data:`WAIT_S`) and the App closes."""
    monkeypatch.setenv("AGENT_LINK_CODEX_SOCK", str(host.socket_path))
    monkeypatch.setenv("CODEX_HOME", str(host.codex_home))
    monkeypatch.setenv("AGENT_LINK_CODEX_AUTOSTART", "0")
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "claude roles receipts")
    monkeypatch.setattr(harness_mod, "REMINDER_SWEEP_S", SWEEP_S)
    app = App.create()
    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    server_writes, from_server = anyio.create_memory_object_stream[SessionMessage](16)
    server = asyncio.create_task(serve_streams(app, server_reads, server_writes))
    try:
        yield app
    finally:
        await to_server.aclose()  # the client leaves: the server ends and cancels its tasks
        try:
            await asyncio.wait_for(server, WAIT_S)
        finally:
            from_server.close()
            await app.aclose()


def item_text(item: dict[str, Any]) -> str:
    return "".join(part.get("text", "") for part in item.get("content") or [] if isinstance(part, dict))


async def user_items(client: AppServerClient, thread_id: str) -> list[dict[str, Any]]:
    page = await client.request("thread/items/list", {"threadId": thread_id, "limit": 100}, timeout_ms=WAIT_MS)
    return [e["item"] for e in page["data"] if e["item"]["type"] == "userMessage"]


async def test_due_reminder_starts_one_turn_in_the_idle_thread(host: CodexAppServer, stub: ResponsesStub,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    async with await AppServerClient.connect_unix(host.socket_path, refuse_server_requests=True) as raw, \
            serving(host, monkeypatch) as app:
        await raw.initialize("someone-else", "0.0.1", timeout_ms=WAIT_MS)
        await reminded_once(app, raw, stub)


async def reminded_once(app: App, raw: AppServerClient, stub: ResponsesStub) -> None:
    thread_id = str((await raw.request("thread/start", {}, timeout_ms=WAIT_MS))["thread"]["id"])
    address = f"codex:{thread_id}"
    async with raw.subscription(thread_id=thread_id) as sub:
        # the first delivery: a turn carrying the envelope, which the thread finishes without a resolution
        outcome = await app.send(caller=ALICE, to=address, body="Please review PR 12", anticipation="reply")
        message_id = outcome.message["id"]
        assert outcome.delivery is not None and outcome.delivery.delivered and outcome.delivery.fields["action"] == "started_turn"
        await sub.wait_for(lambda n: n.method == "turn/completed", timeout_ms=WAIT_MS)
        await asyncio.sleep(3 * SWEEP_S)
        assert not app.mailbox.due_reminders(address)  # not due for another interval: no reminder yet
        assert app.store.conn.execute("SELECT COUNT(*) FROM reminders").fetchone()[0] == 0

        # the reminder comes due: first delivery one interval ago
        back = app.config.reminder_interval_ms
        with app.store.write() as conn:
            conn.execute("UPDATE messages SET first_delivered_at = first_delivered_at - ?, delivered_at = delivered_at - ? WHERE id = ?",
                         (back, back, message_id))
        assert app.mailbox.due_reminders(address)
        expected = reminder_notice(1, [ALICE.address], 1, app.config.reminder_limit)

        # the sweep starts a turn in the real thread whose input is the reminder, and the model gets it
        try:
            started = await sub.wait_for(lambda n: n.method == "turn/started", timeout_ms=WAIT_MS)
        except TimeoutError:
            pytest.fail(f"no turn started in the thread within {WAIT_S:g} s of the reminder coming due (is the sweep running?)")
        request = await asyncio.to_thread(stub.wait_for, lambda r: r.contains("agent-link reminder 1 of"), WAIT_S)
        assert request.thread_id == thread_id and request.user_texts()[-1] == expected
        await sub.wait_for(lambda n: n.method == "turn/completed" and n.params["turn"]["id"] == started.params["turn"]["id"],
                           timeout_ms=WAIT_MS)

    # more sweeps over the idle thread: the reminder was claimed and shown once
    await asyncio.sleep(5 * SWEEP_S)
    items = await user_items(raw, thread_id)
    assert [i.get("clientId") for i in items][:1] == [message_id] and len(items) == 2, items
    assert item_text(items[1]) == expected and items[1].get("clientId") is None  # the reminder, never the body
    rows = app.store.conn.execute("SELECT n, via, to_addr FROM reminders WHERE message_id = ?", (message_id,)).fetchall()
    assert [tuple(r) for r in rows] == [(1, "codex-turn", address)]
    row = app.mailbox.get_row(message_id)
    assert row is not None and app.mailbox.state(row).reminder_count == 1
    assert sum(r.contains("agent-link reminder") and r.user_texts()[-1] == expected for r in stub.responses_requests()) == 1
