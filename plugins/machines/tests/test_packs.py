"""The relay's packs: consecutive outbox rows for one machine travel as one engine message
(:func:`agent_link_machines.relay.pack_rows`), and the receiving relay applies each record of
a pack at most once however the rows were grouped (no engine here: the engine messages are
handed to :meth:`Relay.apply_batch` directly)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_core.mailbox import new_message_id
from agent_link_machines.records import records_of
from agent_link_machines.relay import PACK_RECORDS, Relay, pack_rows


def _row(machine: str, n: int, body: str = "") -> dict[str, Any]:
    return {"record_id": f"id-{n}", "machine": machine, "payload": json.dumps({"type": "delivered", "messageId": f"m{n}", "pad": body})}


def test_rows_for_one_machine_travel_as_packs_in_order() -> None:
    rows = [_row("beta", n) for n in range(PACK_RECORDS + 3)] + [_row("gamma", 100), _row("beta", 101)]
    packs = pack_rows(rows, "alpha", key=b"alpha's secret")
    assert [(len(group), subject) for group, subject, _, _ in packs] == [
        (PACK_RECORDS, "agent_link.mail.beta.alpha"), (3, "agent_link.mail.beta.alpha"), (1, "agent_link.mail.gamma.alpha"),
        (1, "agent_link.mail.beta.alpha")]
    group, _, data, msg_id = packs[0]
    assert msg_id.startswith("alpha.batch.") and records_of(data) == [json.loads(r["payload"]) for r in group]
    assert pack_rows(rows, "alpha", key=b"alpha's secret")[0][3] == msg_id  # the same rows: the same id (the engine drops a repeat)
    assert pack_rows(rows[1:], "alpha", key=b"alpha's secret")[0][3] != msg_id
    # a row alone is its record, under an id of its publisher and its record id
    _, _, data, msg_id = packs[2]
    assert msg_id.startswith("alpha.id-100.") and json.loads(data) == json.loads(rows[-2]["payload"])
    # which another machine, knowing the record ids but not alpha's key, cannot compute
    others = [p[3] for p in pack_rows(rows, "alpha", key=b"a guess")]
    assert not set(others) & {p[3] for p in packs}


def test_a_pack_stays_under_the_byte_limit_and_a_large_record_goes_alone() -> None:
    rows = [_row("beta", n, "x" * 400) for n in range(6)] + [_row("beta", 9, "y" * 5000)]
    packs = pack_rows(rows, "alpha", limit_bytes=1200)
    assert [len(group) for group, *_ in packs] == [2, 2, 2, 1]
    assert all(len(data) <= 1200 + 40 for group, _, data, _ in packs if len(group) > 1)
    assert packs[-1][3].startswith("alpha.id-9.")


@pytest.mark.parametrize("data", [b"not json", b"[1, 2]", b'{"type": "batch", "records": [1]}', b'{"type": "batch", "records": {}}'])
def test_what_is_not_a_record_or_a_pack_of_records_is_refused(data: bytes) -> None:
    assert records_of(data) is None


class FakeMsg:
    """An engine message as the relay's pull subscription hands it over (acks recorded)."""

    def __init__(self, data: bytes, msg_id: str, subject: str = "agent_link.mail.alpha.beta") -> None:
        self.data, self.header, self.subject = data, {"Nats-Msg-Id": msg_id}, subject
        self.acks: list[str] = []

    async def ack(self) -> None:
        self.acks.append("ack")

    async def nak(self, delay: float | None = None) -> None:
        self.acks.append("nak")

    async def term(self) -> None:
        self.acks.append("term")


@pytest.fixture
def app(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[App]:
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "presence waits machines")
    monkeypatch.setenv("AGENT_LINK_ENGINE_URL", "nats://127.0.0.1:1")  # configured; nothing is contacted
    monkeypatch.setenv("AGENT_LINK_MACHINE", "alpha")
    monkeypatch.setenv("AGENT_LINK_MACHINES_AUTOSTART", "off")
    application = App.create()
    yield application
    application.close()


def _message(n: int) -> dict[str, Any]:
    return {"id": new_message_id(), "from": "team:carol", "source": "config", "verified": True, "to": "team:bob",
            "recipient": "team:bob", "body": f"packed {n}", "anticipation": "fyi", "replyBy": None, "replyTo": None,
            "metadata": {}, "origin": "beta"}


@pytest.mark.anyio
async def test_a_pack_sent_again_in_another_grouping_stores_each_message_once(app: App) -> None:
    rows = [{"record_id": m["id"], "machine": "alpha", "payload": json.dumps({"type": "message", "message": m})}
            for m in (_message(n) for n in range(10))]
    relay = Relay(app)
    first = [FakeMsg(data, msg_id) for _, _, data, msg_id in pack_rows(rows[:6], "beta")]
    await relay.apply_batch(first, "agent_link.mail.alpha")
    # the sender's relay never heard the ack: all ten go again, grouped otherwise, with a bad message among them
    again = [FakeMsg(data, msg_id) for _, _, data, msg_id in pack_rows(rows, "beta")] + [FakeMsg(b"[]", "junk")]
    await relay.apply_batch(again, "agent_link.mail.alpha")
    assert [m.acks for m in first] == [["ack"]] and [m.acks for m in again] == [["ack"], ["term"]]
    stored = app.store.conn.execute("SELECT body, json_extract(metadata, '$.machines.origin') FROM messages ORDER BY body").fetchall()
    assert [tuple(r) for r in stored] == [(f"packed {n}", "beta") for n in range(10)]
    assert relay.applied == 16


@pytest.mark.anyio
async def test_a_pack_with_a_record_not_applied_is_naked_and_keeps_the_others(app: App) -> None:
    good = _message(1)
    bad = {**_message(2), "anticipation": "not-an-anticipation"}
    rows = [{"record_id": m["id"], "machine": "alpha", "payload": json.dumps({"type": "message", "message": m})} for m in (good, bad)]
    relay = Relay(app)
    [msg] = [FakeMsg(data, msg_id) for _, _, data, msg_id in pack_rows(rows, "beta")]
    await relay.apply_batch([msg], "agent_link.mail.alpha")
    assert msg.acks == ["nak"]  # it comes again; the stored record then changes nothing
    assert [r[0] for r in app.store.conn.execute("SELECT body FROM messages")] == ["packed 1"]


@pytest.mark.anyio
async def test_a_record_naming_another_origin_than_its_publisher_is_dropped(app: App) -> None:
    """A machine can publish only under its own name (its NATS permissions); a record that
    claims another machine as its origin (a forged attestation) is refused, a true one stored."""
    forged, true = _message(1), _message(2)
    relay = Relay(app)
    [lying] = [FakeMsg(data, msg_id, subject="agent_link.mail.alpha.gamma") for _, _, data, msg_id in
               pack_rows([{"record_id": forged["id"], "machine": "alpha", "payload": json.dumps({"type": "message", "message": forged})}], "gamma")]
    [honest] = [FakeMsg(data, msg_id) for _, _, data, msg_id in
                pack_rows([{"record_id": true["id"], "machine": "alpha", "payload": json.dumps({"type": "message", "message": true})}], "beta")]
    await relay.apply_batch([lying, honest], "agent_link.mail.alpha.*")
    assert (lying.acks, honest.acks) == (["term"], ["ack"])
    assert [r[0] for r in app.store.conn.execute("SELECT body FROM messages")] == ["packed 2"]


@pytest.mark.anyio
async def test_a_send_wakes_the_relay_only_when_nothing_else_waits_to_go(app: App) -> None:
    """The relay reads the outbox again after marking a round sent, so only the send that
    finds nothing unsent wakes it (plugin.agent_link_on_event); every row is still there to go."""
    from agent_link_core.model import Caller
    from agent_link_core.store import now_ms
    from agent_link_waits.wakeup import Wakeup
    from agent_link_machines.common import outbox_signal, plugin_dir, write_json

    write_json(plugin_dir(app.config) / "directory.json",
               {"at": now_ms(), "machines": {"beta": {"at": now_ms(), "served": ["team:bob"], "sessions": []}}})
    sender = Caller("team:alice", "env")
    with Wakeup(outbox_signal(app.config)) as relay:
        woken = []
        for n in range(3):
            await app.send(caller=sender, to="team:bob", body=f"to beta {n}")
            woken.append(relay.wait_blocking(0))
        app.store.conn.execute("UPDATE machines_outbox SET sent_at = 1")  # the relay sent them
        await app.send(caller=sender, to="team:bob", body="after a quiet spell")
        woken.append(relay.wait_blocking(0))
    assert woken == [True, False, False, True]
    assert app.store.conn.execute("SELECT COUNT(*) FROM machines_outbox WHERE machine = 'beta'").fetchone()[0] == 4
