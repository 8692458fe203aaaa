"""A session of a harness installed on this machine too, listed by another machine: the
plugin's ``agent_link_resolve_elsewhere`` claims it from the relay's copy of the directory,
so a send goes into the outbox for that machine and the local harness pushes nothing (no
engine here: the relay's files are written by the test)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_link_core import hookimpl
from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError
from agent_link_core.harness import Delivery, Harness, SessionListing
from agent_link_core.model import Caller, Session
from agent_link_core.store import now_ms
from agent_link_machines.common import write_json

FAR = "fake:far-thread"


class LocalHarness(Harness):
    """The fake host on this machine: it knows ``fake:near`` only, and records its pushes."""

    name = "fake"

    def __init__(self) -> None:
        self.pushed: list[str] = []

    async def list_sessions(self, *, include_archived: bool = False, limit: int = 200) -> SessionListing:
        return SessionListing([Session("fake:near", "fake", "near", last_activity_ms=1)])

    async def get_session(self, session_id: str) -> Session | None:
        return Session("fake:near", "fake", "near") if session_id == "near" else None

    async def deliver(self, message: dict[str, Any], envelope: str, options: Any) -> Delivery:
        self.pushed.append(message["id"])
        return Delivery(delivered=True, via="fake-push", state="pushed")


class FakeHost:
    def __init__(self) -> None:
        self.harness = LocalHarness()

    @hookimpl
    def agent_link_register_harnesses(self, register: Any) -> None:
        register(self.harness)


@pytest.fixture
def app(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[App]:
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "presence waits machines")
    monkeypatch.setenv("AGENT_LINK_ENGINE_URL", "nats://127.0.0.1:1")  # configured; nothing is contacted
    monkeypatch.setenv("AGENT_LINK_MACHINE", "alpha")
    monkeypatch.setenv("AGENT_LINK_MACHINES_AUTOSTART", "off")  # a send writing the outbox would start a relay
    application = App.create(extra_plugins=(("fakehost", FakeHost()),))
    view = {"address": FAR, "harness": "fake", "id": "far-thread", "title": "Far thread", "surface": [], "loaded": True,
            "archived": False, "lastActivityAt": None, "receive": {}, "lastActivityMs": now_ms()}
    write_json(Path(application.config.state_dir) / "machines" / "directory.json",
               {"at": now_ms(), "machines": {"beta": {"at": now_ms(), "sessions": [view], "served": []}}})
    yield application
    application.close()


@pytest.mark.anyio
async def test_a_send_to_another_machines_session_of_a_local_harness_goes_to_its_outbox(app: App) -> None:
    harness = app.harnesses["fake"]
    sender = Caller("team:alice", "env")
    out = await app.send(caller=sender, to=FAR, body="hello over there", anticipation="reply")
    meta = out.message["metadata"]
    assert meta["machines"] == {"to": "beta"} and meta["elsewhere"] is True
    assert harness.pushed == [] and out.delivery is not None and out.delivery.state == "queued"
    [(machine, payload)] = app.store.conn.execute("SELECT machine, payload FROM machines_outbox").fetchall()
    record = json.loads(payload)["message"]
    # beta stores it as its own harness's mail: the routing marks do not travel
    assert machine == "beta" and record["recipient"] == FAR and record["origin"] == "alpha"
    assert "elsewhere" not in record["metadata"] and "machines" not in record["metadata"]
    # autostart off: the send started no relay (test_machines.py has one a send starts)
    assert not (Path(app.config.state_dir) / "machines" / "nudged").exists()

    verdict = await app.resolve_agent(FAR)
    assert verdict["status"] == "resolved"
    assert (verdict["best"]["machine"], verdict["best"]["title"], verdict["best"]["machineStale"]) == ("beta", "Far thread", False)

    # found by words of its title (the machines harness lists it): claimed the same way
    by_title = await app.send(caller=sender, to="Far thread", body="found by its title")
    assert by_title.message["recipient"] == FAR and by_title.message["metadata"]["elsewhere"] is True and harness.pushed == []

    # a session the local harness knows stays local mail; one nobody lists stays not_found
    near = await app.send(caller=sender, to="fake:near", body="hello here")
    assert harness.pushed == [near.message["id"]] and "elsewhere" not in near.message["metadata"]
    assert app.store.conn.execute("SELECT COUNT(*) FROM machines_outbox").fetchone()[0] == 2
    with pytest.raises(AgentLinkError) as e:
        await app.send(caller=sender, to="fake:nowhere", body="hi")
    assert e.value.code == "not_found"


@pytest.mark.anyio
async def test_without_the_engine_configured_nothing_is_claimed(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENT_LINK_ENGINE_URL")
    alone = App.create(extra_plugins=(("fakehost", FakeHost()),))
    try:
        assert (await alone.resolve_agent(FAR))["status"] == "not_found"
    finally:
        alone.close()


def roles_app(roles: dict[str, list[str]], here: dict[str, Any] | None = None,
              other: dict[str, list[str]] | None = None, enforcement: str | None = None) -> App:
    """alpha with the roles plugin, beta listing ``roles`` (and ``FAR``, ``team:bob``), and a
    third machine gamma listing ``other`` when given; ``here``: alpha's own roles.json roles;
    ``enforcement``: the role enforcement mode beta publishes."""
    application = App.create(extra_plugins=(("fakehost", FakeHost()),))
    assert "roles" in application.hooks.loaded
    if here is not None:
        (Path(application.config.state_dir) / "roles.json").write_text(json.dumps({"version": 1, "roles": here}))
    view = {"address": FAR, "harness": "fake", "id": "far-thread", "surface": [], "archived": False, "lastActivityMs": now_ms()}
    machines: dict[str, Any] = {"beta": {"at": now_ms(), "sessions": [view], "served": ["team:bob"], "roles": roles,
                                         "roleEnforcement": enforcement}}
    if other is not None:
        machines["gamma"] = {"at": now_ms(), "sessions": [], "served": ["team:carol"], "roles": other}
    write_json(Path(application.config.state_dir) / "machines" / "directory.json", {"at": now_ms(), "machines": machines})
    return application


@pytest.fixture
def with_roles(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """alpha's settings (no engine is contacted), with the roles plugin loaded."""
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "presence waits machines roles")
    monkeypatch.setenv("AGENT_LINK_ENGINE_URL", "nats://127.0.0.1:1")
    monkeypatch.setenv("AGENT_LINK_MACHINE", "alpha")
    monkeypatch.setenv("AGENT_LINK_MACHINES_AUTOSTART", "off")
    return isolated_env


@pytest.mark.anyio
async def test_a_role_held_on_another_machine_goes_to_its_outbox(with_roles: Path) -> None:
    app = roles_app({"reviewer": ["team:bob"], "builder": [FAR]})
    # a procedure file of the role here: it is not the holder's (beta attaches its own on arrival)
    (Path(app.config.state_dir) / "roles").mkdir()
    (Path(app.config.state_dir) / "roles" / "reviewer.md").write_text("alpha's copy")
    try:
        sender = Caller("team:alice", "env")
        out = await app.send(caller=sender, to="role:reviewer", body="please review", anticipation="reply")
        meta = out.message["metadata"]
        assert out.message["recipient"] == "team:bob" and out.message["to"] == "role:reviewer"
        assert meta["role"] == {"name": "reviewer", "holder": "team:bob", "machine": "beta"} and meta["machines"] == {"to": "beta"}
        assert "roleProcedure" not in out.result_fields
        assert out.address_warning is None  # served on beta: no unknown_address warning
        # a role held by a session of a harness installed here too: that harness pushes nothing
        far = await app.send(caller=sender, to="role:builder", body="build it")
        assert far.message["recipient"] == FAR and far.message["metadata"]["elsewhere"] is True
        assert app.harnesses["fake"].pushed == []
        records = [json.loads(p) for m, p in app.store.conn.execute("SELECT machine, payload FROM machines_outbox ORDER BY seq")
                   if m == "beta"]
        # the role travels with the message: beta's envelope names it
        assert [r["message"]["metadata"]["role"]["name"] for r in records] == ["reviewer", "builder"]
        # listings here show the roles beta's sessions hold there (list_agents' "roles")
        assert app.hooks.session_roles([FAR, "team:bob", "fake:near"]) == {FAR: ["builder"], "team:bob": ["reviewer"]}
        verdict = await app.resolve_agent("role:reviewer")
        assert (verdict["status"], verdict["best"]["address"], verdict["via"]) == ("resolved", "team:bob", "role:reviewer")
        # a role nobody holds anywhere: the roles plugin's not_found, as on one machine
        with pytest.raises(AgentLinkError) as e:
            await app.send(caller=sender, to="role:nobody", body="hi")
        assert e.value.code == "not_found"
    finally:
        await app.aclose()


@pytest.mark.anyio
async def test_a_role_held_here_stays_local_and_two_remote_holders_are_ambiguous(with_roles: Path) -> None:
    app = roles_app({"reviewer": ["team:bob"]}, here={"reviewer": {"address": "team:dora"}},
                    other={"tester": ["team:carol"]})
    try:
        sender = Caller("team:alice", "env")
        out = await app.send(caller=sender, to="role:reviewer", body="local first")
        assert out.message["recipient"] == "team:dora" and "machines" not in out.message["metadata"]
        assert app.store.conn.execute("SELECT COUNT(*) FROM machines_outbox").fetchone()[0] == 0
    finally:
        await app.aclose()
    app = roles_app({"tester": ["team:bob"]}, here={}, other={"tester": ["team:carol"]})
    try:
        with pytest.raises(AgentLinkError) as e:
            await app.send(caller=Caller("team:alice", "env"), to="role:tester", body="which one?")
        assert e.value.code == "ambiguous"
        assert {(c["address"], c["machine"]) for c in e.value.details["candidates"]} == {("team:bob", "beta"), ("team:carol", "gamma")}
        assert (await app.resolve_agent("role:tester"))["status"] == "ambiguous"
    finally:
        await app.aclose()


#: a message beta sent to role:reviewer, whose holder is alice here, with beta's procedure reference
ARRIVED_ROLE = {"type": "message", "message": {
    "id": "msg_role_from_beta", "from": "team:bob", "source": "env", "verified": True, "to": "role:reviewer",
    "recipient": "team:alice", "body": "review this", "anticipation": "fyi", "replyBy": None, "replyTo": None, "origin": "beta",
    "metadata": {"role": {"name": "reviewer", "holder": "team:alice", "machine": "alpha",
                          "procedure": {"name": "reviewer", "version": 9, "sha256": "e" * 64}}}}}


def test_a_role_message_from_another_machine_gets_this_machines_procedure(with_roles: Path) -> None:
    from agent_link_machines.records import store_record

    app = roles_app({}, here={"reviewer": {"address": "team:alice"}})
    try:
        (Path(app.config.state_dir) / "roles").mkdir()
        (Path(app.config.state_dir) / "roles" / "reviewer.md").write_text("Alpha's checklist.")
        outcome, stored = store_record(app, json.loads(json.dumps(ARRIVED_ROLE)))
        role = json.loads(stored[0]["metadata"])["role"]
        assert outcome == "stored" and role["procedure"]["version"] == 1 and role["procedure"]["sha256"] != "e" * 64
        assert "machine" not in role  # the holder is local here
        envelope = app.mailbox.envelope(stored[0])
        assert 'procedure="reviewer@1"' in envelope and ">Alpha's checklist.</procedure>" in envelope
        assert store_record(app, json.loads(json.dumps(ARRIVED_ROLE)))[0] == "duplicate"  # applied once
    finally:
        app.close()


def test_without_the_roles_plugin_a_role_message_is_stored_as_it_came(app: App) -> None:
    from agent_link_machines.records import store_record

    outcome, stored = store_record(app, json.loads(json.dumps(ARRIVED_ROLE)))
    assert outcome == "stored" and json.loads(stored[0]["metadata"])["role"]["procedure"]["version"] == 9


def codes(warnings: list[dict[str, Any]]) -> list[str]:
    """The warnings' codes, but ``sender_unverified`` (these senders are named by the environment)."""
    return [w["code"] for w in warnings if w["code"] != "sender_unverified"]


@pytest.mark.anyio
async def test_direct_mail_to_a_role_holder_of_another_machine_follows_its_rules(with_roles: Path) -> None:
    # alice holds the writer role here; on beta bob holds reviewer and FAR builder, and beta enforces
    app = roles_app({"reviewer": ["team:bob"], "builder": [FAR]}, here={"writer": {"address": "team:alice"}}, enforcement="enforce")
    try:
        alice = Caller("team:alice", "env")
        for target, role in (("team:bob", "reviewer"), (FAR, "builder")):  # a plain address, a session of a harness here too
            with pytest.raises(AgentLinkError) as e:
                await app.send(caller=alice, to=target, body="direct", anticipation="reply")
            assert e.value.code == "permission_denied", e.value
            assert (e.value.details["reason"], e.value.details["replacement"]) == ("role_address_required", {"to": f"role:{role}"})
            assert e.value.details["recipientMachine"] == "beta" and "on beta" in e.value.message
        # refused before anything was stored: nothing here, nothing for beta
        assert app.store.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0
        assert app.store.conn.execute("SELECT COUNT(*) FROM machines_outbox").fetchone()[0] == 0
        # through the role it goes; a sender holding no role is not checked (as on one machine)
        through = await app.send(caller=alice, to="role:reviewer", body="through the role", anticipation="reply")
        assert through.message["recipient"] == "team:bob" and codes(through.warnings) == []
        plain = await app.send(caller=Caller("team:zed", "env"), to="team:bob", body="not a role holder")
        assert codes(plain.warnings) == [] and plain.message["metadata"]["roleRules"]["enforcement"] == "enforce"
        # beta's rules stay here: the records carry none
        payloads = [json.loads(p) for (p,) in app.store.conn.execute("SELECT payload FROM machines_outbox")]
        assert payloads and all("roleRules" not in r["message"]["metadata"] for r in payloads)
    finally:
        await app.aclose()


@pytest.mark.anyio
async def test_warn_on_another_machine_tags_and_warns_here_and_off_checks_nothing(with_roles: Path) -> None:
    app = roles_app({"reviewer": ["team:bob"]}, here={"writer": {"address": "team:alice"}, "lead": {"address": "team:dora"}},
                    enforcement="warn")
    try:
        out = await app.send(caller=Caller("team:alice", "env"), to="team:bob", body="direct")
        assert codes(out.warnings) == ["direct_coordination"]
        warning = next(w for w in out.warnings if w["code"] == "direct_coordination")
        assert warning["details"]["recipientMachine"] == "beta" and "direct-coordination" in out.message["metadata"]["tags"]
    finally:
        await app.aclose()
    # beta enforces nothing: this machine's own mode does not reach beta's holders, as beta's would not
    app = roles_app({"reviewer": ["team:bob"]}, here={"writer": {"address": "team:alice"}}, enforcement="off")
    (Path(app.config.state_dir) / "roles.json").write_text(json.dumps({"version": 1, "enforcement": "enforce",
                                                                      "roles": {"writer": {"address": "team:alice"}}}))
    try:
        out = await app.send(caller=Caller("team:alice", "env"), to="team:bob", body="direct")
        assert codes(out.warnings) == [] and "roleRules" not in out.message["metadata"]
    finally:
        await app.aclose()


@pytest.mark.anyio
async def test_mail_sent_on_to_a_machine_is_never_sent_on_again(app: App) -> None:
    """Stranded local mail goes to the machine that lists its address once, even after its
    outbox row, kept a day, is gone (it was sent on again, to whatever machine listed it then)."""
    from agent_link_machines.records import forward_stranded

    out = await app.send(caller=Caller("team:alice", "env"), to="team:bob", body="before beta listed bob", anticipation="fyi")
    assert "machines" not in out.message["metadata"]  # nobody lists team:bob yet: local mail
    where = {"team:bob": "beta"}
    assert forward_stranded(app, where, ["team:bob"]) == 1
    assert forward_stranded(app, where, ["team:bob"]) == 0
    with app.store.write() as conn:
        conn.execute("DELETE FROM machines_outbox")  # what the relay does to sent rows after a day
    assert forward_stranded(app, {"team:bob": "gamma"}, ["team:bob"]) == 0
    assert [tuple(r) for r in app.store.conn.execute("SELECT machine FROM machines_forwarded")] == [("beta",)]
