"""Bad settings and the link's status, without an engine: a mistyped URL is one line naming
``AGENT_LINK_ENGINE_URL`` from ``machines run``, ``machines status`` and ``health`` (never a
traceback, never a plugin problem that outlives the fix); the relay's files as written are
judged by the writer's heartbeat, one stale machine marks only its own sessions stale, a
relay that stopped on an error says why in health, and health's text shows the link."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_core.store import now_ms
from agent_link_machines.common import check_url, redact, settings_key, url_user, write_json
from agent_link_machines.testkit import BIN

GOOD = "nats://ci:pw-ci@127.0.0.1:4222"
#: (URL, what the line says is wrong): the kind of mistyped URL, each a line of its own
BAD_URLS = [
    ("nats://ci:pw-ci@127.0.0.1:port", "its port is not a number"),
    ("nats://ci:pw-ci@127.0.0.1:99999", "its port 99999 is not in 1-65535"),
    ("nats://ci:pw-ci@[::1", "the [ of its IPv6 host is not closed"),
    ("nats://ci:pw-ci@::1:4222", "an IPv6 host must be written in [ ]"),
    ("nats://ci:pw-ci@:4222", "it names no host"),
    ("http://ci:pw-ci@127.0.0.1:4222", "the scheme must be nats://"),
    ("ci:pw-ci@127.0.0.1:4222", "the scheme must be nats://"),
    (f"{GOOD},nats://ci:pw-ci@127.0.0.1:port", "its port is not a number"),
]


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_LINK_")}
    return {**base, "HOME": str(home), "AGENT_LINK_STATE_DIR": str(home / ".agent-link"), "AGENT_LINK_LOAD_PLUGINS": "presence waits machines listings",
            "AGENT_LINK_MACHINE": "ci", "AGENT_LINK_MACHINES_AUTOSTART": "off", "AGENT_LINK_ENGINE_URL": GOOD, **extra}


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "agent-link"), *args], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("url", "says"), BAD_URLS)
def test_a_bad_url_is_one_line_naming_the_setting(url: str, says: str) -> None:
    with pytest.raises(ValueError) as caught:
        check_url(url)
    line = str(caught.value)
    assert line.startswith("AGENT_LINK_ENGINE_URL=") and says in line and "\n" not in line, line
    assert "pw-ci" not in line
    assert "pw-ci" not in (redact(url) or "")  # redact never raises, and never shows the password


def test_redact_and_user_never_show_a_password_whatever_it_holds() -> None:
    assert redact("nats://ci:pa/ss@word@host:4222") == "nats://host:4222"
    assert redact("tls://tok@h1:4222, nats://h2") == "tls://h1:4222,nats://h2"
    assert url_user("nats://ci:pa/ss@host:4222") == "ci" and url_user("nats://tok@host") is None and url_user("nats://host") is None
    assert check_url("nats://[::1]:4222, tls://h") == ["nats://[::1]:4222", "tls://h"]


def test_a_bad_url_from_every_command_then_fixed_leaves_no_problem(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    for url, says in BAD_URLS[:3]:
        bad = {**env, "AGENT_LINK_ENGINE_URL": url}
        for args in (("machines", "run"), ("machines", "status"), ("health",)):
            done = cli(bad, *args)
            assert done.returncode == 1, (args, done.stdout, done.stderr)
            assert "Traceback" not in done.stderr + done.stdout and "plugin problem" not in done.stdout, (args, done.stdout, done.stderr)
            shown = done.stderr if args[1:] == ("run",) else done.stdout
            assert "AGENT_LINK_ENGINE_URL=" in shown and says in shown, (args, shown)
            assert "pw-ci" not in done.stdout + done.stderr
        assert len(cli(bad, "machines", "run").stderr.strip().splitlines()) == 1
    # release, too: one line for a bad URL, a bad name of this machine or of the one to release
    for extra, says in (({"AGENT_LINK_ENGINE_URL": BAD_URLS[0][0]}, "its port is not a number"),
                        ({"AGENT_LINK_MACHINE": "two words"}, "AGENT_LINK_MACHINE='two words' is not a machine name")):
        done = cli({**env, **extra}, "machines", "release", "ci")
        assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1 and says in done.stderr, done.stderr
    done = cli(env, "machines", "release", "no such")  # a bad NAME argument is bad usage: exit 2
    assert done.returncode == 2 and done.stderr.strip() == "agent-link machines: 'no such' is not a machine name (1-64 of A-Z a-z 0-9 _ -).", done.stderr
    # the URL fixed: nothing of the bad one stays in health (the relay never ran: no relay problem about the URL)
    fixed = cli(env, "health")
    assert "AGENT_LINK_ENGINE_URL=" not in fixed.stdout and "plugin problem" not in fixed.stdout, fixed.stdout


def make_app(tmp_path: Path, **extra: str) -> App:
    return App.create(env=env_for(tmp_path, **extra))


def machines_dir(app: App) -> Path:
    return Path(app.config.state_dir) / "machines"


def write_status(app: App, **fields: Any) -> None:
    write_json(machines_dir(app) / "status.json", {"at": now_ms(), "heartbeatMs": 5000, "machine": "ci", "reachable": True,
                                                   "lastContactMs": now_ms(), "error": None, "settings": settings_key(app.config), **fields})


def entry(age_ms: int, *addresses: str, heartbeat_ms: int | None = 5000) -> dict[str, Any]:
    at = now_ms() - age_ms
    return {"at": at, **({"heartbeatMs": heartbeat_ms} if heartbeat_ms else {}), "instance": "x", "served": list(addresses),
            "sessions": [{"address": a, "harness": "team", "id": a, "lastActivityMs": at} for a in addresses]}


def listing(app: App) -> Any:
    return asyncio.run(app.harnesses["machines"].list_sessions())


def test_one_stale_machine_marks_only_its_own_sessions_stale(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    try:
        write_status(app)
        # "alpha" sorts before the others: its stale listing must not spill onto them
        write_json(machines_dir(app) / "directory.json", {"at": now_ms(), "machines": {
            "alpha": entry(60_000, "team:old"), "beta": entry(1_000, "team:bob"), "gamma": entry(2_000, "team:gus")}})
        found = listing(app)
        stale = {s.address: s.extra["machineStale"] for s in found.sessions}
        assert stale == {"team:old": True, "team:bob": False, "team:gus": False}
        assert {n: m["stale"] for n, m in found.provider["machines"].items()} == {"alpha": True, "beta": False, "gamma": False}
        assert found.provider["reason"] == "machines_stale" and found.complete is False
        assert re.fullmatch(r"alpha's listing is 6\d s old", found.provider["detail"]), found.provider
        # the relay stopped: then every listing it copied is stale
        write_status(app, stopped=True)
        found = listing(app)
        assert found.provider["reason"].startswith("relay_not_running") and all(s.extra["machineStale"] for s in found.sessions)
    finally:
        asyncio.run(app.aclose())


def test_a_listing_is_judged_by_its_writers_heartbeat(tmp_path: Path) -> None:
    app = make_app(tmp_path)  # this process: the default heartbeat, 5 s (stale after 15 s)
    try:
        write_status(app, heartbeatMs=30_000, at=now_ms() - 20_000)  # a relay beating every 30 s, 20 s ago: running
        write_json(machines_dir(app) / "directory.json", {"at": now_ms(), "machines": {
            "slow": entry(20_000, "team:slow", heartbeat_ms=30_000),  # beats every 30 s: fresh at 20 s
            "fast": entry(20_000, "team:fast", heartbeat_ms=1_000),  # beats every 1 s: stale at 20 s
            "old": entry(10_000, "team:older", heartbeat_ms=None)}})  # an earlier version: the reader's setting
        stale = {s.address: s.extra["machineStale"] for s in listing(app).sessions}
        assert stale == {"team:slow": False, "team:fast": True, "team:older": False}
        health = app.health()["sections"]["machines"]
        assert health["relayRunning"] is True and "problem" not in health, health
        assert {m["name"]: m["stale"] for m in health["machinesSeen"]} == {"slow": False, "fast": True, "old": False}
    finally:
        asyncio.run(app.aclose())


def test_a_relay_that_stopped_on_an_error_says_why_in_health(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    try:
        refused = "the engine at nats://127.0.0.1:4222 refused the credentials for user ci (Authorization Violation)."
        write_status(app, stopped=True, reachable=False, error=refused)  # as Relay.run writes it on a MachinesError
        health = app.health()
        section = health["sections"]["machines"]
        assert section["relayRunning"] is False and section["reachable"] is None
        assert section["problem"].startswith(f"the relay stopped: {refused[:-1]} (its log: ") and "relay.log" in section["problem"]
        assert [p["section"] for p in health["problems"]] == ["machines"]
        # the same error under other settings (the person fixed the password since): not shown
        write_status(app, stopped=True, reachable=False, error=refused, settings="other")
        assert app.health()["sections"]["machines"]["problem"].startswith("the relay is not running")
        # stopped without an error (a signal, idle): not running, and how to start it
        write_status(app, stopped=True, reachable=False)
        assert app.health()["sections"]["machines"]["problem"].startswith("the relay is not running")
    finally:
        asyncio.run(app.aclose())


def test_health_text_shows_the_link_in_one_line(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    app = App.create(env=env)
    try:
        write_status(app)
        write_json(machines_dir(app) / "directory.json", {"at": now_ms(), "machines": {
            "ci": entry(500), "devbox": entry(2_000, "team:bob"), "laptop": entry(40_000, "team:alice")}})
    finally:
        asyncio.run(app.aclose())
    done = cli(env, "health")
    line = next((ln.strip() for ln in done.stdout.splitlines() if ln.strip().startswith("machines:")), None)
    assert line is not None, done.stdout
    assert line.startswith("machines: ci -> nats://127.0.0.1:4222, relay running, reachable, last contact ")
    assert re.search(r"outbox 0, seen devbox \(fresh\), laptop \(stale \d+ s\)$", line), line
    status = cli(env, "machines", "status")
    assert status.returncode == 0 and "last contact " in status.stdout, status.stdout
    assert re.search(r"^  devbox: 1 sessions, listed \d+ s ago$", status.stdout, re.M), status.stdout
    assert re.search(r"^  laptop: 1 sessions, listed \d+ s ago  \(stale\)$", status.stdout, re.M), status.stdout
    # a listing with a stale machine names it on stderr, not only the reason's code
    listed = cli(env, "sessions")
    assert re.search(r"not fully listed \(machines_stale: laptop's listing is \d+ s old\)", listed.stderr), listed.stderr


def test_a_creds_file_without_nkeys_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_link_machines.relay import MachinesError, Relay

    creds = tmp_path / "ci.creds"
    creds.write_text("not checked before nkeys\n", encoding="utf-8")
    app = make_app(tmp_path, AGENT_LINK_ENGINE_CREDS=str(creds))
    try:
        Relay(app)  # nkeys is a dependency of the plugin (nats-py[nkeys]): a creds file is taken
        monkeypatch.setitem(sys.modules, "nkeys", None)  # as where it is not installed
        with pytest.raises(MachinesError, match=r"^AGENT_LINK_ENGINE_CREDS needs the nkeys package.*pip install nkeys"):
            Relay(app)
    finally:
        asyncio.run(app.aclose())


def test_the_status_file_names_its_heartbeat_and_a_stop(tmp_path: Path) -> None:
    from agent_link_machines.relay import Relay

    app = make_app(tmp_path, AGENT_LINK_MACHINES_HEARTBEAT_MS="30000")
    try:
        relay = Relay(app)
        relay._write_status()
        written = json.loads((machines_dir(app) / "status.json").read_text())
        assert written["heartbeatMs"] == 30_000 and written["stopped"] is False
        assert asyncio.run(relay.local_listing())["heartbeatMs"] == 30_000
    finally:
        asyncio.run(app.aclose())


def test_a_harness_that_cannot_list_now_keeps_the_sessions_it_listed_last(tmp_path: Path) -> None:
    """A listing that fails or stops early this heartbeat (the host slow or away) must not take the harness's sessions out
    of the directory: another machine would refuse mail to them as not found. A complete listing replaces them."""
    from agent_link_core.harness import SessionListing
    from agent_link_core.model import Session
    from agent_link_machines.relay import Relay
    from agent_link_testing.harnesses import HarnessPlugin, ScriptedHarness

    class Flaky(ScriptedHarness):
        answers: list[SessionListing | None] = []

        async def list_sessions(self, *, include_archived: bool = False, limit: int = 200) -> SessionListing:
            answer = self.answers.pop(0)
            return answer if answer is not None else await super().list_sessions(include_archived=include_archived, limit=limit)

    flaky = Flaky("team", ("one", "two"))
    app = App.create(env=env_for(tmp_path), extra_plugins=(HarnessPlugin(flaky),))
    try:
        relay = Relay(app)

        def listed() -> tuple[list[str], list[str]]:
            entry = asyncio.run(relay.local_listing())
            return sorted(v["address"] for v in entry["sessions"] if v["harness"] == "team"), entry["incomplete"]

        Flaky.answers = [None, SessionListing(provider={"available": False, "reason": "timeout"}, complete=False),
                         SessionListing([Session("team:two", "team", "two")], complete=False),
                         SessionListing([Session("team:three", "team", "three")])]
        assert listed() == (["team:one", "team:two"], [])
        assert listed() == (["team:one", "team:two"], ["team"])  # failed: kept
        assert listed() == (["team:one", "team:two"], ["team"])  # stopped early: what it found, and the rest kept
        assert listed() == (["team:three"], [])  # complete: as listed
    finally:
        asyncio.run(app.aclose())


def test_an_engine_older_than_2_10_is_one_line_with_its_version(tmp_path: Path) -> None:
    from agent_link_machines.relay import MachinesError, Relay

    async def check() -> None:
        # a stand-in server that announces NATS 2.9.0 and answers PING: all a connection needs
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            info = {"server_id": "OLD", "version": "2.9.0", "proto": 1, "headers": True, "max_payload": 1048576}
            writer.write(b"INFO " + json.dumps(info).encode() + b"\r\n")
            while line := await reader.readline():
                if line.startswith(b"PING"):
                    writer.write(b"PONG\r\n")
                    await writer.drain()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        app = make_app(tmp_path, AGENT_LINK_ENGINE_URL=f"nats://127.0.0.1:{port}")
        try:
            with pytest.raises(MachinesError) as caught:
                await Relay(app).probe()
            assert str(caught.value) == "the engine is NATS 2.9.0; agent-link needs 2.10 or later."
        finally:
            server.close()
            await app.aclose()

    asyncio.run(check())


def test_a_send_under_a_bad_machine_name_warns_in_one_line_and_keeps_the_mail(tmp_path: Path) -> None:
    env = env_for(tmp_path, AGENT_LINK_MACHINE="two words")
    folder = Path(env["AGENT_LINK_STATE_DIR"]) / "machines"
    # another machine lists team:bob: with a good name this send would go there
    write_json(folder / "directory.json", {"at": now_ms(), "machines": {"beta": entry(1_000, "team:bob")}})
    sent = cli({**env, "AGENT_LINK_ADDRESS": "team:alice"}, "send", "team:bob", "kept here meanwhile")
    assert sent.returncode == 0, sent.stderr
    warned = [line for line in sent.stderr.splitlines() if "AGENT_LINK_MACHINE" in line]
    assert warned == [line for line in sent.stderr.splitlines() if line.startswith("warning: AGENT_LINK_MACHINE='two words' is not a machine name")]
    assert len(warned) == 1 and "kept here" in warned[0], sent.stderr
    first_id = sent.stdout.split()[1]  # "queued: <id> to team:bob"
    as_json = cli({**env, "AGENT_LINK_ADDRESS": "team:alice"}, "send", "team:bob", "again", "--json")
    data = json.loads(as_json.stdout)
    assert [w["details"] for w in data["warnings"] if w["code"] == "machines_bad_name"] == [
        {"setting": "AGENT_LINK_MACHINE", "value": "two words"}], data
    # never lost: both stored here, none in the outbox (the relay cannot run under that name)
    inbox = json.loads(cli({**env, "AGENT_LINK_ADDRESS": "team:bob"}, "inbox", "--json").stdout)
    assert sorted(m["id"] for m in inbox["messages"]) == sorted([data["messageId"], first_id]), inbox
    assert "kept here meanwhile" in inbox["renderedBlock"] and "again" in inbox["renderedBlock"]
    with sqlite3.connect(Path(env["AGENT_LINK_STATE_DIR"]) / "agent-link.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM machines_outbox").fetchone()[0] == 0
    # fixed: no warning any more
    fixed = cli({**env, "AGENT_LINK_MACHINE": "alpha", "AGENT_LINK_ADDRESS": "team:alice"}, "send", "team:carol", "fine", "--json")
    assert "machines_bad_name" not in fixed.stdout and "AGENT_LINK_MACHINE" not in fixed.stderr, fixed


def test_a_role_procedure_that_differs_on_another_machine_is_shown(tmp_path: Path) -> None:
    from agent_link_machines.relay import Relay

    app = make_app(tmp_path, AGENT_LINK_LOAD_PLUGINS="presence waits machines roles")
    try:
        (Path(app.config.state_dir) / "roles").mkdir(parents=True, exist_ok=True)
        (Path(app.config.state_dir) / "roles" / "reviewer.md").write_text("Read the diff, then the tests.", encoding="utf-8")
        (Path(app.config.state_dir) / "roles" / "writer.md").write_text("Short sentences.", encoding="utf-8")
        # this machine's listing publishes its procedures' versions (none recorded yet: no send used them)
        published = asyncio.run(Relay(app).local_listing())["procedures"]
        assert set(published) == {"reviewer", "writer"} and published["reviewer"]["version"] is None, published
        mine = published["reviewer"]["sha256"]
        write_status(app)
        write_json(machines_dir(app) / "directory.json", {"at": now_ms(), "machines": {
            "beta": {**entry(1_000, "team:bob"), "procedures": {"reviewer": {"version": 2, "sha256": "0" * 64},
                                                               "writer": published["writer"]}},
            "gamma": {**entry(1_000, "team:gus"), "procedures": {"reviewer": {"version": 1, "sha256": mine}}},
            "old": entry(1_000, "team:old")}})  # an earlier version publishes no procedures: nothing to compare
        section = app.health()["sections"]["machines"]
        assert section["procedureMismatches"] == [{"role": "reviewer", "machine": "beta", "there": {"version": 2, "sha256": "0" * 64},
                                                   "here": {"version": None, "sha256": mine}}], section
        assert ", procedure of reviewer differs on beta (v2 there, v? here)," in section["summary"], section["summary"]
        status = cli(env_for(tmp_path, AGENT_LINK_LOAD_PLUGINS="presence waits machines roles"), "machines", "status")
        assert "procedure of reviewer differs on beta (v2 there, v? here)" in status.stdout, status.stdout
    finally:
        asyncio.run(app.aclose())


def test_health_names_the_addresses_several_machines_serve(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    assert cli({**env, "AGENT_LINK_ADDRESS": "team:mine"}, "inbox").returncode == 0  # served here
    app = App.create(env=env)
    try:
        write_status(app)
        write_json(machines_dir(app) / "directory.json", {"at": now_ms(), "machines": {
            "beta": entry(1_000, "team:dup", "team:mine", "team:bob"), "gamma": entry(1_000, "team:dup")}})
        section = app.health()["sections"]["machines"]
        assert section["sharedAddresses"] == [{"address": "team:dup", "machines": ["beta", "gamma"]},
                                              {"address": "team:mine", "machines": ["beta", "ci"]}], section
        assert ", team:dup served on beta and gamma, team:mine served on beta and ci" in section["summary"], section["summary"]
        write_json(machines_dir(app) / "directory.json", {"at": now_ms(), "machines": {"beta": entry(1_000, "team:bob")}})
        assert app.health()["sections"]["machines"]["sharedAddresses"] == []
    finally:
        asyncio.run(app.aclose())
