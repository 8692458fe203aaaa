"""Smoke tests: the real opencode server (pinned; AGENT_LINK_HOSTS_DIR picks the folder) against
the stub Messages API.

They prove the test kit itself (``agent_link_testing.opencode_host`` with
``agent_link_testing.messages_stub``) works with the installed program: a session made over the
HTTP API takes a ``prompt_async`` text, the stub model receives it and the session holds the
reply, with every download refused; the server password is enforced.

If the program is missing these tests fail with "run `make hosts`" -- they never skip.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from agent_link_testing.hosts import opencode_version
from agent_link_testing.messages_stub import MessagesStub
from agent_link_testing.opencode_host import STUB_MODEL, STUB_PROVIDER, OpencodeHostError, OpencodeServer

pytestmark = [pytest.mark.realhost, pytest.mark.timeout(180)]

PASSWORD = "smoke-" + uuid.uuid4().hex
TURN_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def stub() -> Iterator[MessagesStub]:
    with MessagesStub() as running:
        yield running


@pytest.fixture(scope="module")
def server(stub: MessagesStub) -> Iterator[OpencodeServer]:
    # outbound="blackhole" (the default): all traffic off 127.0.0.1 goes to the stub, which refuses it
    with OpencodeServer(stub.base_url, password=PASSWORD) as running:
        yield running


def text_parts(message: dict) -> list[str]:
    return [p["text"] for p in message["parts"] if p.get("type") == "text"]


def test_opencode_prompt_async_reaches_the_stub_model_and_the_session_holds_the_reply(stub: MessagesStub, server: OpencodeServer) -> None:
    marker = "ping-" + uuid.uuid4().hex
    stub.enqueue("pong from the stub")
    session = server.request("POST", "/session", {"title": "smoke"})
    assert session["directory"] == str(server.workdir) and session["id"].startswith("ses_"), session
    assert server.request("POST", f"/session/{session['id']}/prompt_async", {"parts": [{"type": "text", "text": marker}]}) is None

    seen = stub.wait_for_main(1, timeout_s=TURN_TIMEOUT_S)
    assert any(r.locate(marker) for r in seen), [r.text()[:300] for r in seen]
    messages = server.wait_for_reply(session["id"], timeout_s=TURN_TIMEOUT_S)
    user = [m for m in messages if m["info"]["role"] == "user"]
    assistant = [m for m in messages if m["info"]["role"] == "assistant"]
    assert [text_parts(m) for m in user] == [[marker]]
    assert text_parts(assistant[-1]) == ["pong from the stub"]
    assert assistant[-1]["info"]["providerID"] == STUB_PROVIDER and assistant[-1]["info"]["modelID"] == STUB_MODEL
    assert stub.unscripted == []
    # The provider names the npm package @ai-sdk/anthropic and every download is refused (the
    # stub is the proxy), so the turn above completed with the adapter opencode carries built in.
    # The one tunnel opencode tries is a background install of @opencode-ai/plugin into its
    # config folder (for config-folder plugins), refused without harm.
    assert {r.path for r in stub.requests_of("connect")} <= {"registry.npmjs.org:443"}

    listed = {s["id"]: s for s in server.request("GET", "/session")}
    assert listed[session["id"]]["title"] == "smoke" and listed[session["id"]]["version"] == opencode_version()


def test_opencode_server_password_is_enforced(server: OpencodeServer) -> None:
    with pytest.raises(OpencodeHostError, match="HTTP 401"):
        server.request("GET", "/session", auth=False)
    assert isinstance(server.request("GET", "/session/status"), dict)
