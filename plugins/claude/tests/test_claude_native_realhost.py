"""Delivery through a Claude Code session's own inbox socket, against the real, pinned CLI.

The recipient is a plain ``claude -p`` stream-json session (no agent-link plugin, no
``--channels``) answering from the stub Messages API; the sender is this test process's own
agent-link App. On a release with inbox sockets (2.1.224 and later) the message must reach the
model as a new turn and count as delivered only once the transcript shows it; on an older
release (the previous pin) the same send must fall back to the hooks and say why. The inbox
socket, the session record fields and the receipts are not documented by the vendor
(docs/claude-native-inbox.md), so these tests are the authority: they fail when a release
changes them.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_link_core.app import App
from agent_link_core.model import Caller
from agent_link_testing.claude_host import ClaudeHost, ClaudeStream
from agent_link_testing.hosts import claude_version, version_at_least
from agent_link_testing.messages_stub import MessagesStub, Reply

pytestmark = [pytest.mark.realhost, pytest.mark.timeout(240)]

ALICE = Caller("test:alice", "config", "test")
RUN_TIMEOUT_S = 90.0
INBOX_SINCE = "2.1.224"


def has_inbox() -> bool:
    return version_at_least(claude_version(), INBOX_SINCE)


@pytest.fixture
def stub():
    with MessagesStub() as s:
        yield s


@pytest.fixture
def host(stub: MessagesStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClaudeHost:
    made = ClaudeHost.create(tmp_path / "home", stub=stub)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(made.config_dir))
    return made


@pytest.fixture
def app(host: ClaudeHost, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AGENT_LINK_CLAUDE_INBOX_WAIT_MS", "60000")
    application = App.create()
    yield application
    application.close()


def project(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.mkdir()
    return path


def first_turn(stream: ClaudeStream) -> str:
    stream.send("hello")
    return str(stream.wait_results(1, RUN_TIMEOUT_S)[0]["session_id"])


def wait_record(host: ClaudeHost, sid: str, key: str) -> dict[str, Any]:
    """The session's live record once it names ``key`` (the host writes it as it starts)."""
    deadline = time.monotonic() + 30
    while True:
        for path in host.sessions_dir.glob("*.json"):
            record = json.loads(path.read_text())
            if record.get("sessionId") == sid and key in record:
                return record
        if time.monotonic() > deadline:
            raise TimeoutError(f"no live record of {sid} with {key}")
        time.sleep(0.2)


def send(app: App, sid: str, body: str, anticipation: str = "fyi") -> Any:
    return anyio.run(lambda: app.send(caller=ALICE, to=f"claude:{sid}", body=body, anticipation=anticipation))


def paths(app: App) -> dict[str, dict[str, Any]]:
    return {s["sessionId"]: s for s in app.harnesses["claude"].health()["sessions"]}


def test_idle_session_takes_mail_as_a_new_turn_through_its_inbox(
    host: ClaudeHost, app: App, stub: MessagesStub, tmp_path: Path,
) -> None:
    stub.enqueue("First turn done.", "Thanks, I read the agent-link message.")
    with host.start_stream(cwd=project(tmp_path, "idle")) as stream:
        sid = first_turn(stream)
        if not has_inbox():
            outcome = send(app, sid, "Build is green.")
            assert outcome.delivery.state == "queued-online" and not outcome.delivery.delivered
            [path] = [p for k, p in paths(app).items() if k == sid]
            assert path["delivery"] == "hook-only" and "has no inbox socket" in path["reason"]
            return
        record = wait_record(host, sid, "messagingSocketPath")
        listed = anyio.run(lambda: app.harnesses["claude"].get_session(sid))
        assert listed.extra["name"] == record["name"] and listed.extra["liveStatus"] in ("idle", "busy")
        assert listed.receive["push"] == "inbox" and paths(app)[sid]["delivery"] == "native-inbox"
        outcome = send(app, sid, "Build is green.")
        mid = outcome.message["id"]
        assert outcome.delivery.delivered and outcome.delivery.state == "delivered-inbox", outcome.delivery
        assert outcome.delivery.evidence["transcript"] in ("user", "attachment", "system")
        results = stream.wait_results(2, RUN_TIMEOUT_S)
        assert results[1]["result"] == "Thanks, I read the agent-link message."
    last = stub.main_requests[-1]
    [where] = last.locate(f'<agent-link-message id="{mid}"')
    assert where.startswith("messages[") and "Build is green." in last.text()
    assert not last.locate("from-mode=")  # agent-link claims no permission mode
    row = app.mailbox.get_row(mid)
    assert row["delivered_via"] == "claude-inbox" and row["first_delivered_at"] is not None


def test_busy_session_reads_the_mail_after_its_tool_call(
    host: ClaudeHost, app: App, stub: MessagesStub, tmp_path: Path,
) -> None:
    host.allow_tools("Bash")
    marker = tmp_path / "tool-started"
    stub.enqueue(
        Reply.tool_use("Bash", {"command": f"touch {marker} && sleep 6", "description": "wait"}),
        "Tool done.",
    )
    stub.default_text = "Saw it."
    with host.start_stream(cwd=project(tmp_path, "busy")) as stream:
        stream.send("run the slow tool")
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while not marker.exists():  # the session is now inside its tool call
            assert time.monotonic() < deadline, stream.stderr[-2000:]
            time.sleep(0.1)
        sid = str(next(e for e in stream.events if e.get("session_id"))["session_id"])
        if not has_inbox():
            assert send(app, sid, "Status?", "reply").delivery.state == "queued-online"
            return
        outcome = send(app, sid, "Status?", "reply")
        mid = outcome.message["id"]
        assert outcome.delivery.delivered and outcome.delivery.state == "delivered-inbox", outcome.delivery
        stream.wait_results(1, RUN_TIMEOUT_S)
    after_tool = [r for r in stub.main_requests if r.tool_results()]
    # read at the tool boundary, in the request that carries the tool's result
    assert after_tool and after_tool[0].locate(f'<agent-link-message id="{mid}"'), [r.text()[-1500:] for r in after_tool]


def test_a_session_that_holds_peer_mail_shows_held_to_the_sender_and_keeps_it(
    host: ClaudeHost, app: App, stub: MessagesStub, tmp_path: Path,
) -> None:
    # a session that bypasses permission prompts holds peer messages that assert no mode:
    # agent-link asserts none, so it must be told "held", not "delivered"
    host.update_settings({"permissions": {"defaultMode": "bypassPermissions"}})
    stub.enqueue("First turn done.")
    with host.start_stream(cwd=project(tmp_path, "held"), env_extra={"IS_SANDBOX": "1"},
                           args=["--permission-mode", "bypassPermissions"]) as stream:
        sid = first_turn(stream)
        if not has_inbox():
            assert send(app, sid, "Deploy now.", "action").delivery.state == "queued-online"
            return
        wait_record(host, sid, "messagingSocketPath")
        outcome = send(app, sid, "Deploy now.", "action")
        mid = outcome.message["id"]
        assert not outcome.delivery.delivered and outcome.delivery.state == "held", outcome.delivery
        [warning] = [w for w in outcome.delivery.warnings if w["code"] == "held"]
        assert warning["message"].startswith("held: approve it in that session")
        assert len(stub.main_requests) == 1  # the model never saw it
    row = app.mailbox.get_row(mid)
    assert row["first_delivered_at"] is None and row["body"] == "Deploy now."
    assert [r["id"] for r in app.mailbox.open_for(f"claude:{sid}", 10, undelivered_only=True)] == [mid]


def test_with_the_hosts_messaging_switched_off_delivery_falls_back_and_health_says_so(
    host: ClaudeHost, app: App, stub: MessagesStub, tmp_path: Path,
) -> None:
    stub.enqueue("First turn done.")
    with host.start_stream(cwd=project(tmp_path, "off"), env_extra={"CLAUDE_CODE_HARBOR_KITE": "0"}) as stream:
        sid = first_turn(stream)
        record = wait_record(host, sid, "sessionId")
        assert "messagingSocketPath" not in record
        outcome = send(app, sid, "Build is green.")
        assert outcome.delivery.state == "queued-online" and not outcome.delivery.delivered
        path = paths(app)[sid]
        assert path["delivery"] == "hook-only"
        if has_inbox():
            assert "CLAUDE_CODE_HARBOR_KITE=0" in path["reason"], path
        else:
            assert "has no inbox socket" in path["reason"], path
        assert len(stub.main_requests) == 1
