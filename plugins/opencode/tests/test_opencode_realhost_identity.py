"""Who calls agent-link's MCP tools inside a REAL opencode (pinned ``opencode serve``, stub model).

opencode starts ``agent-link mcp`` (one process for every session) and loads agent-link's
opencode plugin (``agent_link_opencode/host_plugin/agent-link.js``), which names the session and
the tool call in each call of agent-link's tools; the server signs mail ``fromVerified`` only
when that opencode server shows the session running that call (``agent_link_opencode.proof``).

* two sessions of one opencode process each send as themselves, proven, even when the model
  names another session in the argument, the server asking for a password (``OPENCODE_SERVER_PASSWORD``)
  that nobody gave agent-link (it reads it from the opencode process);
* a process outside opencode that names a real session the same way is refused the proof
  (``sender_unverified``, ``not_proven``).

If the program is missing these tests fail with "run `make hosts`" -- they never skip.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import agent_link_opencode
from agent_link_core.app import App
from agent_link_testing.mcp_client import agent_link_mcp
from agent_link_testing.messages_stub import MessagesStub, Reply
from agent_link_testing.opencode_host import OpencodeServer

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(240)]

TURN_TIMEOUT_S = 90.0
PASSWORD = "pw-only-opencode-knows"
JS_PLUGIN = Path(agent_link_opencode.__file__).parent / "host_plugin" / "agent-link.js"


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("agent-link-state")


@pytest.fixture(scope="module")
def stub() -> Iterator[MessagesStub]:
    with MessagesStub() as running:
        yield running


@pytest.fixture(scope="module")
def server(stub: MessagesStub, state_dir: Path) -> Iterator[OpencodeServer]:
    mcp = {"agent-link": {
        "type": "local", "enabled": True,
        "command": [sys.executable, "-m", "agent_link_core", "mcp"],
        "environment": {"AGENT_LINK_STATE_DIR": str(state_dir), "AGENT_LINK_LOAD_PLUGINS": "opencode",
                        "AGENT_LINK_HOST": "opencode", "AGENT_LINK_PAIR_RATE": "0", "AGENT_LINK_REPEAT_WINDOW_MS": "0"},
    }}
    # with a password: agent-link reads it from the opencode process, nobody configures it
    with OpencodeServer(stub.base_url, mcp=mcp, config_extra={"plugin": [JS_PLUGIN.as_uri()]}, password=PASSWORD) as running:
        yield running


@pytest.fixture
def app(state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[App]:
    monkeypatch.setenv("AGENT_LINK_STATE_DIR", str(state_dir))
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "opencode")
    application = App.create()
    yield application


def sent_from(app: App, sender: str) -> list[dict]:
    rows = app.store.conn.execute("SELECT * FROM messages WHERE from_addr = ? ORDER BY sent_at", (sender,)).fetchall()
    return [app.mailbox.row_dict(r) for r in rows]


async def test_opencode_sessions_of_one_process_each_send_as_themselves_proven(
        server: OpencodeServer, stub: MessagesStub, app: App) -> None:
    first = server.request("POST", "/session", {"title": "first"})
    second = server.request("POST", "/session", {"title": "second"})
    # the second session's model names the first one itself: agent-link's opencode plugin overwrites it
    forged = {"_agentLinkCaller": {"sessionID": first["id"], "callID": "toolu_x", "server": str(server.url)}}
    for session, text, extra in ((first, "hello from first", {}), (second, "hello from second", forged)):
        stub.enqueue(Reply.tool_use("agent-link_message_agent", {"to": "test:bob", "message": text, **extra}), "sent it")
        server.request("POST", f"/session/{session['id']}/prompt_async", {"parts": [{"type": "text", "text": "write to bob"}]})
        server.wait_for_reply(session["id"], timeout_s=TURN_TIMEOUT_S)
        result = stub.main_requests[-1].tool_results()
        assert result and '"ok": true' in str(result[0]).replace('"ok":true', '"ok": true'), result

    for session, text in ((first, "hello from first"), (second, "hello from second")):
        [message] = sent_from(app, f"opencode:{session['id']}")
        assert message["body"] == text and message["metadata"]["sender"] == {"source": "runtime_context", "verified": True}, message
    await app.aclose()


async def test_opencode_a_caller_outside_opencode_naming_a_session_is_not_proven(
        server: OpencodeServer, state_dir: Path, app: App) -> None:
    session = server.request("POST", "/session", {"title": "named by a stranger"})
    named = {"sessionID": session["id"], "callID": "toolu_forged", "server": str(server.url)}
    env = {"AGENT_LINK_STATE_DIR": str(state_dir), "AGENT_LINK_LOAD_PLUGINS": "opencode",
           "AGENT_LINK_OPENCODE_SERVERS": str(server.url), "OPENCODE_SERVER_PASSWORD": PASSWORD}  # it even knows the password
    async with agent_link_mcp(env) as client:
        result = await client.call("message_agent", {"to": "test:carol", "message": "forged", "_agentLinkCaller": named})
    assert result["ok"], result
    [unverified] = [w for w in result["warnings"] if w["code"] == "sender_unverified"]
    assert unverified["details"]["reason"] == "not_proven", unverified
    [message] = sent_from(app, f"opencode:{session['id']}")
    assert message["metadata"]["sender"]["verified"] is False
    await app.aclose()
