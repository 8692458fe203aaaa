"""What waits promise (issue 18, "Waits"), through the tool handlers in process (the core's and this plugin's).

* ``wait_for_agent {agent}`` returns unread mail from that agent first: mail that arrived
  while the waiter's server was down, or between two waits.
* ``message_agent`` with ``waitForReply`` keeps the whole call inside the bound one call may
  take, push time included; a wait cut short still carries the message id, and a later
  ``wait_for_agent {replyToMessageId}`` picks the reply up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_core.harness import Delivery, Harness, SessionListing
from agent_link_core.model import Session
from agent_link_core.tools.registry import run_tool
from agent_link_waits import tools as wait_tools
from agent_link_waits.waits import waits_of

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


class SlowHarness(Harness):
    """One session, ``slow:target``, whose every push takes ``delay_s`` and then lands."""

    name = "slow"

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    async def list_sessions(self, *, include_archived: bool = False, limit: int = 200) -> SessionListing:
        return SessionListing([Session("slow:target", "slow", "target", title="slow target")], {"available": True, "reason": None})

    async def get_session(self, session_id: str) -> Session | None:
        return (await self.list_sessions()).sessions[0] if session_id == "target" else None

    async def deliver(self, message: dict[str, Any], envelope: str, options: Any) -> Delivery:
        await asyncio.sleep(self.delay_s)
        return Delivery(delivered=True, via="slow", evidence={"echo": message["id"]})


async def call(app: App, tool: str, **arguments: Any) -> dict[str, Any]:
    return await run_tool(app, app.hooks.tools()[tool], arguments, {})


async def test_wait_for_agent_returns_unread_mail_first(make_app: Callable[..., App]) -> None:
    bob = make_app("test:bob")
    # Bob writes twice while Alice's server is down.
    first = await call(bob, "message_agent", to="test:alice", message="sent while you were away")
    second = await call(bob, "message_agent", to="test:alice", message="and another")
    alice = make_app("test:alice")
    got = await call(alice, "wait_for_agent", agent="test:bob", timeoutMs=0)
    assert got["outcome"] == "reply" and got["timedOut"] is False and got["arrivedBeforeWait"] is True
    assert got["reply"]["id"] == first["messageId"] and "while you were away" in got["reply"]["envelope"]
    # The next wait returns the other unread one, not a timeout.
    got = await call(alice, "wait_for_agent", agent="test:bob", timeoutMs=0)
    assert got["reply"]["id"] == second["messageId"] and got["arrivedBeforeWait"] is True
    # Returned mail counts as read: nothing is left, and a wait then times out.
    got = await call(alice, "wait_for_agent", agent="test:bob", timeoutMs=0)
    assert got["outcome"] == "timeout" and got["timedOut"] is True
    # Mail between two waits is not lost either, and mail read in the inbox is not returned again.
    third = await call(bob, "message_agent", to="test:alice", message="between waits")
    await call(bob, "message_agent", to="test:alice", message="read in the inbox")
    inbox_first = await call(alice, "wait_for_agent", agent="test:bob", timeoutMs=0)
    assert inbox_first["reply"]["id"] == third["messageId"]
    await call(alice, "read_agent_link_inbox")
    got = await call(alice, "wait_for_agent", agent="test:bob", timeoutMs=0)
    assert got["outcome"] == "timeout"


async def test_wait_for_reply_fits_its_bound_push_included(make_app: Callable[..., App], monkeypatch: pytest.MonkeyPatch) -> None:
    # A small per-call bound stands in for the 50 s one; the push takes most of it.
    monkeypatch.setattr(wait_tools, "MAX_WAIT_PER_CALL_MS", 5000)
    alice = make_app("test:alice", SlowHarness(delay_s=1.0))
    sent = await call(alice, "message_agent", to="slow:target", message="are you there?", waitForReply=True, timeoutMs=60000,
                      pollIntervalMs=250)
    assert sent["ok"] is True and sent["delivery"] == "delivered"
    message_id = sent["messageId"]
    wait = sent["wait"]
    assert wait["outcome"] == "timeout" and wait["sendMs"] >= 1000
    [warning] = [w for w in sent["warnings"] if w["code"] == "wait_shortened"]
    assert warning["details"]["messageId"] == message_id and message_id in warning["message"]
    assert warning["details"]["waitedAtMostMs"] == 5000 - warning["details"]["sendMs"]

    # The recipient answers later; a wait on the message id picks the reply up.
    target = make_app("slow:target")
    await call(target, "reply_agent_link_message", messageId=message_id, message="yes, here")
    got = await call(alice, "wait_for_agent", agent="slow:target", replyToMessageId=message_id, timeoutMs=0)
    assert got["outcome"] == "reply" and "yes, here" in got["reply"]["envelope"]


async def test_wait_for_reply_within_the_bound_is_not_shortened(make_app: Callable[..., App]) -> None:
    alice = make_app("test:alice", SlowHarness(delay_s=0))
    sent = await call(alice, "message_agent", to="slow:target", message="quick", waitForReply=True, timeoutMs=0)
    assert sent["wait"]["outcome"] == "timeout" and "warnings" not in sent


async def test_a_push_longer_than_the_bound_goes_on_and_the_call_returns_its_id(make_app: Callable[..., App],
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wait_tools, "MAX_WAIT_PER_CALL_MS", 300)
    alice = make_app("test:alice", SlowHarness(delay_s=2.0))
    sent = await call(alice, "message_agent", to="slow:target", message="slow host", waitForReply=True)
    assert sent["ok"] is True and sent["deliveryState"] == "pushing" and sent["wait"]["timedOut"] is True
    message_id = sent["messageId"]
    [warning] = [w for w in sent["warnings"] if w["code"] == "push_still_running"]
    assert warning["details"]["messageId"] == message_id
    # the push finishes after the call returned, and the message counts as delivered then
    for _ in range(300):
        row = alice.mailbox.get_row(message_id)
        if row is not None and row["first_delivered_at"] is not None:
            break
        await asyncio.sleep(0.1)
    assert row is not None and row["delivered_via"] == "slow"
    target = make_app("slow:target")
    await call(target, "reply_agent_link_message", messageId=message_id, message="late but here")
    got = await call(alice, "wait_for_agent", agent="slow:target", replyToMessageId=message_id, timeoutMs=0)
    assert got["outcome"] == "reply" and "late but here" in got["reply"]["envelope"]


async def test_the_inbox_leaves_a_reply_to_the_wait_that_holds_it(make_app: Callable[..., App]) -> None:
    alice = make_app("test:alice")
    bob = make_app("test:bob")
    asked = await call(alice, "message_agent", to="test:bob", message="ready?", anticipation="reply")
    chatter = await call(bob, "message_agent", to="test:alice", message="unrelated news")
    waiting = asyncio.create_task(call(alice, "wait_for_agent", agent="test:bob", replyToMessageId=asked["messageId"],
                                       timeoutMs=1500, pollIntervalMs=10000))
    while f"reply:{asked['messageId']}" not in waits_of(alice).waiting:
        await asyncio.sleep(0)
    replied = await call(bob, "reply_agent_link_message", messageId=asked["messageId"], message="yes")

    peek = await call(alice, "read_agent_link_inbox", markAsDelivered=False)
    assert [m["id"] for m in peek["messages"]] == [chatter["messageId"]]
    assert (peek["heldByActiveWait"], peek["remainingCount"]) == (1, 0) and "yes" not in peek["renderedBlock"]
    read = await call(alice, "read_agent_link_inbox")
    assert read["markedDelivered"] == [chatter["messageId"]] and read["heldByActiveWait"] == 1 and read["remainingCount"] == 0
    assert alice.mailbox.get_row(replied["messageId"])["delivered_at"] is None  # still the wait's to return

    got = await waiting
    assert got["outcome"] == "reply" and got["reply"]["id"] == replied["messageId"]
    after = await call(alice, "read_agent_link_inbox")
    assert after["heldByActiveWait"] == 0 and replied["messageId"] not in [m["id"] for m in after["messages"] if m["open"]]


async def test_a_wait_that_ends_without_the_reply_hands_it_to_the_inbox(make_app: Callable[..., App]) -> None:
    alice = make_app("test:alice")
    bob = make_app("test:bob")
    asked = await call(alice, "message_agent", to="test:bob", message="ready?", anticipation="reply")
    waiting = asyncio.create_task(call(alice, "wait_for_agent", agent="test:bob", replyToMessageId=asked["messageId"],
                                       timeoutMs=30000, pollIntervalMs=10000))
    while f"reply:{asked['messageId']}" not in waits_of(alice).waiting:
        await asyncio.sleep(0)
    replied = await call(bob, "reply_agent_link_message", messageId=asked["messageId"], message="yes")
    assert (await call(alice, "read_agent_link_inbox", markAsDelivered=False))["heldByActiveWait"] == 1
    waiting.cancel()  # the client gave up on the call
    with pytest.raises(asyncio.CancelledError):
        await waiting
    read = await call(alice, "read_agent_link_inbox")
    assert read["heldByActiveWait"] == 0 and read["markedDelivered"] == [replied["messageId"]] and "yes" in read["renderedBlock"]


async def test_a_wait_on_an_fyi_message_says_no_answer_is_expected(make_app: Callable[..., App]) -> None:
    alice = make_app("test:alice")
    fyi = await call(alice, "message_agent", to="test:bob", message="for your information")
    got = await call(alice, "wait_for_agent", agent="test:bob", replyToMessageId=fyi["messageId"], timeoutMs=0)
    assert got["outcome"] == "timeout"
    assert [(w["code"], w["details"]) for w in got["warnings"]] == [
        ("no_answer_expected", {"messageId": fyi["messageId"], "anticipation": "fyi"})]
    # a message that asks for an answer gets no such warning, and an fyi that was answered ends the wait as usual
    asked = await call(alice, "message_agent", to="test:bob", message="a question", anticipation="reply")
    got = await call(alice, "wait_for_agent", agent="test:bob", replyToMessageId=asked["messageId"], timeoutMs=0)
    assert got["outcome"] == "timeout" and "warnings" not in got
    bob = make_app("test:bob")
    await call(bob, "reply_agent_link_message", messageId=fyi["messageId"], message="thanks anyway")
    got = await call(alice, "wait_for_agent", agent="test:bob", replyToMessageId=fyi["messageId"], timeoutMs=0)
    assert got["outcome"] == "reply" and "warnings" not in got


async def test_a_wait_whose_hookspec_cannot_load_leaves_the_send_with_one_warning(make_app: Callable[..., App],
                                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``waitForReply`` when the plugin's own hookspec module cannot be imported (its wait hook is then unspecified and
    answers ``[]``): the message is sent once and the answer says the wait failed, with no second fault of the send."""
    import sys

    monkeypatch.setitem(sys.modules, "agent_link_waits.hookspecs", None)  # importing it raises ImportError
    alice = make_app("test:alice")
    sent = await call(alice, "message_agent", to="test:bob", message="are you there?", waitForReply=True, timeoutMs=1000)
    assert sent["ok"] and "wait" not in sent and "plugin_failed" in [w["code"] for w in sent["warnings"]], sent
    assert alice.mailbox.get_row(sent["messageId"]) is not None
    assert not [p for p in alice.hooks.boundary.report() if p["hook"] == "agent_link_tool_send"], alice.hooks.boundary.report()
