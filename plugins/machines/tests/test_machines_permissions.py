"""A machine receives only the mail addressed to its sessions, enforced by the engine: each
machine's NATS user has the permissions of :func:`agent_link_machines.permissions.machine_permissions`;
the machines work with them, and alpha's credentials cannot read beta's mail by any route
(a plain subscription, a consumer of its own, beta's consumer, a direct read) nor write
beta's directory entry."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_link_machines.common import BUCKET, STREAM, SUBJECT_PREFIX
from agent_link_machines.permissions import machine_permissions
from agent_link_machines.testkit import Engine, Machine, until

pytestmark = [pytest.mark.machines, pytest.mark.timeout(240)]


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    server = Engine(tmp_path / "engine", users={name: machine_permissions(name) for name in ("alpha", "beta", "gamma")})
    server.start()
    try:
        yield server
    finally:
        server.kill()


def served(m: Machine, address: str) -> bool:
    return any(s["address"] == address for s in m.json("sessions", "--harness", "machines")["sessions"])


async def attempts_as(engine: Engine, user: str) -> dict[str, str]:
    """What each way of reading beta's mail (or writing its entry) answered ``user``'s connection."""
    import nats
    from nats.js.api import ConsumerConfig

    errors: list[str] = []

    async def note(exc: BaseException) -> None:
        errors.append(str(exc))

    nc = await nats.connect(engine.url_for(user), error_cb=note, allow_reconnect=False)
    js = nc.jetstream(timeout=2)
    out: dict[str, str] = {}

    async def attempt(name: str, call: Any) -> None:
        before = len(errors)
        try:
            await call
            await nc.flush(timeout=2)
            await asyncio.sleep(0.3)  # a refused subscription comes back as an asynchronous error
            out[name] = "; ".join(errors[before:]) or "allowed"
        except Exception as exc:  # a refused request is never answered: nats-py times out
            out[name] = "; ".join(errors[before:]) or f"{type(exc).__name__}: {exc}"

    try:
        await attempt("subscribe", nc.subscribe(SUBJECT_PREFIX + "beta"))
        await attempt("own consumer", js.add_consumer(STREAM, ConsumerConfig(name="spy", filter_subject=SUBJECT_PREFIX + "beta")))
        await attempt("beta's consumer", js.pull_subscribe(SUBJECT_PREFIX + "beta.*", durable="machine_beta", stream=STREAM))
        await attempt("beta's old mail", js.pull_subscribe(SUBJECT_PREFIX + "beta", durable="oldmail_beta", stream=STREAM))
        await attempt("mail on the old subject", nc.publish(SUBJECT_PREFIX + "beta", b"{}"))
        await attempt("mail as beta", nc.publish(SUBJECT_PREFIX + "beta.beta", b"{}"))  # a forged origin
        await attempt("direct read", js.get_msg(STREAM, seq=1))
        kv = await js.key_value(BUCKET)
        await attempt("beta's entry", kv.put("dir.beta", b"{}"))
        await attempt("own entry", kv.put(f"dir.{user}", json.dumps({"at": 0, "sessions": []}).encode()))
    finally:
        await nc.close()
    return out


@pytest.fixture
def linked(engine: Engine, tmp_path: Path) -> Iterator[tuple[Machine, Machine]]:
    """Machines alpha and beta, each with its own restricted user, their relays connected,
    team:alice served on alpha and team:bob on beta, each listed on the other; the relays are
    stopped after the test."""
    alpha, beta = (Machine(tmp_path / f"machine-{n}", n, engine) for n in ("alpha", "beta"))
    try:
        for m in (alpha, beta):
            m.env["AGENT_LINK_ENGINE_URL"] = engine.url_for(m.name)
            m.start_relay()
        for m in (alpha, beta):
            m.wait_connected()
        beta.cli("inbox", address="team:bob")
        alpha.cli("inbox", address="team:alice")
        until(lambda: served(alpha, "team:bob") and served(beta, "team:alice"), 30, "each machine to list the other's address")
        yield alpha, beta
    finally:
        for m in (alpha, beta):
            m.stop()


def test_a_machines_credentials_read_only_its_own_mail(engine: Engine, linked: tuple[Machine, Machine]) -> None:
    alpha, beta = linked
    try:
        # the machines work with these permissions: a round trip
        sent = json.loads(alpha.cli("send", "team:bob", "only for beta", "--anticipation", "reply", "--json", address="team:alice").stdout)
        until(lambda: any(m["id"] == sent["messageId"] for m in beta.json("inbox", address="team:bob")["messages"]), 30,
              "the message on beta")
        beta.cli("reply", sent["messageId"], "seen on beta", address="team:bob")
        waited = json.loads(alpha.cli("wait", sent["messageId"], "--timeout-ms", "30000", "--json", address="team:alice").stdout)
        assert waited["outcome"] == "reply", waited
        # beta's mail waits on the engine while its relay is away: alpha still cannot read it
        beta.stop()
        alpha.cli("send", "team:bob", "still only for beta", address="team:alice")
        until(lambda: alpha.json("machines", "status")["outboxDepth"] == 0, 30, "alpha's outbox to reach the engine")
    finally:
        for m in (alpha, beta):
            m.stop()

    # the relays never asked for anything their permissions refuse
    assert "Violation" not in (engine.root / "server.log").read_text(encoding="utf-8")
    tried = asyncio.run(attempts_as(engine, "alpha"))
    for route in ("subscribe", "own consumer", "beta's consumer", "beta's old mail", "mail on the old subject", "mail as beta", "direct read",
                  "beta's entry"):
        assert "permissions violation" in tried[route].lower(), (route, tried)
    assert tried["own entry"] == "allowed", tried


def test_another_machines_user_is_a_permissions_line_not_endless_timeouts(engine: Engine, tmp_path: Path) -> None:
    # beta's settings copied from alpha's, only the name changed: alpha's user may not act as beta
    beta = Machine(tmp_path / "machine-beta", "beta", engine)
    try:
        beta.env["AGENT_LINK_ENGINE_URL"] = engine.url_for("alpha")
        assert beta.start_relay().wait(120) == 1
        err = beta.relay_error().strip()
        assert len(err.splitlines()) == 1, err
        assert "refuses user alpha the subjects of machine beta" in err and "agent-link machines permissions beta" in err, err
        assert engine.password_of("alpha") not in err
        status = beta.cli("machines", "status", check=False)
        assert status.returncode == 1 and "the relay stopped: the engine refuses user alpha" in status.stdout, status.stdout
    finally:
        beta.stop()


async def forge_answers(engine: Engine, message_id: str) -> None:
    """As machine gamma, with its own restricted user: publish to alpha a reply and a delivery
    of ``message_id`` (which alpha sent to beta), under every de-duplication id gamma can
    compute from the message id (the record id alone, and the id prefixed with beta)."""
    import nats

    nc = await nats.connect(engine.url_for("gamma"), allow_reconnect=False)
    js = nc.jetstream(timeout=5)
    reply = {"id": "01M8TW0FORGED0000000000000", "from": "team:bob", "source": "config", "verified": True, "to": "team:alice",
             "recipient": "team:alice", "body": "forged answer from gamma", "anticipation": "fyi", "replyBy": None,
             "replyTo": message_id, "metadata": {}, "origin": "gamma"}
    forged = {"resolved": {"type": "resolution", "messageId": message_id, "kind": "reply", "by": "team:bob", "reason": None,
                           "reply": reply, "origin": "gamma"},
              "delivered": {"type": "delivered", "messageId": message_id, "via": "forged", "origin": "gamma"}}
    try:
        for kind, record in forged.items():
            for msg_id in (f"{message_id}.{kind}", f"beta.{message_id}.{kind}"):
                await js.publish(SUBJECT_PREFIX + "alpha.gamma", json.dumps(record).encode(), headers={"Nats-Msg-Id": msg_id})
    finally:
        await nc.close()


def test_a_third_machine_cannot_answer_or_suppress_the_answer_to_mail_between_two_others(engine: Engine, linked: tuple[Machine, Machine]) -> None:
    alpha, beta = linked
    sent = json.loads(alpha.cli("send", "team:bob", "for bob only", "--anticipation", "reply", "--json", address="team:alice").stdout)
    mid = sent["messageId"]
    until(lambda: any(m["id"] == mid for m in beta.json("inbox", address="team:bob")["messages"]), 30, "the message on beta")
    asyncio.run(forge_answers(engine, mid))
    # a later record to alpha from beta: alpha's consumer reads the stream in order, so the forged ones were read before it
    marker = json.loads(beta.cli("send", "team:alice", "marker after the forgery", "--json", address="team:bob").stdout)
    until(lambda: any(m["id"] == marker["messageId"] for m in alpha.json("inbox", address="team:alice")["messages"]),
          30, "beta's marker on alpha")
    status = alpha.json("status", mid, address="team:alice")
    assert status.get("resolution") is None, status
    # the genuine answer is not dropped by the server as a repeat of a forged id
    beta.cli("reply", mid, "the real answer from bob", address="team:bob")
    waited = json.loads(alpha.cli("wait", mid, "--timeout-ms", "30000", "--json", address="team:alice").stdout)
    assert waited["outcome"] == "reply" and "the real answer from bob" in waited["reply"]["envelope"], waited
    conn = sqlite3.connect(alpha.state / "agent-link.db")
    try:
        assert conn.execute("SELECT COUNT(*) FROM messages WHERE body LIKE '%forged%'").fetchone()[0] == 0
        assert conn.execute("SELECT delivered_via FROM messages WHERE id = ?", (mid,)).fetchone()[0] in (None, "machine:beta")
    finally:
        conn.close()
