"""The opencode harness's discovery against fake opencode servers (a standard-library HTTP
server answering ``GET /session`` and ``GET /session/status`` as opencode 1.18 does): sessions
with their busy state, basic auth, servers that are down, refuse or answer garbage, bad URLs in
the setting, and the listing through the CLI, ``list_agents`` of a real MCP client session and
the web page."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agent_link_opencode.harness import OpencodeHarness, parse_servers

ONLY_ME = {"AGENT_LINK_LOAD_PLUGINS": "opencode"}


@dataclass
class FakeServer:
    """What one fake opencode server answers; ``seen_auth`` records the Authorization headers."""

    sessions: Any = field(default_factory=list)
    status: Any = field(default_factory=dict)
    password: str | None = None
    raw: bytes | None = None
    seen_auth: list[str | None] = field(default_factory=list)
    url: str = ""


def session_entry(sid: str, title: str, updated: int, directory: str = "/work/p", **extra: Any) -> dict[str, Any]:
    return {"id": sid, "slug": "s-" + sid, "projectID": "global", "directory": directory, "title": title,
            "version": "1.18.33", "time": {"created": updated - 10, "updated": updated, **extra}}


@pytest.fixture
def fake() -> Iterator[Any]:
    started: list[ThreadingHTTPServer] = []

    def start(server: FakeServer) -> FakeServer:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
                pass

            def do_GET(self) -> None:  # noqa: N802
                auth = self.headers.get("Authorization")
                server.seen_auth.append(auth)
                if server.password is not None and auth != "Basic " + base64.b64encode(f"opencode:{server.password}".encode()).decode():
                    self.send_response(401)
                    self.end_headers()
                    return
                body = {"/session": server.sessions, "/session/status": server.status}.get(self.path)
                if body is None and self.path.startswith("/session/") and isinstance(server.sessions, list):
                    wanted = self.path[len("/session/"):]
                    body = next((e for e in server.sessions if isinstance(e, dict) and e.get("id") == wanted), None)
                data = server.raw if server.raw is not None else json.dumps(body).encode()
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        started.append(httpd)
        server.url = f"http://127.0.0.1:{httpd.server_address[1]}"
        return server

    yield start
    for httpd in started:
        httpd.shutdown()
        httpd.server_close()


def closed_port_url() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def harness(monkeypatch: pytest.MonkeyPatch, servers: str, password: str | None = None) -> OpencodeHarness:
    from agent_link_core.app import App

    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "opencode")
    monkeypatch.setenv("AGENT_LINK_OPENCODE_SERVERS", servers)
    if password is not None:
        monkeypatch.setenv("AGENT_LINK_OPENCODE_PASSWORD", password)
    app = App.create()
    found = app.harnesses["opencode"]
    assert isinstance(found, OpencodeHarness)
    return found


def test_parse_servers_keeps_http_urls_in_order_and_names_the_bad_ones() -> None:
    urls, bad = parse_servers(" http://127.0.0.1:4096/, https://h:1 ,, ftp://x, 127.0.0.1:5, http://127.0.0.1:4096, http://h/p")
    assert urls == ["http://127.0.0.1:4096", "https://h:1"]
    assert bad == ["ftp://x", "127.0.0.1:5", "http://h/p"]


@pytest.mark.anyio
async def test_sessions_of_two_servers_with_status_newest_first_and_one_copy_each(fake: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    a = fake(FakeServer(sessions=[session_entry("ses_a1", "Alpha", 1000), session_entry("ses_shared", "Shared", 3000)],
                        status={"ses_a1": {"type": "busy"}}))
    b = fake(FakeServer(sessions=[session_entry("ses_shared", "Shared", 3000), session_entry("ses_b1", "Beta", 2000, "/work/q"),
                                  session_entry("ses_old", "Old", 500, archived=600), {"id": "bad id!"}, "junk"]))
    listing = await harness(monkeypatch, f"{a.url},{b.url}").list_sessions()
    assert listing.complete and listing.provider["available"] and listing.provider["reason"] is None
    assert [s.address for s in listing.sessions] == ["opencode:ses_shared", "opencode:ses_b1", "opencode:ses_a1"]
    by_id = {s.id: s for s in listing.sessions}
    assert by_id["ses_a1"].extra["status"] == "busy" and by_id["ses_b1"].extra["status"] == "idle"
    assert by_id["ses_shared"].extra["server"] == a.url and by_id["ses_b1"].extra["server"] == b.url
    assert by_id["ses_b1"].cwd == "/work/q" and by_id["ses_b1"].title == "Beta" and by_id["ses_b1"].last_activity_ms == 2000
    assert by_id["ses_a1"].receive == {"push": "opencode-prompt", "nudge": None, "pull": True}
    with_archived = await harness(monkeypatch, f"{a.url},{b.url}").list_sessions(include_archived=True)
    assert {s.id: s.receive["push"] for s in with_archived.sessions}["ses_old"] is None  # archived: mail waits
    assert (await harness(monkeypatch, b.url).get_session("ses_old")) is not None
    assert (await harness(monkeypatch, b.url).get_session("ses_none")) is None


@pytest.mark.anyio
async def test_the_password_is_sent_and_a_refusal_is_reported(fake: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    locked = fake(FakeServer(sessions=[session_entry("ses_l", "Locked", 1)], password="pw"))
    ok = await harness(monkeypatch, locked.url, password="pw").list_sessions()
    assert [s.id for s in ok.sessions] == ["ses_l"] and ok.complete
    assert locked.seen_auth[-1] == "Basic " + base64.b64encode(b"opencode:pw").decode()
    monkeypatch.delenv("AGENT_LINK_OPENCODE_PASSWORD")
    refused = await harness(monkeypatch, locked.url).list_sessions()
    assert refused.sessions == [] and not refused.complete
    assert refused.provider["available"] is False and refused.provider["reason"] == "unauthorized"


@pytest.mark.anyio
@pytest.mark.parametrize("case", ["down", "garbage", "wrong_shape"])
async def test_a_server_that_cannot_be_read_makes_the_listing_incomplete(case: str, fake: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    good = fake(FakeServer(sessions=[session_entry("ses_g", "Good", 1)]))
    if case == "down":
        other, reason = closed_port_url(), "unreachable"
    elif case == "garbage":
        other, reason = fake(FakeServer(raw=b"<html>not json")).url, "bad_answer"
    else:
        other, reason = fake(FakeServer(sessions={"not": "a list"})).url, "bad_answer"
    listing = await harness(monkeypatch, f"{other},{good.url}").list_sessions()
    assert [s.id for s in listing.sessions] == ["ses_g"] and not listing.complete
    assert listing.provider["available"] is True and listing.provider["reason"] == reason
    assert [(s["url"], s["available"]) for s in listing.provider["servers"]] == [(other, False), (good.url, True)]


@pytest.mark.anyio
async def test_bad_urls_and_no_servers_are_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    none = await harness(monkeypatch, " , ").list_sessions()
    assert none.sessions == [] and none.complete and none.provider["available"] is True
    assert none.provider["reason"] == "no_server_configured" and none.provider["servers"] == []
    bad = await harness(monkeypatch, "localhost:4096").list_sessions()
    assert not bad.complete and bad.provider["reason"] == "bad_url" and bad.provider["servers"][0]["url"] == "localhost:4096"


def test_opencode_is_a_plugin_and_its_sessions_are_listed_by_the_cli(fake: Any) -> None:
    server = fake(FakeServer(sessions=[session_entry("ses_cli", "From the CLI", 5)], status={"ses_cli": {"type": "busy"}}))
    env = {**os.environ, "AGENT_LINK_LOAD_PLUGINS": "opencode listings", "AGENT_LINK_OPENCODE_SERVERS": server.url}  # listings: `sessions`
    run = lambda *args: subprocess.run([sys.executable, "-m", "agent_link_core", *args], capture_output=True, text=True,  # noqa: E731
                                       env=env, timeout=120, check=False)
    plugins = run("plugins", "--json")
    assert plugins.returncode == 0 and set(json.loads(plugins.stdout)["loaded"]) == {"listings", "opencode"}, plugins.stderr
    listed = run("sessions", "--json")
    assert listed.returncode == 0, listed.stderr
    assert "opencode:ses_cli" in listed.stdout and "From the CLI" in listed.stdout


def test_opencode_sessions_are_listed_by_list_agents_and_on_the_web_page(fake: Any) -> None:
    import anyio
    from agent_link_testing.mcp_client import agent_link_mcp
    from agent_link_testing.web_page import serve_cli

    server = fake(FakeServer(sessions=[session_entry("ses_seen", "Seen everywhere", 5)], status={"ses_seen": {"type": "busy"}}))
    env = {**os.environ, "AGENT_LINK_LOAD_PLUGINS": "opencode,web", "AGENT_LINK_OPENCODE_SERVERS": server.url,
           "AGENT_LINK_OPENCODE_DISCOVER": "0", "AGENT_LINK_WEB_USER": "tester", "AGENT_LINK_INSPECT_ALL": "1"}

    async def listed() -> dict[str, Any]:
        async with agent_link_mcp(env) as client:
            return await client.call("list_agents", {})

    result = anyio.run(listed)
    [agent] = [a for a in result["sessions"] if a["address"] == "opencode:ses_seen"]
    assert agent["title"] == "Seen everywhere" and agent["status"] == "busy" and result["providers"]["opencode"]["complete"]
    with serve_cli(env) as page:
        answer = page.request("GET", "/fragment/agents", headers={"Cookie": page.cookie()})
        html = answer.body.decode()  # type: ignore[attr-defined]
    assert answer.status == 200 and "Seen everywhere" in html and "opencode:ses_seen" in html, html[-2000:]


@pytest.mark.anyio
async def test_nothing_at_the_default_address_is_no_opencode_running(monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_link_core.app import App

    from agent_link_opencode import harness as module

    def refused(url: str, password: str | None) -> Any:
        raise module.ServerError("unreachable", "connection refused")

    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "opencode")
    monkeypatch.delenv("AGENT_LINK_OPENCODE_SERVERS", raising=False)
    monkeypatch.setattr(module, "read_server", refused)
    for configured, complete in ((None, True), ("http://127.0.0.1:4096", False)):  # named by the person: reported
        if configured:
            monkeypatch.setenv("AGENT_LINK_OPENCODE_SERVERS", configured)
        app = App.create()
        try:
            listing = await app.harnesses["opencode"].list_sessions()
        finally:
            app.close()
        assert listing.sessions == [] and listing.complete is complete, listing.provider
        assert listing.provider["servers"][0]["reason"] == ("not_running" if complete else "unreachable")


def found_servers(monkeypatch: pytest.MonkeyPatch, *found: Any) -> None:
    """Make the process scan (agent_link_opencode.discover) find ``found`` (FoundServer)."""
    from agent_link_opencode import discover

    monkeypatch.setattr(discover, "scan", lambda home=None: list(found))


@pytest.mark.anyio
async def test_a_found_server_is_read_with_its_own_password_and_a_port_that_is_not_its_api_is_no_failure(
        fake: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_link_opencode.discover import FoundServer

    locked = fake(FakeServer(sessions=[session_entry("ses_f", "Found", 1)], password="theirs"))
    other_port = closed_port_url()  # another socket of the same process: not opencode's API
    found_servers(monkeypatch, FoundServer(locked.url, 41, "opencode", "theirs"), FoundServer(other_port, 41, "opencode", "theirs"))
    monkeypatch.setenv("AGENT_LINK_OPENCODE_PASSWORD", "wrong")  # the server's own password wins
    listing = await harness(monkeypatch, "").list_sessions()  # no server configured: found ones only
    assert [s.id for s in listing.sessions] == ["ses_f"] and listing.complete, listing.provider
    by_url = {s["url"]: s for s in listing.provider["servers"]}
    assert by_url[locked.url]["discovered"] is True and by_url[locked.url]["reason"] is None
    assert by_url[other_port] == {"url": other_port, "available": True, "reason": "not_opencode_api", "discovered": True, "sessions": 0}
    assert locked.seen_auth[-1] == "Basic " + base64.b64encode(b"opencode:theirs").decode()


@pytest.mark.anyio
async def test_a_found_server_that_refuses_its_password_is_reported(fake: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_link_opencode.discover import FoundServer

    locked = fake(FakeServer(sessions=[session_entry("ses_f", "Found", 1)], password="changed"))
    found_servers(monkeypatch, FoundServer(locked.url, 41, "opencode", None))
    listing = await harness(monkeypatch, "").list_sessions()
    assert not listing.complete and listing.provider["reason"] == "unauthorized", listing.provider


@pytest.mark.anyio
async def test_the_password_falls_back_to_opencodes_own_variables_and_discovery_can_be_off(
        fake: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_link_opencode.discover import FoundServer

    locked = fake(FakeServer(sessions=[session_entry("ses_e", "Env", 1)], password="pw"))
    found_servers(monkeypatch, FoundServer(closed_port_url(), 41, "opencode", None))
    monkeypatch.setenv("AGENT_LINK_OPENCODE_DISCOVER", "0")
    monkeypatch.setenv("OPENCODE_SERVER_PASSWORD", "pw")
    listing = await harness(monkeypatch, locked.url).list_sessions()
    assert [s.id for s in listing.sessions] == ["ses_e"] and [s["url"] for s in listing.provider["servers"]] == [locked.url]
    monkeypatch.setenv("OPENCODE_SERVER_USERNAME", "someone")
    before = len(locked.seen_auth)
    refused = await harness(monkeypatch, locked.url).list_sessions()  # the fake wants user opencode
    assert refused.provider["reason"] == "unauthorized"
    # among the requests since, not the last: the first harness's event stream may reconnect meanwhile
    assert "Basic " + base64.b64encode(b"someone:pw").decode() in locked.seen_auth[before:]


def test_found_servers_are_named_by_a_loopback_url_unless_they_listen_elsewhere() -> None:
    from agent_link_opencode import discover

    assert [discover._url(h, 4096) for h in ("0.0.0.0", "::", "::1", "127.0.0.1", "10.1.2.3", "fd00::1")] == [
        "http://127.0.0.1:4096"] * 4 + ["http://10.1.2.3:4096", "http://[fd00::1]:4096"]
    assert discover.scan(home="/nonexistent-home") == []  # no opencode of that HOME runs
    assert discover.credentials(2**22 + 12345) is None  # no such process: no password, no error


@pytest.mark.anyio
async def test_tests_list_no_opencode_server_unless_they_name_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The root conftest's pin: without it every test's listing would read 127.0.0.1:4096, where
    a person's own opencode (or another worker's) may run."""
    from agent_link_core.app import App

    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "opencode")
    monkeypatch.setenv("AGENT_LINK_OPENCODE_DISCOVER", "0")
    app = App.create()
    try:
        harness = app.harnesses["opencode"]
        assert harness._servers() == ([], [])
    finally:
        app.close()
