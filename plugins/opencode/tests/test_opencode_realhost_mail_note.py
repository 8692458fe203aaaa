"""The "you have mail" note in a REAL opencode (pinned ``opencode serve``, stub model) with
agent-link's opencode plugin as ``agent-link install opencode`` writes it: mail waiting for a
session (stored, not pushed: the sending App runs without the opencode harness) shows as
agent-link's note in the model request of the session's next prompt, naming the sender and
never the body; the session keeps no copy of it; with nothing waiting there is no note.

If the program is missing these tests fail with "run `make hosts`" -- they never skip.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from agent_link_core.app import App
from agent_link_core.model import Caller
from agent_link_core.store import now_ms
from agent_link_opencode.install import stage_plugin
from agent_link_testing.messages_stub import MessagesStub
from agent_link_testing.opencode_host import OpencodeServer

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(240)]

ALICE = Caller("test:alice", "config", "test")
TURN_TIMEOUT_S = 90.0
NOTE = "peer message is waiting"


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("agent-link-state")


@pytest.fixture(scope="module")
def stub() -> Iterator[MessagesStub]:
    with MessagesStub() as running:
        yield running


@pytest.fixture(scope="module")
def server(stub: MessagesStub, state_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpencodeServer]:
    plugin = tmp_path_factory.mktemp("host-plugin") / "agent-link.js"
    stage_plugin(plugin, Path(sys.executable).with_name("agent-link"))
    # the prompt-hook registry exists before the first prompt, as an agent-link MCP server's
    # start leaves it: the first hook on a fresh state dir builds it, seconds on a loaded machine,
    # longer than the plugin waits (test_opencode_js_wait.py covers that wait)
    subprocess.run([str(Path(sys.executable).with_name("agent-link")), "hook", "opencode", "MessagesTransform"], input=b"{}",
                   env={**os.environ, "AGENT_LINK_STATE_DIR": str(state_dir)}, capture_output=True, check=True, timeout=120)
    with OpencodeServer(stub.base_url, config_extra={"plugin": [plugin.as_uri()]},
                        env={"AGENT_LINK_STATE_DIR": str(state_dir)}) as running:
        yield running


@pytest.fixture
async def app(state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[App]:
    """A sender that stores mail for opencode sessions without pushing it (no opencode harness)."""
    monkeypatch.setenv("AGENT_LINK_STATE_DIR", str(state_dir))
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "")
    application = App.create()
    try:
        yield application
    finally:
        await application.aclose()


def prompt(server: OpencodeServer, stub: MessagesStub, session_id: str, text: str) -> str:
    """Run one turn; the text of the model request it made."""
    stub.enqueue("ok")
    before = len(stub.main_requests)
    server.request("POST", f"/session/{session_id}/prompt_async", {"parts": [{"type": "text", "text": text}]})
    server.wait_for_reply(session_id, timeout_s=TURN_TIMEOUT_S)
    [request] = stub.main_requests[before:]
    return request.text()


async def test_opencode_waiting_mail_is_noted_in_the_next_model_request(server: OpencodeServer, stub: MessagesStub, app: App) -> None:
    session = server.request("POST", "/session", {"title": "has mail"})
    assert NOTE not in prompt(server, stub, session["id"], "first prompt")

    outcome = await app.send(caller=ALICE, to=f"opencode:{session['id']}", body="the secret body")
    assert outcome.delivery is None or not outcome.delivery.delivered, outcome.delivery
    seen = prompt(server, stub, session["id"], "second prompt")
    assert f"1 {NOTE}" in seen and "test:alice" in seen and "read_agent_link_inbox" in seen, seen
    assert "the secret body" not in seen
    # only the request carried it: the session's own record holds the person's prompts alone
    stored = [p.get("text", "") for m in server.session_messages(session["id"]) for p in m["parts"]]
    assert not any(NOTE in t for t in stored), stored
    assert not stub.unscripted


async def test_opencode_due_reminder_is_in_the_turns_first_model_request_once(server: OpencodeServer, stub: MessagesStub,
                                                                             app: App) -> None:
    session = server.request("POST", "/session", {"title": "owes a reply"})
    outcome = await app.send(caller=ALICE, to=f"opencode:{session['id']}", body="the reminded body", anticipation="reply")
    # delivered a minute ago and still unanswered: reminder 1 is due (the interval is 30 s)
    at = now_ms() - 60_000
    with app.store.write() as conn:
        conn.execute("UPDATE messages SET sent_at = ?, delivered_at = ?, first_delivered_at = ? WHERE id = ?",
                     (at, at, at, outcome.message["id"]))
    seen = prompt(server, stub, session["id"], "a prompt while a reply is owed")
    assert "reminder 1 of 3" in seen and "test:alice" in seen, seen
    assert "the reminded body" not in seen
    rows = app.store.conn.execute("SELECT n, via, to_addr FROM reminders WHERE message_id = ?", (outcome.message["id"],)).fetchall()
    assert [tuple(r) for r in rows] == [(1, "opencode-plugin", f"opencode:{session['id']}")]
    # claimed once: the next turn is not reminded again
    assert "reminder 1 of 3" not in prompt(server, stub, session["id"], "the next prompt")
    stored = [p.get("text", "") for m in server.session_messages(session["id"]) for p in m["parts"]]
    assert not any("reminder 1 of 3" in t for t in stored), stored
