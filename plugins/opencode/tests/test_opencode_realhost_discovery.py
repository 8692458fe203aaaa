"""Finding a REAL ``opencode serve`` (pinned, stub Messages API) on a port nobody configured, and
reading it although it asks for a password (``OPENCODE_SERVER_PASSWORD``).

The server runs with a password on a free port, with a ``HOME`` of its own; agent-link runs
with that ``HOME`` (the same user's opencode) and only the default server address configured:

* the server is found from its process (:mod:`agent_link_opencode.discover`), its sessions are
  listed with the password taken from the server's own environment, and a message is pushed
  into one of them;
* with discovery off, the same server named in ``AGENT_LINK_OPENCODE_SERVERS`` without a
  password is reported ``unauthorized`` (never an empty complete listing), and
  ``OPENCODE_SERVER_PASSWORD`` in agent-link's own environment opens it;
* an agent-link with another ``HOME`` does not find it.

If the program is missing these tests fail with "run `make hosts`" -- they never skip.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_link_core.app import App
from agent_link_core.model import Caller
from agent_link_testing.messages_stub import MessagesStub
from agent_link_testing.opencode_host import OpencodeServer

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(180)]

ALICE = Caller("test:alice", "config", "test")
PASSWORD = "s3cret-pw"


@pytest.fixture(scope="module")
def stub() -> Iterator[MessagesStub]:
    with MessagesStub(default_text="ok") as running:
        yield running


@pytest.fixture(scope="module")
def server(stub: MessagesStub) -> Iterator[OpencodeServer]:
    with OpencodeServer(stub.base_url, password=PASSWORD) as running:
        yield running


def make_app(tmp_path: Path, home: Path, **settings: str) -> App:
    env = {"HOME": str(home), "AGENT_LINK_STATE_DIR": str(tmp_path / "state"), "AGENT_LINK_LOAD_PLUGINS": "opencode",
           "AGENT_LINK_OPENCODE_SERVERS": "http://127.0.0.1:9", **settings}  # port 9: nothing there
    return App.create(env=env)


async def test_opencode_server_on_any_port_is_found_and_its_password_read_from_its_process(
        server: OpencodeServer, tmp_path: Path) -> None:
    session = server.request("POST", "/session", {"title": "found by its process"})
    app = make_app(tmp_path, server.home)
    try:
        listing = await app.harnesses["opencode"].list_sessions()
        found = [s for s in listing.provider["servers"] if s["url"] == server.url]
        assert found and found[0]["reason"] is None and found[0]["discovered"] is True, listing.provider
        assert session["id"] in {s.id for s in listing.sessions}
        health = app.harnesses["opencode"].health()
        assert any(d["url"] == server.url and d["passwordFromProcess"] for d in health["discovered"]), health
        assert PASSWORD not in repr(health)
        outcome = await app.send(caller=ALICE, to=f"opencode:{session['id']}", body="found you")
        assert outcome.delivery is not None and outcome.delivery.delivered, outcome.delivery
        server.wait_for_reply(session["id"], timeout_s=60)
    finally:
        await app.aclose()


async def test_opencode_password_server_without_discovery_is_unauthorized_until_the_password_is_known(
        server: OpencodeServer, tmp_path: Path) -> None:
    session = server.request("POST", "/session", {"title": "named by hand"})
    app = make_app(tmp_path, server.home, AGENT_LINK_OPENCODE_DISCOVER="0", AGENT_LINK_OPENCODE_SERVERS=str(server.url))
    try:
        listing = await app.harnesses["opencode"].list_sessions()
        assert not listing.complete and listing.provider["reason"] == "unauthorized", listing.provider
    finally:
        await app.aclose()
    app = make_app(tmp_path, server.home, AGENT_LINK_OPENCODE_DISCOVER="0", AGENT_LINK_OPENCODE_SERVERS=str(server.url),
                   OPENCODE_SERVER_PASSWORD=PASSWORD)
    try:
        listing = await app.harnesses["opencode"].list_sessions()
        assert listing.complete and session["id"] in {s.id for s in listing.sessions}, listing.provider
    finally:
        await app.aclose()


async def test_opencode_server_of_another_home_is_not_found(server: OpencodeServer, tmp_path: Path) -> None:
    app = make_app(tmp_path, tmp_path / "another-home")
    try:
        listing = await app.harnesses["opencode"].list_sessions()
        assert server.url not in {s["url"] for s in listing.provider["servers"]}, listing.provider
    finally:
        await app.aclose()
