"""A message reaches its agent one way only (issue 29): one a running wait of the recipient is
about to return is not pushed as well, whichever process pushes (plugins/waits/agent_link_waits/waits.py);
what the wait did not take is pushed when it ends; a reply that already reached the agent
another way is not repeated in the wait's result. (Real host: plugins/codex/tests.)"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent_link_core import hookimpl
from agent_link_core.app import App
from agent_link_core.harness import Delivery, Harness
from agent_link_core.model import Caller, Session
from agent_link_waits.waits import waits_of

pytestmark = pytest.mark.anyio

ALICE = Caller("stub:alice", "runtime_context", "stub")
CAROL = Caller("team:carol", "config", "team")


class Stub(Harness):
    """A host whose sessions take every push (and remember it)."""

    name = "stub"

    def __init__(self) -> None:
        self.pushed: list[str] = []

    async def get_session(self, session_id: str) -> Session | None:
        return Session(f"stub:{session_id}", "stub", session_id)

    async def deliver(self, message: dict[str, Any], envelope: str, options: Any) -> Delivery:
        self.pushed.append(message["id"])
        return Delivery(delivered=True, via="stub-push")


class Plugin:
    def __init__(self) -> None:
        self.stub = Stub()

    @hookimpl
    def agent_link_register_harnesses(self, register: Any) -> None:
        register(self.stub)


@pytest.fixture
def plugin() -> Plugin:
    return Plugin()


@pytest.fixture
def apps(plugin: Plugin) -> Any:
    """The waiting agent's server and another process's (the sender's): two Apps, one mailbox."""
    waiter, sender = App.create(extra_plugins=(("stub", plugin),)), App.create(extra_plugins=(("stub", Plugin()),))
    yield waiter, sender
    waiter.close()
    sender.close()


async def waiting(app: App, key: str) -> None:
    """Until the wait task runs (a bound for a hang, not a speed expectation)."""
    async with asyncio.timeout(30):
        while key not in waits_of(app).waiting:
            await asyncio.sleep(0.01)


async def test_a_reply_a_wait_returns_is_not_pushed_as_well(apps: Any, plugin: Plugin) -> None:
    waiter, sender = apps
    asked = await waiter.send(caller=ALICE, to="team:carol", body="ready?", anticipation="reply")
    question = asked.message["id"]
    task = asyncio.ensure_future(waits_of(waiter).wait(caller=ALICE, agent="team:carol", reply_to=question, timeout_ms=20_000, poll_ms=200))
    await waiting(waiter, f"reply:{question}")
    answered = await sender.reply(caller=CAROL, message_id=question, message="yes")  # the replier's process pushes
    got = await task
    assert got["outcome"] == "reply" and got["reply"]["id"] == answered["messageId"] and "yes" in got["reply"]["envelope"]
    assert plugin.stub.pushed == [] and sender.harnesses["stub"].pushed == []  # type: ignore[attr-defined]
    assert waiter.mailbox.stored(answered["messageId"])["delivered_via"] == "wait"
    assert waiter.store.conn.execute("SELECT COUNT(*) FROM active_waits").fetchone()[0] == 0


async def test_what_a_wait_did_not_take_is_pushed_when_it_ends(apps: Any, plugin: Plugin) -> None:
    waiter, sender = apps
    task = asyncio.ensure_future(waits_of(waiter).wait(caller=ALICE, agent="team:carol", timeout_ms=20_000, poll_ms=1000))
    await waiting(waiter, "from:team:carol")
    first = await sender.send(caller=CAROL, to="stub:alice", body="one")
    second = await sender.send(caller=CAROL, to="stub:alice", body="two")
    assert first.delivery is not None and first.delivery.state == "held_for_wait" and not first.delivery.delivered
    got = await task
    assert got["reply"]["id"] == first.message["id"]
    # the second was held for the wait too; the wait did not return it, so its end pushed it
    assert plugin.stub.pushed == [second.message["id"]]
    assert [waiter.mailbox.stored(m.message["id"])["delivered_via"] for m in (first, second)] == ["wait", "stub-push"]


async def test_without_a_wait_the_push_goes_ahead(apps: Any) -> None:
    _, sender = apps
    sent = await sender.send(caller=CAROL, to="stub:alice", body="hello")
    assert sent.delivery is not None and sent.delivery.delivered
    assert sender.harnesses["stub"].pushed == [sent.message["id"]]  # type: ignore[attr-defined]


async def test_a_reply_already_delivered_is_not_repeated_by_the_wait(apps: Any) -> None:
    waiter, sender = apps
    asked = await waiter.send(caller=ALICE, to="team:carol", body="ready?", anticipation="reply")
    answered = await sender.reply(caller=CAROL, message_id=asked.message["id"], message="yes")  # pushed: no wait ran
    assert waiter.mailbox.stored(answered["messageId"])["delivered_via"] == "stub-push"
    got = await waits_of(waiter).wait(caller=ALICE, agent="team:carol", reply_to=asked.message["id"], timeout_ms=0)
    assert got["outcome"] == "reply" and "envelope" not in got["reply"]
    assert got["reply"]["alreadyDelivered"]["via"] == "stub-push"


async def test_a_reply_a_host_accepted_is_not_repeated_by_the_wait(apps: Any) -> None:
    """A push the host took but shows later (behind a running tool call) is on its way: the
    wait says so instead of handing the reply over a second time."""
    waiter, sender = apps
    sender.harnesses["stub"].deliver = accept  # type: ignore[method-assign]
    asked = await waiter.send(caller=ALICE, to="team:carol", body="ready?", anticipation="reply")
    answered = await sender.reply(caller=CAROL, message_id=asked.message["id"], message="yes")
    got = await waits_of(waiter).wait(caller=ALICE, agent="team:carol", reply_to=asked.message["id"], timeout_ms=0)
    assert "envelope" not in got["reply"] and got["reply"]["alreadyDelivered"]["via"] == "accepted push"
    assert waiter.mailbox.stored(answered["messageId"])["first_delivered_at"] is None  # the host's echo marks it


async def accept(message: dict[str, Any], envelope: str, options: Any) -> Delivery:
    return Delivery(accepted=True)


async def test_an_inbox_read_in_another_process_leaves_a_waits_mail_to_it(apps: Any) -> None:
    from agent_link_core import reading

    waiter, reader = apps
    task = asyncio.ensure_future(waits_of(waiter).wait(caller=ALICE, agent="team:carol", timeout_ms=20_000, poll_ms=10_000))
    await waiting(waiter, "from:team:carol")
    sent = await reader.send(caller=CAROL, to="stub:alice", body="for the wait")
    read = reading.inbox(reader, ALICE, limit=10, mark=True, include_open=False)  # this process runs no wait
    assert [m["id"] for m in read["messages"]] == [] and not waits_of(reader).waiting
    got = await task
    assert got["reply"]["id"] == sent.message["id"]


async def test_a_reply_before_the_senders_wait_starts_is_held_for_it(plugin: Plugin) -> None:
    """message_agent with waitForReply notes its wait before the question is stored: an answer
    that comes between the store and the wait's start is held for the wait, never pushed."""
    import os

    from agent_link_core.tools.registry import run_tool

    waiter = App.create({**os.environ, "AGENT_LINK_ADDRESS": "stub:alice"}, extra_plugins=(("stub", plugin),))
    sender = App.create(extra_plugins=(("stub", Plugin()),))
    real_wait, early = waits_of(waiter).wait, {}

    async def answered_first(**kwargs: Any) -> dict[str, Any]:  # the answer lands before the wait runs
        early.update(await sender.reply(caller=CAROL, message_id=kwargs["reply_to"], message="at once"))
        return await real_wait(**kwargs)

    waits_of(waiter).wait = answered_first  # type: ignore[method-assign]
    try:
        spec = waiter.hooks.tools()["message_agent"]
        got = await run_tool(waiter, spec, {"to": "team:carol", "message": "ready?", "waitForReply": True, "timeoutMs": 20_000}, {})
        assert got["ok"] and got["wait"]["outcome"] == "reply" and got["wait"]["reply"]["id"] == early["messageId"], got
        assert plugin.stub.pushed == [] and sender.harnesses["stub"].pushed == []  # type: ignore[attr-defined]
        assert sender.mailbox.has_event(early["messageId"], "held_for_wait")
        assert waiter.store.conn.execute("SELECT COUNT(*) FROM active_waits").fetchone()[0] == 0
    finally:
        waiter.close()
        sender.close()


async def test_a_reply_a_wait_already_returned_is_not_pushed(apps: Any, plugin: Plugin) -> None:
    """The replier's push comes after the wait took the reply and ended its hold: the message
    is delivered (via the wait) by then, so no copy is pushed."""
    waiter, sender = apps
    asked = await waiter.send(caller=ALICE, to="team:carol", body="ready?", anticipation="reply")
    reply_row = None

    real_push = sender.outbox.push

    async def push_after_the_wait(row: Any, options: Any) -> Any:
        nonlocal reply_row
        reply_row = row
        got = await waits_of(waiter).wait(caller=ALICE, agent="team:carol", reply_to=asked.message["id"], timeout_ms=5_000, poll_ms=100)
        assert got["outcome"] == "reply"
        return await real_push(row, options)

    sender.outbox.push = push_after_the_wait  # type: ignore[method-assign]
    answered = await sender.reply(caller=CAROL, message_id=asked.message["id"], message="yes")
    assert reply_row is not None and plugin.stub.pushed == [] and sender.harnesses["stub"].pushed == []  # type: ignore[attr-defined]
    assert answered["delivery"] == "delivered"


async def test_a_reply_found_after_the_client_died_stays_in_the_inbox(apps: Any, plugin: Plugin, monkeypatch: Any) -> None:
    """A wait whose MCP client died (the server re-parented) returns into nothing: the reply it
    found is not counted as delivered, nor pushed to the gone session; the inbox still has it."""
    import os

    from agent_link_core import entry

    waiter, sender = apps
    asked = await waiter.send(caller=ALICE, to="team:carol", body="ready?", anticipation="reply")
    question = asked.message["id"]
    task = asyncio.ensure_future(waits_of(waiter).wait(caller=ALICE, agent="team:carol", reply_to=question, timeout_ms=20_000, poll_ms=200))
    await waiting(waiter, f"reply:{question}")
    monkeypatch.setattr(entry, "PARENT_PID", os.getppid() + 1)  # the client that started this process is gone
    answered = await sender.reply(caller=CAROL, message_id=question, message="yes")
    got = await task
    assert got["outcome"] == "reply" and got["reply"]["id"] == answered["messageId"]
    assert waiter.mailbox.stored(answered["messageId"])["delivered_at"] is None
    assert plugin.stub.pushed == []
    monkeypatch.setattr(entry, "PARENT_PID", os.getppid())  # the agent, served again, reads its inbox
    assert [m["id"] for m in waiter.inbox(ALICE)["messages"]] == [answered["messageId"]]


async def test_an_inbox_read_for_a_client_that_died_marks_nothing(apps: Any, monkeypatch: Any) -> None:
    """The same rule for ``read_agent_link_inbox``: a read whose MCP client is gone returns into
    nothing, so the mail it found stays undelivered for the agent's next read."""
    import os

    from agent_link_core import entry
    from agent_link_testing.tool_app import call_tool

    reader, sender = apps
    sent = await sender.send(caller=ALICE, to=CAROL.address, body="for later")  # no harness pushes to team:
    monkeypatch.setattr(reader, "caller", lambda meta=None: CAROL)
    monkeypatch.setattr(entry, "PARENT_PID", os.getppid() + 1)
    gone = await call_tool(reader, "read_agent_link_inbox")
    assert [m["id"] for m in gone["messages"]] == [sent.message["id"]]
    assert reader.mailbox.stored(sent.message["id"])["delivered_at"] is None
    monkeypatch.setattr(entry, "PARENT_PID", os.getppid())
    served = await call_tool(reader, "read_agent_link_inbox")
    assert [m["id"] for m in served["messages"]] == [sent.message["id"]]
    assert reader.mailbox.stored(sent.message["id"])["delivered_at"] is not None


def test_a_wait_of_a_zombie_or_an_ended_process_holds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A noted wait counts while its process runs: not as a zombie (an exited child not yet reaped keeps its pid), not
    once the process is gone, not past MAX_WAIT_MS; a process that may not be inspected (AccessDenied) counts as running."""
    import os
    import subprocess
    import sys
    import time

    import psutil

    from agent_link_waits import waits

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.02)
    noted = {"pid": child.pid, "started_at": waits.now_ms()}
    assert psutil.pid_exists(child.pid) and not waits._live(noted)  # what pid_exists alone would count as alive
    child.wait()
    assert not waits._live(noted)
    assert waits._live({"pid": os.getpid(), "started_at": waits.now_ms()})
    assert not waits._live({"pid": os.getpid(), "started_at": waits.now_ms() - waits.MAX_WAIT_MS - 1})

    def denied(pid: int) -> Any:
        raise psutil.AccessDenied(pid)

    monkeypatch.setattr(psutil, "Process", denied)
    assert waits._live(noted)


@pytest.mark.parametrize("ending", ["ctrl-c", "closed"])
async def test_a_wait_stopped_by_a_ctrl_c_or_closed_pushes_nothing(apps: Any, plugin: Plugin, ending: str) -> None:
    """A wait that a Ctrl-C stops, or that is closed unfinished, ends as a cancelled one does: what it held stays
    queued for the next read, push or reminder (pushing then would act for a caller who has gone, and a
    coroutine closed at exit would push through a closed store)."""
    waiter, sender = apps
    coro = waits_of(waiter).wait(caller=ALICE, agent="team:carol", timeout_ms=20_000, poll_ms=1000)
    coro.send(None)  # begun: the wait is registered and suspended in its first sleep
    held = await sender.send(caller=CAROL, to="stub:alice", body="held for the wait")
    assert held.delivery is not None and held.delivery.state == "held_for_wait"
    if ending == "ctrl-c":
        with pytest.raises(KeyboardInterrupt):
            coro.throw(KeyboardInterrupt())
    else:
        coro.close()
    assert plugin.stub.pushed == [] and sender.harnesses["stub"].pushed == []  # type: ignore[attr-defined]
    assert waiter.mailbox.stored(held.message["id"])["delivered_via"] is None
    assert waiter.store.conn.execute("SELECT COUNT(*) FROM active_waits").fetchone()[0] == 0


def test_a_wait_is_noted_while_another_process_writes(apps: Any) -> None:
    """The note of a wait (or of a ``waitForReply`` send) waits out another process's write, as storing the reply it
    waits for is: a note refused at once under that contention let the reply be pushed into the session as well as
    returned by the wait (seen in CI with a real Codex app-server on a loaded machine)."""
    import sqlite3
    import threading

    from agent_link_waits.waits import live_keys

    waiter, _ = apps
    other = sqlite3.connect(waiter.store.path, isolation_level=None, check_same_thread=False)  # another process's write
    other.execute("BEGIN IMMEDIATE")
    later = threading.Timer(0.3, other.execute, ("COMMIT",))
    later.start()
    try:
        waits_of(waiter).hold("stub:alice", "01M946W8EZCNHJWE2ZAZZ3MFZM")
    finally:
        later.join()
        other.close()
    assert live_keys(waiter.store, "stub:alice") == {"reply:01M946W8EZCNHJWE2ZAZZ3MFZM"}


@pytest.mark.parametrize("written", [True, False])
async def test_a_reply_a_wait_returned_stays_held_until_its_answer_is_written(apps: Any, plugin: Plugin, written: bool) -> None:
    """Over an MCP transport a wait's reply is marked once the answer is written (``AFTER_WRITE``): until then its note
    holds that reply alone, so a replier's push in between leaves it (seen in CI with a real Codex app-server: the reply
    was steered into the turn as well as returned). The mark ends the note; an answer never written lets it lapse."""
    from agent_link_core.tools.registry import AFTER_WRITE
    from agent_link_waits import waits as waits_module

    waiter, sender = apps
    asked = await waiter.send(caller=ALICE, to="team:carol", body="ready?", anticipation="reply")
    other = await sender.send(caller=CAROL, to="stub:alice", body="unrelated, pushed as usual")
    later: list[Any] = []
    token = AFTER_WRITE.set(later)  # the transport's, in the context of the tool call's handler
    try:
        task = asyncio.ensure_future(waits_of(waiter).wait(caller=ALICE, agent="team:carol", reply_to=asked.message["id"],
                                                           timeout_ms=20_000, poll_ms=100))
    finally:
        AFTER_WRITE.reset(token)
    real_push, reply_row = sender.outbox.push, None

    async def push_after_the_wait(row: Any, options: Any) -> Any:
        nonlocal reply_row
        reply_row = row
        assert (await task)["reply"]["id"] == row["id"]  # returned, its answer not yet written
        return await real_push(row, options)

    sender.outbox.push = push_after_the_wait  # type: ignore[method-assign]
    answered = await sender.reply(caller=CAROL, message_id=asked.message["id"], message="yes")
    assert reply_row is not None and sender.mailbox.has_event(answered["messageId"], "held_for_wait"), answered
    assert plugin.stub.pushed == [] and sender.harnesses["stub"].pushed == [other.message["id"]]  # type: ignore[attr-defined]
    if written:
        for mark in later:
            mark()
        assert waiter.mailbox.stored(answered["messageId"])["delivered_via"] == "wait"
        assert waiter.store.conn.execute("SELECT COUNT(*) FROM active_waits").fetchone()[0] == 0
    else:  # the answer never reached the client: once the note lapses the reply is left to the next read or push
        assert waiter.mailbox.stored(answered["messageId"])["delivered_via"] is None
        waiter.store.conn.execute("UPDATE active_waits SET started_at = started_at - ?", (waits_module.TAKEN_HOLD_MS + 1,))
        assert waits_module.held(waiter, "stub:alice") == set()
