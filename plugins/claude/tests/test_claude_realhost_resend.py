"""Crash, then resend (issue 18), into a REAL ``claude -p`` session (stub Messages API).

An ``agent-link send claude:S … --message-id M`` that dies mid-way leaves the stored message
and, if it got that far, its push claim (held by a process that is gone) and perhaps a frame
already written to the session's inbox socket. A resend of the same ``--message-id`` finishes
the job: it looks for the message in the session's transcript first and writes it at most
once, whether the dead attempt's write landed or not. The model must see the message exactly
once; a second, distinct message written afterwards through the same socket is the fence
that proves no duplicate was written before it (the host reads its socket in order).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent_link_core.app import App
from agent_link_core.cli import build_cli
from agent_link_core.mailbox import new_message_id
from agent_link_core.model import Caller
from agent_link_core.records import OutgoingMessage
from agent_link_claude.harness import claim_push
from agent_link_testing.claude_host import ClaudeHost, ClaudeStream, agent_link_bin
from agent_link_testing.hosts import claude_version, version_at_least
from agent_link_testing.messages_stub import MessagesStub, Reply

pytestmark = [pytest.mark.realhost, pytest.mark.timeout(300)]

RUN_TIMEOUT_S = 120.0
INBOX_SINCE = "2.1.224"


@pytest.fixture(autouse=True)
def needs_inbox() -> None:
    if not version_at_least(claude_version(), INBOX_SINCE):
        pytest.skip(f"Claude Code {claude_version()} has no inbox socket; the channel path keeps its own claims")


@pytest.fixture
def stub() -> Iterator[MessagesStub]:
    with MessagesStub() as s:
        yield s


@pytest.fixture
def host(stub: MessagesStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClaudeHost:
    made = ClaudeHost.create(tmp_path / "claude-home", stub=stub)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(made.config_dir))
    monkeypatch.setenv("AGENT_LINK_CLAUDE_INBOX_WAIT_MS", "60000")
    return made


def cli(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(build_cli(), [*args, "--from", "team:me", "--json"], catch_exceptions=False)
    return dict(json.loads(result.stdout))


def store_only(message_id: str, sid: str, body: str, anticipation: str = "fyi") -> None:
    """What a send killed right after storing its message leaves: the row, nothing pushed."""
    app = App.create()
    try:
        app.mailbox.store_message(OutgoingMessage(message_id, Caller("team:me", "explicit", None), f"claude:{sid}",
                                                  f"claude:{sid}", body, anticipation, None, None))
    finally:
        app.close()


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def leave_claim(message_id: str, sid: str) -> None:
    """The push claim of a send killed after taking it, held by a process that is gone."""
    app = App.create()
    try:
        assert claim_push(app.mailbox, message_id, {"pid": dead_pid(), "procStart": "1", "via": "claude-inbox",
                                                   "session": sid}) is None
    finally:
        app.close()


def project(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.mkdir()
    return path


def start(stream: ClaudeStream, host: ClaudeHost) -> str:
    """The session's id once its first turn is done and its live record names its socket."""
    stream.send("hello")
    sid = str(stream.wait_results(1, RUN_TIMEOUT_S)[0]["session_id"])
    deadline = time.monotonic() + 30
    while not any(json.loads(p.read_text()).get("sessionId") == sid and "messagingSocketPath" in json.loads(p.read_text())
                  for p in host.sessions_dir.glob("*.json")):
        assert time.monotonic() < deadline, "no inbox socket in the session's live record"
        time.sleep(0.2)
    return sid


def seen_by_model(stub: MessagesStub, message_id: str) -> int:
    """How often the newest model request holds the message's envelope."""
    return len(stub.main_requests[-1].locate(f'<agent-link-message id="{message_id}"'))


def fence(stub: MessagesStub, sid: str) -> None:
    """Send a distinct message through the same socket and see it delivered: whatever was
    written to the socket before it has reached the model by then."""
    out = cli("send", f"claude:{sid}", "fence", "--message-id", new_message_id())
    assert out["outcome"] == "delivered", out
    assert seen_by_model(stub, out["messageId"]) == 1


def transcript_lines(host: ClaudeHost, sid: str, message_id: str) -> list[dict[str, Any]]:
    """The session's transcript lines that carry ``message_id``."""
    return [json.loads(line) for path in (host.config_dir / "projects").glob(f"*/{sid}.jsonl")
            for line in path.read_text().splitlines() if message_id in line]


def transcript_has(host: ClaudeHost, sid: str, message_id: str) -> list[str]:
    """The kinds of the session's transcript lines that carry ``message_id``."""
    return [str(line.get("type")) for line in transcript_lines(host, sid, message_id)]


def written(host: ClaudeHost, sid: str, message_id: str) -> int:
    """How many times the session's host took the message from its socket (each frame it
    takes is enqueued once; the model may be shown two copies as one)."""
    return sum(1 for line in transcript_lines(host, sid, message_id)
               if line.get("type") == "queue-operation" and line.get("operation") == "enqueue")


def test_a_resend_pushes_what_a_killed_send_left_unwritten_exactly_once(
    host: ClaudeHost, stub: MessagesStub, tmp_path: Path,
) -> None:
    stub.default_text = "Noted."
    with host.start_stream(cwd=project(tmp_path, "unwritten")) as stream:
        sid = start(stream, host)

        # killed right after storing the message: the resend pushes it
        stored = new_message_id()
        store_only(stored, sid, "Stored, never pushed.")
        first = cli("send", f"claude:{sid}", "Stored, never pushed.", "--message-id", stored)
        assert first["outcome"] == "delivered" and first["duplicate"] is True and first["attempts"] == 1, first
        again = cli("send", f"claude:{sid}", "Stored, never pushed.", "--message-id", stored)
        assert again["outcome"] == "delivered" and again["attempts"] == 0, again

        # killed after taking the push claim, before writing: the claim's process is gone and
        # the transcript has no trace of the message, so the resend writes it now
        claimed = new_message_id()
        store_only(claimed, sid, "Claimed, never written.")
        leave_claim(claimed, sid)
        resent = cli("send", f"claude:{sid}", "Claimed, never written.", "--message-id", claimed)
        assert resent["outcome"] == "delivered", resent

        fence(stub, sid)
        assert seen_by_model(stub, stored) == 1 and seen_by_model(stub, claimed) == 1
        assert written(host, sid, stored) == 1 and written(host, sid, claimed) == 1


def test_a_send_killed_after_its_write_is_finished_by_the_resend_without_a_second_write(
    host: ClaudeHost, stub: MessagesStub, tmp_path: Path,
) -> None:
    # the session is inside a slow tool call, so the killed send's frame waits in the host's
    # queue: the resend must find it there and wait for it instead of writing it again
    host.allow_tools("Bash")
    marker = tmp_path / "tool-started"
    stub.enqueue("First turn done.", Reply.tool_use("Bash", {"command": f"touch {marker} && sleep 12", "description": "wait"}))
    stub.default_text = "Noted."
    with host.start_stream(cwd=project(tmp_path, "written")) as stream:
        sid = start(stream, host)
        stream.send("run the slow tool")
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while not marker.exists():
            assert time.monotonic() < deadline, stream.stderr[-2000:]
            time.sleep(0.1)
        mid = new_message_id()
        argv = [str(agent_link_bin()), "send", f"claude:{sid}", "Status?", "--message-id", mid, "--anticipation", "reply",
                "--from", "team:me", "--json"]
        sender = subprocess.Popen(argv, env={**os.environ, "AGENT_LINK_CLAUDE_INBOX_WAIT_MS": "120000"},
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while not transcript_has(host, sid, mid):  # the host took the frame
                assert sender.poll() is None and time.monotonic() < deadline, (sender.returncode, transcript_has(host, sid, mid))
                time.sleep(0.1)
            kinds_before = transcript_has(host, sid, mid)
        finally:
            sender.send_signal(signal.SIGKILL)
            sender.wait()
        assert kinds_before and set(kinds_before) == {"queue-operation"}, kinds_before  # taken, not yet shown

        resent = cli("send", f"claude:{sid}", "Status?", "--message-id", mid, "--anticipation", "reply")
        assert resent["outcome"] == "delivered" and resent["duplicate"] is True, resent
        assert resent["inbox"]["earlierPush"] is True, resent  # waited for the dead send's frame
        fence(stub, sid)
        assert seen_by_model(stub, mid) == 1 and written(host, sid, mid) == 1


def test_retry_unknown_later_confirms_the_earlier_write_instead_of_writing_again(
    host: ClaudeHost, stub: MessagesStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    host.allow_tools("Bash")
    marker = tmp_path / "tool-started"
    stub.enqueue("First turn done.", Reply.tool_use("Bash", {"command": f"touch {marker} && sleep 6", "description": "wait"}))
    stub.default_text = "Noted."
    with host.start_stream(cwd=project(tmp_path, "unknown")) as stream:
        sid = start(stream, host)
        stream.send("run the slow tool")
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while not marker.exists():
            assert time.monotonic() < deadline, stream.stderr[-2000:]
            time.sleep(0.1)
        mid = new_message_id()
        monkeypatch.setenv("AGENT_LINK_CLAUDE_INBOX_WAIT_MS", "1")  # gives up before the tool ends
        first = cli("send", f"claude:{sid}", "Status?", "--message-id", mid, "--anticipation", "reply")
        assert first["outcome"] == "unknown", first
        monkeypatch.setenv("AGENT_LINK_CLAUDE_INBOX_WAIT_MS", "60000")
        stream.wait_results(2, RUN_TIMEOUT_S)  # the tool call ended; the session read the message since

        plain = cli("send", f"claude:{sid}", "Status?", "--message-id", mid, "--anticipation", "reply")
        assert plain["outcome"] == "unknown" and plain["attempts"] == 0, plain  # nothing pushed without the flag
        retried = cli("send", f"claude:{sid}", "Status?", "--message-id", mid, "--anticipation", "reply", "--retry-unknown")
        assert retried["outcome"] == "delivered" and retried["attempts"] == 1, retried
        assert retried["inbox"]["state"] == "already_delivered", retried  # found, not written again
        fence(stub, sid)
        assert seen_by_model(stub, mid) == 1 and written(host, sid, mid) == 1
