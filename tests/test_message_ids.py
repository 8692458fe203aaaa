"""New message ids (:func:`agent_link_core.mailbox.new_message_id`) are ULIDs, as python-ulid reads them."""

from __future__ import annotations

import time

import pytest
from ulid import ULID

from agent_link_core import mailbox
from agent_link_core.addresses import is_ulid


def test_an_id_is_a_ulid_of_now() -> None:
    before = time.time_ns() // 1_000_000
    mid = mailbox.new_message_id()
    after = time.time_ns() // 1_000_000
    assert is_ulid(mid) and len(mid) == 26
    parsed = ULID.from_str(mid)
    assert str(parsed) == mid and before <= parsed.milliseconds <= after


def test_ids_of_one_millisecond_increase_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mailbox, "_last_id", [0, 0])
    monkeypatch.setattr(mailbox.time, "time_ns", lambda: 1_700_000_000_000 * 1_000_000)
    ids = [mailbox.new_message_id() for _ in range(50)]
    values = [int.from_bytes(ULID.from_str(i).bytes, "big") for i in ids]
    assert all(ULID.from_str(i).milliseconds == 1_700_000_000_000 for i in ids)
    assert values == list(range(values[0], values[0] + 50))


def test_ids_keep_their_order_when_the_clock_goes_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mailbox, "_last_id", [0, 0])
    clock = iter([1_800_000_000_001, 1_800_000_000_000])
    monkeypatch.setattr(mailbox.time, "time_ns", lambda: next(clock) * 1_000_000)
    first, second = mailbox.new_message_id(), mailbox.new_message_id()
    assert first < second


def test_randomness_overflowing_moves_to_the_next_millisecond(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mailbox.time, "time_ns", lambda: 1_900_000_000_000 * 1_000_000)
    monkeypatch.setattr(mailbox, "_last_id", [1_900_000_000_000, (1 << 80) - 1])
    mid = mailbox.new_message_id()
    assert ULID.from_str(mid).milliseconds == 1_900_000_000_001
