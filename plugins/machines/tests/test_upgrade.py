"""Upgrading a machine from the plugin version that published mail on ``agent_link.mail.<to>``
(no publisher in the subject) to ``agent_link.mail.<to>.<from>``: the upgraded relay keeps
the earlier version's consumer reading the old subject from where it stopped (what is left
there, or still comes), checking the records' origin as far as that form allows, and reads
the new subject with a consumer of its own. Real nats-server."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable
from typing import Any

import pytest

from agent_link_core.mailbox import new_message_id
from agent_link_machines.common import STREAM, legacy_durable, legacy_subject, mail_durable, mail_subject, upgraded_durable
from agent_link_machines.testkit import Engine, Machine, until

pytestmark = [pytest.mark.machines, pytest.mark.timeout(240)]


def _record(body: str, origin: str = "alpha", **message: Any) -> dict[str, Any]:
    """A ``message`` record as a relay publishes it, its sender attested (verified when stored from
    the new subject)."""
    return {"type": "message", "message": {
        "id": new_message_id(), "from": "team:alice", "source": "env", "verified": True, "to": "team:bob",
        "recipient": "team:bob", "body": body, "anticipation": "fyi", "replyBy": None, "replyTo": None, "metadata": {},
        "origin": origin, **message}}


async def _as_old_version(engine: Engine, records: list[dict[str, Any]], consumer: bool, new: list[dict[str, Any]] = ()) -> dict[str, Any]:
    """Publish ``records`` on beta's old subject, one engine message each; with ``consumer``
    first make beta's consumer as the earlier version did (filtered to the old subject), and
    have it read and acknowledge one old-form message published after the records of ``new``
    (on the new subject, by an upgraded alpha): its acknowledged floor then lies past them.
    Returns ``{durable: filter subject}`` of the mail stream's consumers."""
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig

    nc = await nats.connect(engine.url)
    try:
        js = nc.jetstream(timeout=5)
        if consumer:
            await js.add_consumer(STREAM, ConsumerConfig(name=mail_durable("beta"), durable_name=mail_durable("beta"),
                                                         filter_subject=legacy_subject("beta"), ack_policy=AckPolicy.EXPLICIT))
        for record in new:
            await js.publish(mail_subject("beta", "alpha"), json.dumps(record).encode())
        if consumer:  # the earlier version's relay read this one and stored it (here: only acknowledged)
            await js.publish(legacy_subject("beta"), json.dumps(_record("read by the earlier version")).encode())
            sub = await js.pull_subscribe(legacy_subject("beta"), durable=mail_durable("beta"), stream=STREAM)
            [read] = await sub.fetch(1, timeout=5)
            await read.ack_sync()
        for record in records:
            await js.publish(legacy_subject("beta"), json.dumps(record).encode())
        return {c.name: c.config.filter_subject for c in await js.consumers_info(STREAM)}
    finally:
        await nc.close()


def _stored(m: Machine, body: str) -> tuple[Any, ...] | None:
    conn = sqlite3.connect(m.state / "agent-link.db")
    try:
        return conn.execute("SELECT json_extract(metadata, '$.machines.origin'), json_extract(metadata, '$.sender.verified')"
                            " FROM messages WHERE body = ?", (body,)).fetchone()
    finally:
        conn.close()


def test_an_upgraded_machine_reads_new_mail_and_drains_the_old_subject(machines: Callable[..., Machine], engine: Engine) -> None:
    a, b = machines("alpha"), machines("beta")
    a.start_relay()
    a.wait_connected()  # alpha made the stream and claimed its name
    b.cli("inbox", address="team:bob")
    left = [
        # first: a check that raised on it (a key the engine refuses) stopped the reading of everything after
        _record("from an origin that is no machine name", origin="a b"),
        _record("left before the upgrade"),
        _record("from a machine nobody ever named", origin="gamma"),
        _record("from beta itself", origin="beta"),
        {"type": "batch", "records": [_record("two origins in one pack"), _record("two origins, the other", origin="gamma")]},
        {"type": "resolution", "messageId": new_message_id(), "kind": "done", "by": "team:bob", "reason": None, "reply": None,
         "origin": "alpha"},  # of a message beta never sent to alpha
    ]
    # an upgraded alpha sent beta mail on the new subject before beta was upgraded
    before = asyncio.run(_as_old_version(engine, left, consumer=True, new=[_record("sent before beta was upgraded")]))
    assert before[mail_durable("beta")] == legacy_subject("beta") and legacy_durable("beta") not in before

    b.start_relay()
    b.wait_connected()
    until(lambda: _stored(b, "left before the upgrade"), 30, "beta to drain the old subject")
    until(lambda: _stored(b, "sent before beta was upgraded"), 30, "the new-subject mail that waited for beta's upgrade")
    assert _stored(b, "sent before beta was upgraded") == ("alpha", 1)  # the subject names its publisher: attested
    # the old form does not say who published: the origin it names is kept, the sender's attestation is not
    assert _stored(b, "left before the upgrade") == ("alpha", 0)

    # the consumer of the new subject reads it from the stream's start: new mail arrives
    until(lambda: a.cli("sessions", "--harness", "machines", "--json").stdout.count('"team:bob"'), 30, "alpha to list team:bob")
    a.cli("send", "team:bob", "after the upgrade", address="team:alice")
    until(lambda: _stored(b, "after the upgrade"), 30, "new mail on beta")
    assert _stored(b, "after the upgrade") == ("alpha", 0)  # team:alice is an unproven plain address on alpha too

    # a machine not yet upgraded still publishes on the old subject: read as it comes
    after = asyncio.run(_as_old_version(engine, [_record("still the old version", verified=True)], consumer=False))
    # the earlier version's consumer goes on reading the old subject where it stopped
    assert (after[mail_durable("beta")], after[upgraded_durable("beta")]) == (legacy_subject("beta"), mail_subject("beta", "*"))
    assert legacy_durable("beta") not in after
    assert _stored(b, "read by the earlier version") is None  # acknowledged before the upgrade: not read again
    until(lambda: _stored(b, "still the old version"), 30, "beta to read the old subject after the upgrade")
    # what the old form cannot vouch for was dropped, not stored (the legacy consumer reads in order)
    for body in ("from an origin that is no machine name", "from a machine nobody ever named", "from beta itself", "two origins in one pack", "two origins, the other"):
        assert _stored(b, body) is None, body
    conn = sqlite3.connect(b.state / "agent-link.db")
    try:
        assert conn.execute("SELECT COUNT(*) FROM resolutions").fetchone()[0] == 0
    finally:
        conn.close()
