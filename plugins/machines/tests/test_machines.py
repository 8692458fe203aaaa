"""Two or three "machines" (separate HOMEs, state dirs and processes on this box) sharing one
real NATS JetStream server: directory, round trips, engine crash, name clash, bad settings."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_link_machines.testkit import Engine, Machine, until

pytestmark = [pytest.mark.machines, pytest.mark.timeout(240)]


def listed_on(m: Machine, address: str) -> dict[str, Any] | None:
    out = m.json("sessions", "--harness", "machines")
    return next((s for s in out["sessions"] if s["address"] == address), None)


def rows(m: Machine, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(m.state / "agent-link.db")
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def pair(machines: Callable[..., Machine]) -> tuple[Machine, Machine]:
    a, b = machines("alpha"), machines("beta")
    for m in (a, b):
        m.start_relay()
    for m in (a, b):
        m.wait_connected()
    # bob and alice are plain addresses: an inbox read serves them on their machine
    b.cli("inbox", address="team:bob")
    a.cli("inbox", address="team:alice")
    until(lambda: listed_on(a, "team:bob"), 30, "alpha to list team:bob")
    until(lambda: listed_on(b, "team:alice"), 30, "beta to list team:alice")
    return a, b


def test_round_trip_between_plain_addresses(machines: Callable[..., Machine]) -> None:
    a, b = pair(machines)
    bob = listed_on(a, "team:bob")
    assert bob is not None and bob["machine"] == "beta" and bob["machineStale"] is False

    sent = a.json("send", "team:bob", "ping from alpha", "--anticipation", "reply", address="team:alice")
    message_id = sent["messageId"] if "messageId" in sent else sent["message"]["id"]

    def arrived() -> dict[str, Any] | None:
        inbox = b.json("inbox", address="team:bob")
        return inbox if any(m["id"] == message_id for m in inbox["messages"]) else None

    inbox = until(arrived, 30, "the message on beta")
    got = next(m for m in inbox["messages"] if m["id"] == message_id)
    assert got["from"] == "team:alice" and got["fromVerified"] is False
    # the envelope names the machine that attested the sender
    assert '<machine from="alpha" />' in inbox["renderedBlock"]

    b.cli("reply", message_id, "pong from beta", address="team:bob")
    waited = json.loads(a.cli("wait", message_id, "--timeout-ms", "30000", "--json", address="team:alice").stdout)
    assert waited["outcome"] == "reply", waited
    assert "pong from beta" in waited["reply"]["envelope"]
    assert waited["reply"]["from"] == "team:bob"
    # the original, on alpha: resolved by bob; its delivery on beta was reported back
    status = a.json("status", message_id, address="team:alice")
    assert status["resolution"]["kind"] == "reply" and status["resolution"]["by"] == "team:bob", status
    until(lambda: rows(a, "SELECT delivered_via FROM messages WHERE id = ?", message_id)[0][0] == "machine:beta", 30,
          "beta's delivery report on alpha")
    # one copy of each message on each machine, nothing left to send
    for m in (a, b):
        assert rows(m, "SELECT COUNT(*) FROM messages")[0][0] == 2
        until(lambda m=m: rows(m, "SELECT COUNT(*) FROM machines_outbox WHERE sent_at IS NULL")[0][0] == 0, 30, "empty outbox")
