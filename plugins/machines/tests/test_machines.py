"""Two or three "machines" (separate HOMEs, state dirs and processes on this box) sharing one
real NATS JetStream server: directory, round trips, engine crash, name clash, bad settings."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
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


def link_status(m: Machine) -> dict[str, Any]:
    """``agent-link machines status --json``, which exits 1 when it shows a problem."""
    done = m.cli("machines", "status", "--json", check=False)
    data = json.loads(done.stdout)
    assert done.returncode == (1 if data.get("problem") else 0), (done.returncode, data)
    return dict(data)


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
    # people see the machine too
    for command in ("sessions", "who"):
        table = a.cli(command).stdout.splitlines()
        assert table[0].split()[-1] == "MACHINE" and any(line.split()[0] in ("team:bob",) and line.split()[-1] == "beta"
                                                         for line in table[1:] if line.split()), table

    # served on beta: no unknown_address warning, and --require-known accepts it
    done = a.cli("send", "team:bob", "ping from alpha", "--anticipation", "reply", "--require-known", "--json", address="team:alice")
    assert done.stderr == "" and "warnings" not in json.loads(done.stdout), done
    sent = json.loads(done.stdout)
    message_id = sent["messageId"]

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


def test_engine_killed_mid_stream_loses_and_doubles_nothing(machines: Callable[..., Machine], engine: Engine) -> None:
    import asyncio

    from agent_link_core.app import App

    a, b = pair(machines)
    total, kill_at = 1000, 300

    async def send_all() -> list[str]:
        app = App.create(env={**a.env, "AGENT_LINK_ADDRESS": "team:alice"})
        try:
            caller = app.caller()
            ids = []
            for n in range(total):
                if n == kill_at:
                    engine.kill()
                outcome = await app.send(caller=caller, to="team:bob", body=f"message {n}")
                ids.append(outcome.message["id"])
            # everything was accepted while the engine was down; some of it waits here
            assert rows(a, "SELECT COUNT(*) FROM machines_outbox WHERE sent_at IS NULL")[0][0] > 0
            return ids
        finally:
            await app.aclose()

    ids = asyncio.run(send_all())
    until(lambda: not a.status().get("reachable"), 30, "alpha's relay to see the engine gone")
    engine.start()
    until(lambda: rows(b, "SELECT COUNT(*) FROM messages WHERE from_addr = 'team:alice'")[0][0] >= total, 120,
          "every message on beta")
    got = rows(b, "SELECT id, body FROM messages WHERE from_addr = 'team:alice'")
    assert len(got) == total and {r[0] for r in got} == set(ids)
    assert sorted(r[1] for r in got) == sorted(f"message {n}" for n in range(total))
    until(lambda: rows(a, "SELECT COUNT(*) FROM machines_outbox WHERE sent_at IS NULL")[0][0] == 0, 30, "alpha's outbox empty")
    assert a.relay is not None and a.relay.poll() is None and b.relay is not None and b.relay.poll() is None


def test_a_machine_name_taken_by_another_machine_is_refused(machines: Callable[..., Machine], engine: Engine) -> None:
    first = machines("gamma")
    first.start_relay()
    first.wait_connected()
    second = machines("gamma", "machine-gamma-2")
    relay = second.start_relay()
    assert relay.wait(60) == 1
    err = second.relay_error().strip()
    assert len(err.splitlines()) == 1 and "machine name 'gamma' is already used by another machine" in err, err
    assert "AGENT_LINK_MACHINE" in err
    # one relay per state dir
    again = Machine(first.root, "gamma", engine)
    assert again.start_relay().wait(60) == 1 and "another relay of this state dir" in again.relay_error()
    again.stop()
    # the first keeps its name across restarts (same state dir, same instance)
    first.stop()
    first.start_relay()
    first.wait_connected()
    # a machine that is gone: once its listing is stale its name is released, and another may take it
    first.stop()
    released = until(lambda: second.cli("machines", "release", "gamma", check=False).returncode == 0 or None, 30,
                     "gamma's listing to go stale")
    assert released
    second.start_relay()
    second.wait_connected()
    assert first.start_relay().wait(60) == 1 and "already used by another machine" in first.relay_error()


def test_mail_to_an_address_not_yet_listed_goes_out_once_another_machine_lists_it(machines: Callable[..., Machine]) -> None:
    a, b = machines("alpha"), machines("beta")
    b.start_relay()
    b.wait_connected()
    b.cli("inbox", address="team:bob")
    # alpha's relay never ran: no copy of the directory yet, so the send is local mail for now
    early = a.json("send", "team:bob", "before alpha's first relay", "--anticipation", "reply", address="team:alice")
    assert early["outcome"] == "queued" and [w["code"] for w in early.get("warnings", [])] == ["unknown_address"], early
    a.start_relay()
    a.wait_connected()
    until(lambda: any(m["id"] == early["messageId"] for m in b.json("inbox", address="team:bob")["messages"]), 30,
          "the early message on beta")
    b.cli("reply", early["messageId"], "got it late", address="team:bob")
    waited = json.loads(a.cli("wait", early["messageId"], "--timeout-ms", "30000", "--json", address="team:alice").stdout)
    assert waited["outcome"] == "reply", waited
    # an address another machine starts serving after the send
    later = a.json("send", "team:carol", "before carol exists anywhere", address="team:alice")
    assert later["outcome"] == "queued", later
    b.cli("inbox", address="team:carol")
    until(lambda: any(m["id"] == later["messageId"] for m in b.json("inbox", address="team:carol")["messages"]), 30,
          "the later message on beta")
    # each went once: one copy on beta, one outbox row on alpha
    assert rows(b, "SELECT COUNT(*) FROM messages WHERE id IN (?, ?)", early["messageId"], later["messageId"])[0][0] == 2
    assert rows(a, "SELECT COUNT(*) FROM machines_outbox WHERE record_id IN (?, ?)", early["messageId"], later["messageId"])[0][0] == 2
    # local mail to an address served here stays here
    a.cli("inbox", address="team:dave")
    local = a.json("send", "team:dave", "stays on alpha", address="team:alice")
    assert rows(a, "SELECT COUNT(*) FROM machines_outbox WHERE record_id = ?", local["messageId"])[0][0] == 0


def test_the_name_of_a_live_machine_is_not_released_and_never_shared(machines: Callable[..., Machine]) -> None:
    live = machines("gamma")
    live.start_relay()
    live.wait_connected()
    other = machines("gamma", "machine-gamma-2")
    refused = other.cli("machines", "release", "gamma", check=False)
    assert refused.returncode == 1 and refused.stdout == "", refused
    err = refused.stderr.strip()
    assert len(err.splitlines()) == 1 and "gamma looks alive" in err and "--force" in err, err
    assert other.start_relay().wait(60) == 1 and "already used by another machine" in other.relay_error()
    # forced: the name is freed, but the live relay claims it again or stops; two relays of one name never both run
    other.stop()
    assert other.cli("machines", "release", "gamma", "--force").stdout.strip() == "released gamma"
    other.start_relay()
    relays = {"live": live, "other": other}
    stopped = until(lambda: [n for n, m in relays.items() if m.relay is not None and m.relay.poll() is not None], 60,
                    "one of the two relays named gamma to stop")
    assert len(stopped) == 1, stopped
    err = relays[stopped[0]].relay_error().strip()
    assert relays[stopped[0]].relay.returncode == 1 and len(err.splitlines()) == 1 and "already used by another machine" in err, err


def test_an_engine_without_jetstream_is_refused_with_one_line(machines: Callable[..., Machine], tmp_path: Path) -> None:
    from agent_link_machines.testkit import Engine as Server

    plain = Server(tmp_path / "plain-engine", jetstream=False)
    plain.start()
    try:
        m = machines("zeta")
        m.env["AGENT_LINK_ENGINE_URL"] = plain.url
        assert m.start_relay().wait(60) == 1
        err = m.relay_error().strip()
        assert len(err.splitlines()) == 1 and "has no JetStream" in err, err
        assert "ServiceUnavailableError" not in err and "None" not in err, err  # the client's exception text adds nothing
    finally:
        plain.kill()


def test_decline_and_done_travel_back_and_wake_the_waiter(machines: Callable[..., Machine]) -> None:
    a, b = pair(machines)
    outcomes = {}
    for how in ("--decline", "--done"):
        message_id = a.json("send", "team:bob", f"please {how}", "--anticipation", "action", address="team:alice")["messageId"]
        until(lambda message_id=message_id: any(m["id"] == message_id for m in b.json("inbox", address="team:bob")["messages"]), 30,
              "the message on beta")
        b.cli("reply", message_id, how, *(["not today"] if how == "--decline" else []), address="team:bob")
        waited = json.loads(a.cli("wait", message_id, "--timeout-ms", "30000", "--json", address="team:alice").stdout)
        outcomes[how] = waited["outcome"]
        # resolved once on each machine, by bob
        for m in (a, b):
            assert rows(m, "SELECT kind, by_addr FROM resolutions WHERE message_id = ?", message_id) == [(how[2:], "team:bob")]
    assert outcomes == {"--decline": "declined", "--done": "done"}


@pytest.mark.parametrize(("url", "says"), [
    ("http://127.0.0.1:4222", "is not a NATS URL"),
    ("nats://agents:s3cret@127.0.0.1:port", "AGENT_LINK_ENGINE_URL='nats://127.0.0.1:port' is not a NATS URL: its port is not a number"),
    ("WRONG_CREDS", "refused the credentials for user agents"),
    ("NO_USER", "refused the credentials (AGENT_LINK_ENGINE_URL gives none"),
    # the engine has no TLS: a tls:// URL must not send it the password in clear
    ("TLS_ON_PLAIN", "does not offer TLS, which its tls:// URL requires"),
])
def test_a_wrong_url_or_credentials_stop_the_relay_with_one_line(machines: Callable[..., Machine], engine: Engine, url: str, says: str) -> None:
    m = machines("delta")
    m.env["AGENT_LINK_ENGINE_URL"] = {"WRONG_CREDS": engine.url.replace("s3cret", "bad-pass-7q"),
                                      "NO_USER": f"nats://127.0.0.1:{engine.port}",
                                      "TLS_ON_PLAIN": engine.url.replace("nats://", "tls://")}.get(url, url)
    relay = m.start_relay()
    assert relay.wait(60) == 1
    err = m.relay_error().strip()
    assert len(err.splitlines()) == 1 and says in err, err
    assert "bad-pass-7q" not in err and "s3cret" not in err  # no credentials in the message
    # the relay's error is in health too (an MCP server's relay has no terminal), not "start the relay"
    health = link_status(m)
    assert health["relayRunning"] is False and says in health["problem"], health
    assert "bad-pass-7q" not in json.dumps(health) and "s3cret" not in json.dumps(health)


def self_signed(folder: Path) -> tuple[Path, Path]:
    """``(cert.pem, key.pem)`` of a certificate for 127.0.0.1 that signs itself (its own CA)."""
    pytest.importorskip("cryptography")
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return cert_path, key_path


def test_a_tls_url_speaks_tls_to_a_server_that_offers_it_without_requiring_it(machines: Callable[..., Machine], tmp_path: Path) -> None:
    from urllib.request import urlopen

    from agent_link_machines.testkit import Engine as Server, free_port

    cert, key = self_signed(tmp_path)
    server = Server(tmp_path / "tls-engine")
    monitor = free_port()
    conf = server.root / "server.conf"
    # allow_non_tls: the server's INFO says tls_available, not tls_required (nats-py alone would stay in clear)
    conf.write_text(conf.read_text(encoding="utf-8") + f'tls {{ cert_file: "{cert}", key_file: "{key}" }}\nallow_non_tls: true\n'
                    f'http: "127.0.0.1:{monitor}"\n', encoding="utf-8")
    server.start()
    try:
        m = machines("theta")
        m.env.update(AGENT_LINK_ENGINE_URL=server.url.replace("nats://", "tls://"), SSL_CERT_FILE=str(cert))
        m.start_relay()
        m.wait_connected()
        with urlopen(f"http://127.0.0.1:{monitor}/connz", timeout=10) as answer:
            connections = json.load(answer)["connections"]
        assert connections and all(c.get("tls_version") for c in connections), connections
    finally:
        server.kill()


def test_an_unreachable_engine_keeps_sends_accepted_and_says_so(machines: Callable[..., Machine], tmp_path: Path) -> None:
    from agent_link_machines.testkit import free_port

    m = machines("epsilon")
    m.env["AGENT_LINK_ENGINE_URL"] = f"nats://127.0.0.1:{free_port()}"
    relay = m.start_relay()
    until(lambda: m.status().get("error"), 30, "the relay to report the engine unreachable")
    assert relay.poll() is None  # it keeps trying
    health = link_status(m)
    assert health["relayRunning"] is True and health["reachable"] is False
    assert health["problem"].startswith("the engine is unreachable") and "nothing listens there (connection refused)" in health["problem"]
    # a local send still works while the engine is away
    m.cli("inbox", address="team:carol")
    m.cli("send", "team:carol", "local mail", address="team:dave")
    assert rows(m, "SELECT COUNT(*) FROM messages WHERE recipient = 'team:carol'")[0][0] == 1
    assert health["outboxDepth"] == 0
    # the person running it saw why at once, in one line however often it tried
    relay.terminate()
    relay.wait(30)
    said = [line for line in m.relay_error().splitlines() if "nothing listens there" in line]
    assert len(said) == 1 and "AGENT_LINK_ENGINE_URL" in said[0] and "retrying every 0.5 s" in said[0], m.relay_error()
    assert link_status(m)["problem"].startswith("the relay is not running")  # stopped by a signal: at once, no error


def test_not_configured_the_machine_works_alone(tmp_path: Path) -> None:
    import asyncio

    from agent_link_core.app import App

    async def check() -> None:
        app = App.create(env={"AGENT_LINK_STATE_DIR": str(tmp_path / "state"), "HOME": str(tmp_path), "AGENT_LINK_LOAD_PLUGINS": "presence waits machines",
                              "AGENT_LINK_ADDRESS": "team:solo"})
        try:
            outcome = await app.send(caller=app.caller(), to="team:other", body="hello")
            assert outcome.message["recipient"] == "team:other"
            assert app.store.conn.execute("SELECT COUNT(*) FROM machines_outbox").fetchone()[0] == 0
            health = app.health()
            assert health["sections"]["machines"] == {"configured": False, "note": "AGENT_LINK_ENGINE_URL is unset: this machine works alone."}
            listing = await app.list_agents(harness="machines")
            assert listing["sessions"] == [] and listing["complete"] is True
        finally:
            await app.aclose()

    asyncio.run(check())


def test_a_machine_gone_quiet_is_marked_stale_never_dropped(machines: Callable[..., Machine]) -> None:
    a, b = pair(machines)
    b.stop()

    def stale() -> dict[str, Any] | None:
        out = a.json("sessions", "--harness", "machines")
        bob = next((s for s in out["sessions"] if s["address"] == "team:bob"), None)
        return out if bob is not None and bob["machineStale"] else None

    out = until(stale, 30, "beta's listing to turn stale on alpha")
    assert out["complete"] is False
    provider = out["providers"]["machines"]
    assert provider["reason"] == "machines_stale" and provider["machines"]["beta"]["stale"] is True
    health = link_status(a)
    assert health["reachable"] is True and [m["stale"] for m in health["machinesSeen"] if m["name"] == "beta"] == [True]
    # this machine's own relay stopped: everything it lists is stale, and health says why
    a.stop()
    out = until(lambda: (o := a.json("sessions", "--harness", "machines"))["providers"]["machines"]["reason"].startswith("relay_not_running") and o,
                30, "alpha to notice its relay stopped")
    assert out["complete"] is False and all(s["machineStale"] for s in out["sessions"]) and out["sessions"]
    done = a.cli("health", "--json", check=False)
    health = json.loads(done.stdout)["sections"]["machines"]
    assert health["relayRunning"] is False and health["problem"].startswith("the relay is not running")
    assert done.returncode == 1 and json.loads(done.stdout)["problems"][0]["section"] == "machines"  # a problem: exit 1


def test_through_mcp_list_resolve_send_and_wait_across_machines(machines: Callable[..., Machine]) -> None:

    from agent_link_testing.mcp_client import agent_link_mcp

    a, b = pair(machines)

    async def scenario() -> None:
        async with agent_link_mcp({**a.env, "AGENT_LINK_ADDRESS": "team:alice"}) as client:
            listed = await client.call("list_agents", {"harness": "machines"})
            bob = next(s for s in listed["sessions"] if s["address"] == "team:bob")
            assert bob["machine"] == "beta" and listed["complete"] is True
            resolved = await client.call("resolve_agent", {"query": "bob"})
            assert resolved["status"] == "resolved" and resolved["best"]["address"] == "team:bob"
            assert resolved["best"]["machine"] == "beta"
            sent = await client.call("message_agent", {"to": "team:bob", "message": "over MCP", "anticipation": "reply"})
            message_id = sent["messageId"]

            def answer() -> None:
                until(lambda: any(m["id"] == message_id for m in b.json("inbox", "--peek", address="team:bob")["messages"]), 30,
                      "the message on beta")
                b.cli("reply", message_id, "answered on beta", address="team:bob")

            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, answer)
                waited = await client.call("wait_for_agent", {"agent": "team:bob", "replyToMessageId": message_id, "timeoutMs": 45000})
            assert waited["outcome"] == "reply" and "answered on beta" in waited["reply"]["envelope"], waited
            # the wait's own record of the reply (read by alice) may still be on its way out
            for _ in range(60):
                section = (await client.call("agent_link_health", {}))["sections"]["machines"]
                if section["outboxDepth"] == 0:
                    break
                await anyio.sleep(0.5)
            assert section["machine"] == "alpha" and section["reachable"] is True and section["outboxDepth"] == 0
            assert [m["name"] for m in section["machinesSeen"]] == ["alpha", "beta"]

    anyio.run(scenario)


def test_engine_down_30_s_sends_accepted_then_all_delivered(machines: Callable[..., Machine], engine: Engine) -> None:
    import time

    a, b = pair(machines)
    engine.kill()
    down_at = time.monotonic()
    until(lambda: not a.status().get("reachable"), 30, "alpha's relay to see the engine gone")
    ids = [a.json("send", "team:bob", f"while down {n}", address="team:alice")["messageId"] for n in range(20)]
    health = link_status(a)
    assert health["reachable"] is False and health["outboxDepth"] == 20 and health["problem"].startswith("the engine is unreachable")
    time.sleep(max(0.0, 30 - (time.monotonic() - down_at)))  # the outage the issue names: 30 s
    assert a.relay is not None and a.relay.poll() is None and b.relay is not None and b.relay.poll() is None
    engine.start()
    until(lambda: len(rows(b, f"SELECT id FROM messages WHERE id IN ({','.join('?' * len(ids))})", *ids)) == len(ids), 60,
          "every message sent while the engine was down, on beta")
    until(lambda: link_status(a)["outboxDepth"] == 0, 30, "alpha's outbox empty")
    assert rows(b, "SELECT COUNT(*) FROM messages WHERE body LIKE 'while down %'")[0][0] == 20


def test_a_bad_machine_name_is_one_line_and_a_health_problem(machines: Callable[..., Machine]) -> None:
    m = machines("eta")
    m.env["AGENT_LINK_MACHINE"] = "two words"
    assert m.start_relay().wait(60) == 1
    err = m.relay_error().strip()
    assert len(err.splitlines()) == 1 and "AGENT_LINK_MACHINE='two words' is not a machine name" in err, err
    health = link_status(m)
    assert health["machine"] is None and health["problem"].startswith("AGENT_LINK_MACHINE='two words' is not a machine name")
    # mail on the machine itself still works
    m.cli("inbox", address="team:x")
    m.cli("send", "team:x", "local", address="team:y")
    assert rows(m, "SELECT COUNT(*) FROM messages")[0][0] == 1 and rows(m, "SELECT COUNT(*) FROM machines_outbox")[0][0] == 0


def test_credentials_never_reach_status_or_health(machines: Callable[..., Machine], engine: Engine) -> None:
    a = machines("theta")
    a.start_relay()
    a.wait_connected()
    assert "s3cret" not in json.dumps(a.status()) and "s3cret" not in a.cli("machines", "status", "--json").stdout
    assert "s3cret" not in a.cli("health", "--json").stdout
    assert "s3cret" in engine.url  # the machine did use it


def lock_holder(m: Machine) -> int | None:
    """The pid in ``relay.lock`` while a process holds it, else None."""
    from types import SimpleNamespace

    from agent_link_machines.autostart import relay_running

    if not relay_running(SimpleNamespace(state_dir=str(m.state))):
        return None
    text = (m.state / "machines" / "relay.lock").read_text().strip()
    return int(text) if text else None


def parent_of(pid: int) -> int:
    # /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may hold spaces, so split after ")"
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def mcp_server(m: Machine, **extra: str) -> Any:
    import subprocess

    from agent_link_machines.testkit import BIN

    return subprocess.Popen([str(BIN / "agent-link"), "mcp"], env={**m.env, "AGENT_LINK_ADDRESS": "team:alice",
                                                                 "AGENT_LINK_MACHINES_AUTOSTART": "on", **extra},
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_mcp_servers_keep_one_relay_running_and_stop_it(machines: Callable[..., Machine]) -> None:
    a = machines("alpha")
    first = mcp_server(a)
    second = None
    try:
        pid = until(lambda: lock_holder(a), 60, "the MCP server to start alpha's relay")
        assert parent_of(pid) == first.pid
        until(lambda: a.status().get("reachable") and a.status().get("pid") == pid, 60, "the started relay to reach the engine")
        # a relay that dies (kill -9, as a crash) is started again by the same server
        os.kill(pid, signal.SIGKILL)
        pid = until(lambda: (h := lock_holder(a)) not in (None, pid) and h, 60, "the server to start the relay again")
        assert parent_of(pid) == first.pid
        # a second server of the same state dir: the lock keeps it to that one relay
        second = mcp_server(a)
        # the first server stops: its relay stops with it, and the second server starts its own
        first.stdin.close()  # type: ignore[union-attr]
        first.wait(30)
        taken = until(lambda: (h := lock_holder(a)) not in (None, pid) and h, 60, "the second server to start a relay")
        assert parent_of(taken) == second.pid
        assert "another relay" not in (a.state / "machines" / "relay.log").read_text()
    finally:
        for server in (first, second):
            if server is not None and server.poll() is None:
                server.stdin.close()  # type: ignore[union-attr]
                server.wait(30)
    assert lock_holder(a) is None  # no relay left behind


def test_a_relay_an_mcp_server_started_says_in_health_why_it_stopped(machines: Callable[..., Machine], engine: Engine) -> None:
    a = machines("alpha")
    a.env["AGENT_LINK_ENGINE_URL"] = engine.url.replace("s3cret", "bad-pass-7q")
    server = mcp_server(a)
    try:
        health = until(lambda: (h := link_status(a)).get("problem", "").startswith("the relay stopped:") and h, 60,
                       "health to say why the started relay stopped")
        assert "refused the credentials for user agents" in health["problem"] and "relay.log" in health["problem"], health
        assert health["relayRunning"] is False and "bad-pass-7q" not in json.dumps(health)
    finally:
        server.stdin.close()  # type: ignore[union-attr]
        server.wait(30)


def test_autostart_off_starts_no_relay_and_if_none_exits_quietly(machines: Callable[..., Machine]) -> None:
    import asyncio

    from agent_link_core.app import App
    from agent_link_machines.plugin import agent_link_server_tasks

    a = machines("alpha")
    for value, tasks in (("off", 0), ("on", 1), (None, 1)):  # None: the default
        env = {k: v for k, v in a.env.items() if k != "AGENT_LINK_MACHINES_AUTOSTART"} | ({"AGENT_LINK_MACHINES_AUTOSTART": value} if value else {})
        app = App.create(env=env)
        try:
            assert len(agent_link_server_tasks(app=app) or ()) == tasks, value
        finally:
            asyncio.run(app.aclose())
    no_engine = App.create(env={**a.env, "AGENT_LINK_ENGINE_URL": ""})
    try:
        assert agent_link_server_tasks(app=no_engine) is None
    finally:
        asyncio.run(no_engine.aclose())
    a.start_relay()
    a.wait_connected()
    quiet = a.cli("machines", "run", "--if-none", check=False)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    loud = a.cli("machines", "run", check=False)
    assert loud.returncode == 1 and loud.stderr.strip().startswith("agent-link machines: another relay of this state dir")


def test_a_send_from_the_cli_alone_starts_a_relay_that_stops_when_idle(machines: Callable[..., Machine]) -> None:
    a, b = pair(machines)
    a.stop()  # no relay on alpha now, and no MCP server: the CLI alone
    until(lambda: lock_holder(a) is None, 30, "alpha's relay to stop")
    cli_only = {**a.env, "AGENT_LINK_MACHINES_AUTOSTART": "on"}
    nudged = None
    try:
        # local mail to an address nobody serves here starts a relay too (it may be another machine's soon)
        subprocess_cli(cli_only, "send", "team:nobody-yet", "for whoever serves it", address="team:alice")
        nudged = until(lambda: lock_holder(a), 30, "the send to an unserved address to start alpha's relay")
        os.kill(nudged, signal.SIGTERM)
        until(lambda: lock_holder(a) is None, 30, "that relay to stop")
        (a.state / "machines" / "nudged").unlink()  # a nudge starts at most one relay per CHECK_S: forget that one
        sent = json.loads(subprocess_cli(cli_only, "send", "team:bob", "from the CLI alone", "--anticipation", "reply", "--json",
                                         address="team:alice"))
        nudged = until(lambda: lock_holder(a), 30, "the send to start alpha's relay")
        until(lambda: any(m["id"] == sent["messageId"] for m in b.json("inbox", address="team:bob")["messages"]), 30,
              "the message on beta")
        b.cli("reply", sent["messageId"], "answered", address="team:bob")
        # the relay the send started brings the reply back
        waited = json.loads(a.cli("wait", sent["messageId"], "--timeout-ms", "30000", "--json", address="team:alice").stdout)
        assert waited["outcome"] == "reply", waited
        assert lock_holder(a) == nudged  # one relay, the one the send started
    finally:
        if nudged is not None:
            os.kill(nudged, signal.SIGTERM)
    until(lambda: lock_holder(a) is None, 30, "the started relay to stop")
    # a relay told to stop when idle does so once its outbox is empty and nothing comes
    idle = a.cli("machines", "run", "--until-idle", "1", check=False, timeout=120)
    assert (idle.returncode, idle.stderr) == (0, ""), idle


def subprocess_cli(env: dict[str, str], *args: str, address: str) -> str:
    import subprocess

    from agent_link_machines.testkit import BIN

    done = subprocess.run([str(BIN / "agent-link"), *args], env={**env, "AGENT_LINK_ADDRESS": address}, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


async def app_send(m: Machine, sender: str, to: str, body: str) -> Any:
    """``App.send`` in this process as machine ``m``'s ``sender`` (an ``anticipation="reply"``
    message), the way the MCP tool ``message_agent`` sends; returns its outcome."""
    from agent_link_core.app import App

    app = App.create(env={**m.env, "AGENT_LINK_ADDRESS": sender})
    try:
        return await app.send(caller=app.caller(), to=to, body=body, anticipation="reply")
    finally:
        await app.aclose()


def test_a_role_held_on_another_machine_reaches_its_holder_there(machines: Callable[..., Machine]) -> None:
    a, b = machines("alpha"), machines("beta")
    for m in (a, b):
        m.env["AGENT_LINK_LOAD_PLUGINS"] = "presence waits machines roles"
        (m.state / "roles").mkdir(parents=True, exist_ok=True)
    # the user gave bob the reviewer role on beta (beta's own roles.json), with beta's procedure;
    # alpha happens to keep another text under the same name, which is not the holder's
    (b.state / "roles.json").write_text(json.dumps({"version": 1, "roles": {"reviewer": {"address": "team:bob"}}}), encoding="utf-8")
    (b.state / "roles" / "reviewer.md").write_text("Beta's way: read the diff, then the tests.", encoding="utf-8")
    (a.state / "roles" / "reviewer.md").write_text("alpha's stale copy", encoding="utf-8")
    b.cli("inbox", address="team:bob")
    for m in (a, b):
        m.start_relay()
    for m in (a, b):
        m.wait_connected()

    def listed() -> bool:
        try:
            directory = json.loads((a.state / "machines" / "directory.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return bool(directory["machines"].get("beta", {}).get("roles", {}).get("reviewer") == ["team:bob"])

    until(listed, 30, "alpha to learn that bob holds role:reviewer on beta")
    # as an MCP tool sends (the CLI's send passes on the holder's address alone, without the role)
    sent = anyio.run(lambda: app_send(a, "team:alice", "role:reviewer", "please review the release notes"))
    message_id = sent.message["id"]
    assert (sent.message["recipient"], sent.address_warning) == ("team:bob", None), sent

    def arrived() -> dict[str, Any] | None:
        inbox = b.json("inbox", address="team:bob")
        return inbox if any(m["id"] == message_id for m in inbox["messages"]) else None

    inbox = until(arrived, 30, "the role's message on beta")
    # beta's envelope says it came through the role, from alpha, and shows beta's own procedure
    # (version 1 of beta's numbering), once, as a local send to the role would
    block = inbox["renderedBlock"]
    assert 'via="role:reviewer"' in block and '<machine from="alpha" />' in block
    assert 'procedure="reviewer@1"' in block and "<procedure " in block and "Beta's way: read the diff, then the tests." in block
    assert "alpha's stale copy" not in block and "roleProcedure" not in sent.result_fields
    assert rows(a, "SELECT COUNT(*) FROM role_procedure_versions") == [(0,)]  # alpha recorded no version of its copy
    b.cli("reply", message_id, "reviewed", address="team:bob")
    waited = a.json("wait", message_id, "--timeout-ms", "30000", address="team:alice")
    assert waited["outcome"] == "reply" and waited["reply"]["from"] == "team:bob", waited

    # the next message of the same version names it without the text again
    again = anyio.run(lambda: app_send(a, "team:alice", "role:reviewer", "and the changelog")).message["id"]

    def arrived_again() -> dict[str, Any] | None:
        inbox = b.json("inbox", address="team:bob")
        return inbox if any(m["id"] == again for m in inbox["messages"]) else None

    block = until(arrived_again, 30, "the second role message on beta")["renderedBlock"]
    assert 'procedure="reviewer@1"' in block and "<procedure " not in block



def test_direct_mail_to_a_role_holder_follows_the_holders_machines_rules(machines: Callable[..., Machine]) -> None:
    from agent_link_core.errors import AgentLinkError

    a, b = machines("alpha"), machines("beta")
    for m, roles, mode in ((a, {"writer": {"address": "team:alice"}}, "off"), (b, {"reviewer": {"address": "team:bob"}}, "enforce")):
        m.env["AGENT_LINK_LOAD_PLUGINS"] = "presence waits machines roles"
        m.state.mkdir(parents=True, exist_ok=True)
        (m.state / "roles.json").write_text(json.dumps({"version": 1, "enforcement": mode, "roles": roles}), encoding="utf-8")
    b.cli("inbox", address="team:bob")
    for m in (a, b):
        m.start_relay()
    for m in (a, b):
        m.wait_connected()

    def published() -> bool:
        try:
            beta = json.loads((a.state / "machines" / "directory.json").read_text(encoding="utf-8"))["machines"].get("beta", {})
        except (OSError, ValueError):
            return False
        return bool(beta.get("roleEnforcement") == "enforce" and "team:bob" in beta.get("served", []))

    until(published, 30, "alpha to learn beta's enforcement and bob")
    # alice (a role holder on alpha, where nothing is enforced) writes to bob directly: beta's
    # rules refuse it at once, on alpha, as a local send would be refused
    with pytest.raises(AgentLinkError) as e:
        anyio.run(lambda: app_send(a, "team:alice", "team:bob", "direct"))
    assert e.value.code == "permission_denied" and e.value.details["replacement"] == {"to": "role:reviewer"}, e.value
    assert rows(a, "SELECT COUNT(*) FROM machines_outbox") == [(0,)]
    # through the role it arrives
    message_id = anyio.run(lambda: app_send(a, "team:alice", "role:reviewer", "through the role")).message["id"]
    until(lambda: any(m["id"] == message_id for m in b.json("inbox", address="team:bob")["messages"]), 30, "the role message on beta")

def test_receipts_on_both_machines(machines: Callable[..., Machine]) -> None:
    """Each machine keeps receipts of what its own database sees (two ledgers): the sender's
    machine learns the delivery and the resolution from the records that come back."""
    a, b = machines("alpha"), machines("beta")
    for m in (a, b):
        m.env["AGENT_LINK_LOAD_PLUGINS"] = "presence waits machines receipts listings"
    b.cli("inbox", address="team:bob")
    a.cli("inbox", address="team:alice")
    for m in (a, b):
        m.start_relay()
    for m in (a, b):
        m.wait_connected()
    until(lambda: listed_on(a, "team:bob"), 30, "alpha to list team:bob")
    done = a.cli("send", "team:bob", "audit me", "--anticipation", "reply", "--json", address="team:alice")
    message_id = json.loads(done.stdout)["messageId"]
    until(lambda: any(m["id"] == message_id for m in b.json("inbox", address="team:bob")["messages"]), 30, "the message on beta")
    b.cli("reply", message_id, "audited", address="team:bob")
    assert a.json("wait", message_id, "--timeout-ms", "30000", address="team:alice")["outcome"] == "reply"

    def receipts(m: Machine) -> list[tuple[Any, ...]]:
        return [(action, kind, json.loads(data)) for action, kind, data in
                rows(m, "SELECT action, kind, data FROM receipts WHERE message_id = ? ORDER BY seq", message_id)]

    until(lambda: [(x, k) for x, k, _ in receipts(a)] == [("message_agent", None), ("message_status", "delivery"),
                                                           ("message_status", "resolution")], 30,
          "alpha's receipts of the send, of beta's delivery and of bob's reply")
    on_a = receipts(a)
    assert on_a[1][2]["evidence"]["machine"] == "beta" and on_a[2][2]["resolution"]["by"] == "team:bob"
    on_b = receipts(b)
    assert [(x, k) for x, k, _ in on_b] == [("message_agent", None), ("message_status", "delivery"),
                                           ("message_status", "resolution")], on_b
    # beta's copy of the send names the remote sender and the origin computed on alpha
    assert on_b[0][2]["actor"] == "team:alice" and on_b[0][2]["origin"] == on_a[0][2]["origin"]
    # the reply, the other way: its receipt on each machine, and its delivery to alice (the
    # wait on alpha), which beta learns from the record alpha sends back
    reply_id = rows(a, "SELECT reply_message_id FROM resolutions WHERE message_id = ?", message_id)[0][0]
    for m in (a, b):
        until(lambda m=m: rows(m, "SELECT action, kind FROM receipts WHERE message_id = ? ORDER BY seq", reply_id) == [
            ("reply_message", None), ("message_status", "delivery")], 30, f"{m.name}'s receipts of the reply")
    [(evidence,)] = rows(b, "SELECT data FROM receipts WHERE message_id = ? AND kind = 'delivery'", reply_id)
    assert json.loads(evidence)["evidence"]["machine"] == "alpha"
