"""Message lifecycle rules: labels, delivery on evidence, resolution once, reminders, expiry."""

from __future__ import annotations

import sys
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from agent_link_core import mailbox as mailbox_mod
from agent_link_core.config import load_config
from agent_link_core.errors import AgentLinkError
from agent_link_core.mailbox import Mailbox, check_body, check_labels, new_message_id
from agent_link_core.records import OutgoingMessage
from agent_link_core.model import Caller
from agent_link_core.store import Store

ALICE = Caller("test:alice", "config", "test")
BOB = Caller("test:bob", "config", "test")
INTERVAL = 30_000


class Clock:
    def __init__(self, start: int = 1_800_000_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(mailbox_mod, "now_ms", c)
    return c


def make_box(env_extra: dict[str, str] | None = None) -> Mailbox:
    import os

    env = dict(os.environ)
    env.update(env_extra or {})
    config = load_config(env)
    return Mailbox(Store(config.db_path), config)


@pytest.fixture
def box(clock: Clock) -> Mailbox:
    return make_box()


def send(box: Mailbox, anticipation: str = "reply", reply_by_ms: int | None = None, sender: Caller = ALICE, to: str = "test:bob") -> str:
    msg = OutgoingMessage(new_message_id(), sender, to, to, "please answer", anticipation, reply_by_ms, None)
    row, created = box.store_message(msg)
    assert created
    return row["id"]


def status(box: Mailbox, mid: str, now: int) -> str | None:
    return box.state(box.get_row(mid), now).status


def test_labels_default_and_rules() -> None:
    now = 1_000_000
    assert check_labels(None, None, False, now) == ("fyi", None)
    assert check_labels(None, None, True, now) == ("reply", None)
    with pytest.raises(AgentLinkError) as e:
        check_labels("fyi", None, True, now)
    assert e.value.details["errors"][0]["path"] == "waitForReply"
    with pytest.raises(AgentLinkError) as e:
        check_labels("maybe", None, False, now)
    assert e.value.details["errors"][0]["rule"] == "enum"


def test_reply_by_needs_zone_and_lead() -> None:
    now = int(datetime.now(timezone.utc).timestamp() * 1000)
    soon = (datetime.now(timezone.utc) + timedelta(seconds=10)).isoformat()
    later = (datetime.now(timezone.utc) + timedelta(minutes=5)).isoformat()
    naive = (datetime.now() + timedelta(minutes=5)).replace(tzinfo=None).isoformat()
    assert check_labels("reply", later, False, now)[1] is not None
    rules = {}
    for value in (soon, naive, "tomorrow"):
        with pytest.raises(AgentLinkError) as e:
            check_labels("reply", value, False, now)
        rules[value] = e.value.details["errors"][0]["rule"]
    assert rules == {soon: "minimum", naive: "timezone", "tomorrow": "format"}
    with pytest.raises(AgentLinkError) as e:
        check_labels("fyi", later, False, now)
    assert e.value.details["errors"][0]["rule"] == "fyi_conflict"


def test_body_limit_counts_utf8_bytes() -> None:
    assert check_body("a" * 65536)
    with pytest.raises(AgentLinkError) as e:
        check_body("a" * 65537)
    assert e.value.code == "body_too_large"
    assert e.value.details == {"limitBytes": 65536, "actualBytes": 65537}
    with pytest.raises(AgentLinkError) as e:
        check_body("é" * 32769)  # 2 bytes each: 65538 bytes in 32769 characters
    assert e.value.details["actualBytes"] == 65538


@pytest.mark.parametrize("body", ["", "   \n\t", "\x00", " \x00 ", "\u200b\u200b", "\ufeff", "\u2028"])
def test_a_body_that_shows_nothing_is_refused(body: str) -> None:
    """NUL-only or zero-width-only text arrived empty (the envelope drops or escapes those): refused as blank text is."""
    with pytest.raises(AgentLinkError) as e:
        check_body(body)
    assert e.value.code == "invalid_arguments" and e.value.details["errors"][0]["path"] == "message"
    assert "visible text" in e.value.details["errors"][0]["expected"]


@pytest.mark.parametrize("body", ["hi", "\u200bhi", " x ", "\x1b[31m", "字"])
def test_a_body_with_one_visible_character_is_taken(body: str) -> None:
    assert check_body(body) == body


def test_lone_surrogate_never_stored(box: Mailbox) -> None:
    body = check_body("a\ud800b")
    msg = OutgoingMessage(new_message_id(), ALICE, "test:bob", "test:bob", body, "fyi", None, None)
    row, _ = box.store_message(msg)
    assert row["body"] == "a\ufffdb"


def test_delivery_only_on_evidence(box: Mailbox) -> None:
    mid = send(box)
    assert box.state(box.get_row(mid)).delivery == "queued"
    assert box.mark_delivered(mid, "test-push", {"echo": mid})
    assert not box.mark_delivered(mid, "test-push")  # second evidence changes nothing
    row = box.get_row(mid)
    assert box.state(row).delivery == "delivered" and row["delivered_via"] == "test-push"


def test_resolution_once_and_by_recipient_only(box: Mailbox) -> None:
    mid = send(box)
    with pytest.raises(AgentLinkError) as e:
        box.resolve(mid, ALICE, "done")
    assert e.value.code == "wrong_recipient"
    assert e.value.details == {"messageId": mid, "expected": "test:bob", "caller": "test:alice"}
    res, _ = box.resolve(mid, BOB, "done")
    assert res["kind"] == "done" and not res["late"]
    with pytest.raises(AgentLinkError) as e:
        box.resolve(mid, BOB, "reply")
    assert e.value.code == "already_resolved"
    assert e.value.details["status"] == "done"


def test_reminder_schedule_then_unresolved(box: Mailbox, clock: Clock) -> None:
    mid = send(box)
    t0 = clock.now
    assert box.due_reminders("test:bob", t0 + 10 * INTERVAL) == []  # undelivered: never reminded
    box.mark_delivered(mid, "test-push")
    assert box.due_reminders("test:bob", t0 + INTERVAL - 1) == []
    for n in (1, 2, 3):
        clock.advance(INTERVAL)
        due = box.due_reminders("test:bob", clock.now)
        assert [r["id"] for r, _ in due] == [mid]
        assert due[0][1].reminder_count == n - 1
        assert box.record_reminder(mid, n, "test-hook", "test:bob")
        assert not box.record_reminder(mid, n, "test-hook", "test:bob")  # exactly once
        assert status(box, mid, clock.now) == "pending"
    # cap reached: no more reminders, unresolved one interval after the last one
    assert box.due_reminders("test:bob", clock.now + 10 * INTERVAL) == []
    assert status(box, mid, clock.now + INTERVAL - 1) == "pending"
    assert status(box, mid, clock.now + INTERVAL) == "unresolved"
    clock.advance(INTERVAL)
    res, _ = box.resolve(mid, BOB, "reply")
    assert res["late"] is True


def test_limit_zero_unresolved_one_interval_after_delivery(clock: Clock) -> None:
    box = make_box({"AGENT_LINK_REMINDER_LIMIT": "0"})
    mid = send(box)
    box.mark_delivered(mid, "test-push")
    assert box.due_reminders("test:bob", clock.now + INTERVAL) == []
    assert status(box, mid, clock.now + INTERVAL - 1) == "pending"
    assert status(box, mid, clock.now + INTERVAL) == "unresolved"


def test_expired_after_reply_by_and_late_resolution(box: Mailbox, clock: Clock) -> None:
    mid = send(box, reply_by_ms=clock.now + 45_000)
    assert status(box, mid, clock.now + 44_999) == "pending"
    assert status(box, mid, clock.now + 45_000) == "expired"
    clock.advance(50_000)
    res, _ = box.resolve(mid, BOB, "decline", reason="too late")
    assert res["late"] and status(box, mid, clock.now) == "declined"


def test_fyi_has_no_status_and_no_reminders(box: Mailbox, clock: Clock) -> None:
    mid = send(box, anticipation="fyi")
    box.mark_delivered(mid, "test-push")
    assert status(box, mid, clock.now + 100 * INTERVAL) is None
    assert box.due_reminders("test:bob", clock.now + 100 * INTERVAL) == []
    assert box.count_open("test:bob") == 0  # read fyi mail is no longer open


def test_idempotent_message_id(box: Mailbox) -> None:
    mid = new_message_id()
    first = OutgoingMessage(mid, ALICE, "test:bob", "test:bob", "same", "fyi", None, None)
    _, created = box.store_message(first)
    again, created_again = box.store_message(OutgoingMessage(mid, ALICE, "test:bob", "test:bob", "same", "fyi", None, None))
    assert created and not created_again and again["id"] == mid
    with pytest.raises(AgentLinkError) as e:
        box.store_message(OutgoingMessage(mid, ALICE, "test:bob", "test:bob", "different", "fyi", None, None))
    assert e.value.details["errors"][0]["rule"] == "idempotency"
    assert box.get_row(mid)["body"] == "same"  # nothing stored was changed


def test_drain_marks_only_returned_rows(box: Mailbox) -> None:
    ids = [send(box, anticipation="fyi") for _ in range(3)]
    rows = box.drain("test:bob", 2, include_open=True)
    marked = box.mark_many_delivered([r["id"] for r in rows], "inbox")
    assert marked == ids[:2] and [r["id"] for r in rows] == ids[:2]
    assert box.count_open("test:bob", undelivered_only=True) == 1


def test_status_transition_recorded_once(box: Mailbox, clock: Clock) -> None:
    mid = send(box, reply_by_ms=clock.now + 40_000)
    clock.advance(41_000)
    row = box.get_row(mid)
    box.note_transition(row, box.state(row))
    box.note_transition(row, box.state(row))
    kinds = [r["kind"] for r in box.store.conn.execute("SELECT kind FROM message_events WHERE message_id = ?", (mid,))]
    assert kinds.count("status_changed") == 1


def test_delivery_evidence_after_an_overtaking_resolution(box: Mailbox) -> None:
    mid = send(box)
    box.resolve(mid, BOB, "done")  # the recipient answered before the push was confirmed
    before = box.get_row(mid)["delivered_at"]
    assert box.mark_delivered(mid, "test-push", {"echo": mid})
    row = box.get_row(mid)
    assert row["delivered_via"] == "test-push" and row["delivered_at"] == before
    assert not box.mark_delivered(mid, "test-push")
    events = box.store.conn.execute("SELECT data FROM message_events WHERE message_id = ? AND kind = 'delivered'", (mid,)).fetchall()
    assert len(events) == 1 and '"echo"' in events[0]["data"]


@pytest.mark.parametrize(("changes", "named"), [
    ({"sender": Caller("test:carol", "config", "test")}, ["from"]),
    ({"to": "test:dave", "recipient": "test:dave"}, ["to"]),
    ({"body": "different"}, ["message"]),
    ({"anticipation": "reply"}, ["anticipation"]),
    ({"anticipation": "reply", "reply_by_ms": 4_000_000_000_000}, ["anticipation", "replyBy"]),
    ({"reply_to": "01K6Z8Q1M3P6Q8R0S2T4V6W8XA"}, ["replyToMessageId"]),
    ({"metadata": {"fingerprint": {"correlationId": "job-7", "senderLabel": "reviewer", "ttlMs": 5000}}}, ["ttlMs"]),
    ({"metadata": {}}, ["correlationId", "senderLabel"]),
    ({"metadata": {"fingerprint": {"correlationId": "job-8", "senderLabel": "boss"}}}, ["correlationId", "senderLabel"]),
])
def test_a_reused_id_names_each_field_that_differs(box: Mailbox, changes: dict[str, Any], named: list[str]) -> None:
    mid = new_message_id()
    fields: dict[str, Any] = {"id": mid, "sender": ALICE, "to": "test:bob", "recipient": "test:bob", "body": "same",
                              "anticipation": "fyi", "reply_by_ms": None, "reply_to": None,
                              "metadata": {"fingerprint": {"correlationId": "job-7", "senderLabel": "reviewer"}}}
    box.store_message(OutgoingMessage(**fields))
    with pytest.raises(AgentLinkError) as e:
        box.store_message(OutgoingMessage(**{**fields, **changes}))
    assert e.value.details["differs"] == named
    assert e.value.details["errors"][0]["rule"] == "idempotency"
    words = [{"from": "sender", "to": "recipient", "message": "text"}.get(name, name) for name in named]  # the keys said in words
    assert f"its {', '.join(words)} {'differs' if len(named) == 1 else 'differ'}." in e.value.message
    assert box.get_row(mid)["body"] == "same"


@pytest.mark.parametrize("missing", [(), ("_sha2", "_sha256")])
def test_content_hash_is_the_sha256_of_the_identity_fields_with_or_without_the_builtin_module(monkeypatch, missing):
    """content_hash takes CPython's built-in SHA-256 (hashlib would load OpenSSL), else hashlib's:
    the digest of a message stored before stays the digest of the same message."""
    import hashlib
    import json

    for name in missing:
        monkeypatch.setitem(sys.modules, name, None)  # importing it raises ImportError
    parts = ["test:alice", "test:bob", "héllo", "reply", None, None, {"ttlMs": 5}]
    expected = hashlib.sha256(json.dumps(parts, ensure_ascii=False, sort_keys=True).encode("utf-8")).hexdigest()
    assert mailbox_mod.content_hash(*parts[:6], extra={"ttlMs": 5}) == expected
    assert mailbox_mod.content_hash(*parts[:6]) == hashlib.sha256(
        json.dumps(parts[:6], ensure_ascii=False, sort_keys=True).encode("utf-8")).hexdigest()
