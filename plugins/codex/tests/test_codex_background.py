"""Background delivery and reminder turns against a scripted app-server: only over an open
connection, only to threads seen idle, queued mail aged 5 s to 1 h, one turn per thread per
pass; reminder turns through the harness's reminder sweep, each reminder number claimed once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent_link_codex import harness as harness_mod
from agent_link_core.app import App
from agent_link_core.mailbox import new_message_id
from agent_link_core.records import OutgoingMessage
from agent_link_core.model import Caller
from agent_link_core.store import now_ms

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

TID = "01a22a93-0000-7000-8000-0000000000dd"
ADDRESS = f"codex:{TID}"
ALICE = Caller("test:alice", "config", "test")


@pytest.fixture
async def setup(mini: Any, monkeypatch: pytest.MonkeyPatch, isolated_env: Path) -> AsyncIterator[tuple[App, Any, list[dict]]]:
    turns: list[dict[str, Any]] = []

    async def start(method: str, params: dict[str, Any]) -> dict[str, Any]:
        turns.append(params)
        cid = params.get("clientUserMessageId")
        if cid:
            item = {"type": "userMessage", "id": f"i{len(turns)}", "clientId": cid}
            asyncio.get_running_loop().call_later(0.01, lambda: asyncio.ensure_future(
                mini.notify("item/completed", {"threadId": TID, "turnId": "t", "item": item})))
        return {"turn": {"id": f"t{len(turns)}", "status": "inProgress"}}

    thread = {"id": TID, "status": {"type": "idle"}, "path": "", "cwd": "/w"}
    mini.handlers.update({"thread/read": lambda m, p: {"thread": thread}, "thread/resume": lambda m, p: {"thread": thread},
                          "turn/start": start})
    monkeypatch.setenv("AGENT_LINK_CODEX_SOCK", str(mini.path))
    monkeypatch.setenv("AGENT_LINK_CODEX_AUTOSTART", "0")
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "claude roles receipts")
    app = App.create()
    harness = app.harnesses["codex"]
    try:
        yield app, harness, turns
    finally:
        await app.aclose()


def store(app: App, *, age_ms: int, delivered: bool = False, anticipation: str = "reply") -> str:
    row, _ = app.mailbox.store_message(OutgoingMessage(new_message_id(), ALICE, ADDRESS, ADDRESS, "queued body", anticipation, None, None))
    at = now_ms() - age_ms
    with app.store.write() as conn:
        conn.execute("UPDATE messages SET sent_at = ? WHERE id = ?", (at, row["id"]))
        if delivered:
            conn.execute("UPDATE messages SET delivered_at = ?, first_delivered_at = ?, open = 1 WHERE id = ?", (at, at, row["id"]))
    return row["id"]


async def test_background_never_connects_and_needs_a_thread_seen_idle(setup: Any, mini: Any) -> None:
    app, harness, turns = setup
    store(app, age_ms=60_000)
    assert await harness.background_pass(app) == {"pushed": 0, "rechecked": 0}
    assert mini.requests == []  # no connection was opened for it
    await harness.service.connect(spawn=False)
    assert await harness.background_pass(app) == {"pushed": 0, "rechecked": 0}  # not seen idle yet
    assert turns == []


async def test_queued_mail_by_age_then_reminders(setup: Any, mini: Any) -> None:
    app, harness, turns = setup
    too_new = store(app, age_ms=1_000)
    too_old = store(app, age_ms=2 * 3_600_000)
    oldest = store(app, age_ms=120_000)
    second = store(app, age_ms=60_000)
    await harness.service.connect(spawn=False)
    await mini.notify("thread/status/changed", {"threadId": TID, "status": {"type": "idle"}})
    await asyncio.sleep(0.1)
    assert (await harness.background_pass(app))["pushed"] == 1  # one turn per thread per pass, oldest first
    assert [t["clientUserMessageId"] for t in turns] == [oldest]
    assert app.mailbox.get_row(oldest)["delivered_via"] == "codex-turn"
    assert (await harness.background_pass(app))["pushed"] == 1
    assert [t["clientUserMessageId"] for t in turns] == [oldest, second]
    assert (await harness.background_pass(app))["pushed"] == 0
    for mid in (too_new, too_old):  # left for the inbox (or a later pass, once 5 s old)
        assert app.mailbox.get_row(mid)["first_delivered_at"] is None
    # delivered, unresolved mail gets reminder turns when due, each number once
    app.mailbox.resolve(oldest, Caller(ADDRESS, "runtime_context", "codex"), "done")
    with app.store.write() as conn:
        conn.execute("UPDATE messages SET first_delivered_at = first_delivered_at - 60000, delivered_at = delivered_at - 60000 WHERE id = ?",
                     (second,))
    assert (await harness.background_pass(app))["pushed"] == 0
    assert await harness.remind(app) == 1
    reminder = turns[-1]
    assert reminder["turnTrigger"] == "agent-link-reminder" and "clientUserMessageId" not in reminder
    assert "reminder 1 of 3" in reminder["input"][0]["text"] and "queued body" not in reminder["input"][0]["text"]
    assert app.mailbox.state(app.mailbox.get_row(second)).reminder_count == 1
    assert await harness.remind(app) == 0


async def test_reminder_turns_can_be_switched_off(setup: Any, mini: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    app, harness, turns = setup
    harness.values["AGENT_LINK_CODEX_REMINDERS"] = False
    store(app, age_ms=120_000, delivered=True)
    monkeypatch.setattr(harness_mod, "QUEUED_MIN_AGE_MS", 0)
    await harness.service.connect(spawn=False)
    await mini.notify("thread/status/changed", {"threadId": TID, "status": {"type": "idle"}})
    await asyncio.sleep(0.1)
    assert await harness.background_pass(app) == {"pushed": 0, "rechecked": 0}
    assert await harness.remind(app) == 0
    assert turns == []


async def test_reminder_turns_only_in_threads_seen_idle(setup: Any, mini: Any) -> None:
    app, harness, turns = setup
    mid = store(app, age_ms=120_000, delivered=True)
    assert await harness.remind(app) == 0  # no open connection: never connects for a reminder
    await harness.service.connect(spawn=False)
    assert await harness.remind(app) == 0  # connected, but the thread was never seen idle
    assert turns == [] and app.mailbox.state(app.mailbox.get_row(mid)).reminder_count == 0


async def test_granted_overrides_travel_with_queued_mail(setup: Any, mini: Any) -> None:
    app, harness, turns = setup
    mid = store(app, age_ms=60_000)
    granted = [{"setting": "effort", "previous": "low", "current": "high", "grantedBy": "launcher"}]
    with app.store.write() as conn:
        conn.execute("UPDATE messages SET metadata = json_set(metadata, '$.codexSwitches', json(?)) WHERE id = ?",
                     (__import__("json").dumps(granted), mid))
    await harness.service.connect(spawn=False)
    await mini.notify("thread/status/changed", {"threadId": TID, "status": {"type": "idle"}})
    await asyncio.sleep(0.1)
    assert (await harness.background_pass(app))["pushed"] == 1
    assert turns[-1]["clientUserMessageId"] == mid and turns[-1].get("effort") == "high"


async def test_a_failing_push_is_logged_and_the_sweep_goes_on(setup: Any, caplog: pytest.LogCaptureFixture,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    app, harness, _ = setup
    store(app, age_ms=120_000, delivered=True)
    row, _ = app.mailbox.store_message(OutgoingMessage(new_message_id(), ALICE, "test:bob", "test:bob", "x", "reply", None, None))
    app.mailbox.mark_delivered(row["id"], "test-push")
    with app.store.write() as conn:  # due, but not a Codex thread's: never offered
        conn.execute("UPDATE messages SET first_delivered_at = first_delivered_at - 120000 WHERE id = ?", (row["id"],))
    assert app.mailbox.due_reminders("test:bob")

    async def broken(app: App, address: str) -> bool:
        assert address == ADDRESS
        raise RuntimeError("push bug")

    monkeypatch.setattr(harness, "push_reminders", broken)
    assert await harness.remind(app) == 0
    assert "push bug" in caplog.text
