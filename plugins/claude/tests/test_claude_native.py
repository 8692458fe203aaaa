"""The inbox-socket path of the claude harness against a fake session (no real host): frames,
evidence, receipts, liveness and the health path. The real-host truth of each fact is in
test_claude_native_realhost.py."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_link_claude import native
from agent_link_claude.harness import claim_push, last_push_settled, settle_push
from agent_link_claude.procs import proc_start
from agent_link_core.app import App
from agent_link_core.model import Caller

S = "33333333-3333-4333-8333-333333333333"
ALICE = Caller("test:alice", "config", "test")


class FakeInbox:
    """A Unix socket that reads frames like a session's inbox and answers as told.

    ``mode``: ``transcript`` (append the content to the session's transcript as a ``user``
    line, the host's record of a prompt), ``hold`` (send a ``held`` receipt to ``from``), or
    ``silent``.
    """

    def __init__(self, path: str, transcript: Path, mode: str) -> None:
        self.path, self.transcript, self.mode = path, transcript, mode
        self.frames: list[dict[str, Any]] = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(4)
        self.sock.settimeout(0.1)
        self.running = True
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while self.running:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                data = b""
                while chunk := conn.recv(65536):
                    data += chunk
            for line in data.splitlines():
                frame = json.loads(line)
                self.frames.append(frame)
                if frame.get("type") == "user":
                    self._answer(frame)

    def _answer(self, frame: dict[str, Any]) -> None:
        if self.mode == "transcript":
            with self.transcript.open("a") as f:
                f.write(json.dumps({"type": "queue-operation", "operation": "enqueue", "content": frame["message"]["content"]}) + "\n")
                f.write(json.dumps({"type": "user", "origin": {"kind": "peer"}, "message": frame["message"]}) + "\n")
        elif self.mode == "forge":  # another process of the user answers in the host's place
            receipt = {"type": "control", "action": "peer_message_status", "status": "dropped",
                       "reason": "dropped by the host", "orig_msg_id": frame["msg_id"]}
            # This test process plays the host, so the forger must not descend from it: it forks
            # and its first process exits (the forger is orphaned); it stays alive 3 s after sending,
            # so its lineage is still readable when the receipt is judged.
            code = ("import os, socket, sys, time\n"
                    "if os.fork(): os._exit(0)\n"
                    "with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as out:\n"
                    "    out.connect(sys.argv[1]); out.sendall(sys.argv[2].encode() + b'\\n')\n"
                    "time.sleep(3)")
            subprocess.run([sys.executable, "-c", code, frame["from"][len("uds:"):], json.dumps(receipt)], check=True, timeout=30)
        elif self.mode == "hold":
            receipt = {"type": "control", "action": "peer_message_status", "status": "held",
                       "reason": "held for the recipient user's approval", "orig_msg_id": frame["msg_id"]}
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as out:
                out.connect(frame["from"][len("uds:"):])
                out.sendall(json.dumps(receipt).encode() + b"\n")

    def close(self) -> None:
        self.running = False
        self.thread.join(timeout=5)
        self.sock.close()


@pytest.fixture
def socks() -> Iterator[str]:
    # Unix socket paths are limited to about 100 bytes: pytest's tmp_path can be longer
    path = tempfile.mkdtemp(prefix="al-socks-", dir="/tmp")
    os.chmod(path, 0o700)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def session(fake_claude: Any, socks: str) -> Iterator[Any]:
    """A live record of this very process (so its pid and start time check out) with an inbox."""

    @contextlib.contextmanager
    def make(mode: str, *, token: str | None = "t0k3n") -> Iterator[FakeInbox]:
        cfg = fake_claude.config_dir()
        transcript = fake_claude.write_transcript(S, "/work/proj")
        path = os.path.join(socks, f"{os.getpid() + 1}.sock")
        live = fake_claude.write_live(os.getpid(), S, "/work/proj", name="proj-7c")
        record = json.loads(live.read_text())
        record.update(messagingSocketPath=path, version="2.1.332")
        live.write_text(json.dumps(record))
        if token is not None:
            digest = __import__("hashlib").sha256(path.encode()).hexdigest()
            (cfg / "sessions" / f"{os.getpid()}.{digest}.key").write_text(json.dumps({"peerToken": token}))
        inbox = FakeInbox(path, transcript, mode)
        try:
            yield inbox
        finally:
            inbox.close()

    yield make


@pytest.fixture
def app(fake_claude: Any, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AGENT_LINK_CLAUDE_INBOX_WAIT_MS", "3000")
    application = App.create()
    yield application
    application.close()


def test_one_push_claim_at_a_time_across_mailboxes(app: App) -> None:
    from agent_link_core.mailbox import Mailbox, new_message_id
    from agent_link_core.records import OutgoingMessage
    from agent_link_core.store import Store

    box = app.mailbox
    row, _ = box.store_message(OutgoingMessage(new_message_id(), Caller("test:alice", "config", "test"), "claude:x", "claude:x",
                                               "please answer", "reply", None, None))
    mid = row["id"]
    other = Mailbox(Store(app.config.db_path), app.config)  # another process's connection to the same database
    assert claim_push(box, mid, {"pid": 1}) is None
    held = claim_push(other, mid, {"pid": 2})
    assert held is not None and held["holder"] == {"pid": 1}
    assert claim_push(other, mid, {"pid": 2}, replacing=held["seq"] + 1) is not None  # not the open claim
    assert claim_push(other, mid, {"pid": 2}, replacing=held["seq"]) is None  # taken over (holder 1 died)
    assert last_push_settled(box, mid) == {"outcome": "orphaned", "claim": held["seq"]}
    assert claim_push(box, mid, {"pid": 3}, replacing=held["seq"]) is not None  # 2 holds it now
    settle_push(other, mid, "delivered", {"via": "x"})
    assert last_push_settled(box, mid) == {"outcome": "delivered", "via": "x"}
    assert claim_push(box, mid, {"pid": 3}) is None
    other.store.close()


def send(app: App, body: str = "Build is green.", anticipation: str = "fyi") -> Any:
    return anyio.run(lambda: app.send(caller=ALICE, to=f"claude:{S}", body=body, anticipation=anticipation))


def test_frames_carry_the_envelope_and_no_claimed_identity() -> None:
    inbox = native.Inbox(1, S, "proj-7c", "idle", "/tmp/x/1.sock", "2.1.332", token="abc")
    mid = "01M8PMQ1E1Y5GJ4W170NTRC1AD"
    auth, user = (json.loads(line) for line in native.frames(inbox, "<agent-link-message>", mid, "reply", "uds:/tmp/x/2.sock").splitlines())
    assert auth == {"type": "auth", "token": "abc"}
    assert user["message"] == {"role": "user", "content": "<agent-link-message>"}
    assert (user["priority"], user["from"], user["session_id"]) == ("next", "uds:/tmp/x/2.sock", S)
    assert uuid.UUID(user["msg_id"]).hex.upper() != mid and native.wire_id(mid) == user["msg_id"]
    assert "from-mode" not in json.dumps(user) and "cross-session-message" not in json.dumps(user)
    [only] = native.frames(native.Inbox(1, S, None, None, "/p", None), "x", mid, "fyi", None).splitlines()
    assert json.loads(only)["priority"] == "later" and "from" not in json.loads(only)


def test_wire_id_is_the_ulid_as_a_uuid() -> None:
    mid = "01M8PMQ1E1Y5GJ4W170NTRC1AD"
    from ulid import ULID

    assert uuid.UUID(native.wire_id(mid)).bytes == ULID.from_str(mid).bytes
    assert uuid.UUID(native.wire_id("not-a-ulid"))  # still a UUID


def test_only_records_of_running_processes_with_their_start_time_count(fake_claude: Any) -> None:
    cfg = str(fake_claude.config_dir())
    fake_claude.write_live(os.getpid(), S)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        fake_claude.write_live(sleeper.pid, "44444444-4444-4444-8444-444444444444", proc="1")  # pid reused
    finally:
        sleeper.kill()
        sleeper.wait()
    fake_claude.write_live(sleeper.pid + 100000, "55555555-5555-4555-8555-555555555555")  # no such process
    assert [r["sessionId"] for r in native.live_records(cfg)] == [S]
    assert native.live_records(cfg)[0]["procStart"] == proc_start(os.getpid())


def test_queue_bookkeeping_is_not_evidence(fake_claude: Any) -> None:
    cfg = str(fake_claude.config_dir())
    path = fake_claude.write_transcript(S)
    with path.open("a") as f:
        f.write(json.dumps({"type": "queue-operation", "content": "MID123"}) + "\n")
    assert native.transcript_shows(cfg, S, "MID123") is None
    with path.open("a") as f:
        f.write(json.dumps({"type": "user", "message": {"content": "MID123"}}) + "\n")
    assert native.transcript_shows(cfg, S, "MID123") == "user"


def test_delivered_only_once_the_transcript_shows_it(app: App, session: Any) -> None:
    with session("transcript") as inbox:
        listed = anyio.run(lambda: app.harnesses["claude"].get_session(S))
        assert listed.receive["push"] == "inbox" and listed.extra["name"] == "proj-7c"
        outcome = send(app)
    mid = outcome.message["id"]
    assert outcome.delivery.delivered and outcome.delivery.state == "delivered-inbox"
    assert [f["type"] for f in inbox.frames] == ["auth", "user"]
    assert mid in inbox.frames[1]["message"]["content"]
    row = app.mailbox.get_row(mid)
    assert row["delivered_via"] == "claude-inbox" and row["first_delivered_at"] is not None


def test_a_held_receipt_is_reported_as_held_and_the_message_stays(app: App, session: Any) -> None:
    with session("hold", token=None) as inbox:
        outcome = send(app, anticipation="action")
    mid = outcome.message["id"]
    assert [f["type"] for f in inbox.frames] == ["user"]  # no key file: no auth line
    assert not outcome.delivery.delivered and outcome.delivery.state == "held"
    [warning] = outcome.delivery.warnings
    assert warning["code"] == "held" and warning["message"].startswith("held: approve it in that session")
    assert app.mailbox.get_row(mid)["first_delivered_at"] is None
    kinds = [r["kind"] for r in app.store.conn.execute("SELECT kind FROM message_events WHERE message_id = ?", (mid,))]
    assert "inbox_held" in kinds
    assert app.harnesses["claude"].health()["lateConfirmed"] == 0
    with inbox.transcript.open("a") as f:  # approved in that session: the host gives it to the model
        f.write(json.dumps({"type": "user", "message": {"role": "user", "content": f"id=\"{mid}\""}}) + "\n")
    assert app.harnesses["claude"].health()["lateConfirmed"] == 1
    assert app.mailbox.get_row(mid)["delivered_via"] == "claude-inbox"


def test_a_receipt_from_another_process_is_not_believed(app: App, session: Any) -> None:
    """Issue 29, item 9: any process of the user can connect to the receipt socket; a
    "dropped" receipt it sends is not the host's, so the sender is not told it was dropped."""
    with session("forge") as inbox:
        outcome = send(app, anticipation="action")
    assert [f["type"] for f in inbox.frames] == ["auth", "user"]
    assert outcome.delivery.state == "pushed-inbox" and not [w for w in outcome.delivery.warnings if w["code"] == "dropped"]
    kinds = [r["kind"] for r in app.store.conn.execute("SELECT kind FROM message_events WHERE message_id = ?",
                                                       (outcome.message["id"],))]
    assert "inbox_dropped" not in kinds


def test_no_evidence_within_the_wait_is_unknown_and_never_resent(app: App, session: Any) -> None:
    with session("silent") as inbox:
        outcome = send(app)
        assert outcome.delivery.unknown and outcome.delivery.state == "pushed-inbox"
        assert outcome.delivery.warnings[0]["code"] == "inbox_unconfirmed"
        assert app.mailbox.push_outcome(outcome.message["id"]) == "unknown"
        assert sum(f["type"] == "user" for f in inbox.frames) == 1


def test_evidence_that_comes_after_the_wait_is_still_recorded(app: App, session: Any, fake_claude: Any) -> None:
    with session("silent"):
        mid = send(app).message["id"]
    assert app.harnesses["claude"].health()["lateConfirmed"] == 0
    transcript = fake_claude.config_dir() / "projects" / fake_claude.project_dir_name("/work/proj") / f"{S}.jsonl"
    with transcript.open("a") as f:  # the busy session took it after its long tool call
        f.write(json.dumps({"type": "user", "message": {"role": "user", "content": f"<agent-link-message id=\"{mid}\">"}}) + "\n")
    assert app.harnesses["claude"].health()["lateConfirmed"] == 1
    row = app.mailbox.get_row(mid)
    assert row["delivered_via"] == "claude-inbox" and app.mailbox.push_outcome(mid) == "delivered"


def test_a_dead_socket_falls_back_to_the_hooks(app: App, session: Any, socks: str) -> None:
    with session("silent") as inbox:
        inbox.close()  # the file stays, nobody listens
        outcome = send(app)
    assert outcome.delivery.state == "queued-online" and outcome.delivery.warnings[0]["code"] == "inbox_unavailable"


def test_mailbox_only_and_the_setting_keep_the_socket_out(app: App, session: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    with session("transcript") as inbox:
        monkeypatch.setenv("AGENT_LINK_DISABLE_CLAUDE_INBOX", "1")
        off = App.create()
        try:
            assert send(off).delivery.state == "queued-online"
            [path] = [p for p in off.harnesses["claude"].health()["sessions"] if p["sessionId"] == S]
            assert path["delivery"] == "hook-only" and "AGENT_LINK_DISABLE_CLAUDE_INBOX" in path["reason"]
        finally:
            off.close()
        assert inbox.frames == []


def test_health_names_the_path_and_why(fake_claude: Any, app: App, session: Any) -> None:
    with session("silent"):
        [path] = app.harnesses["claude"].health()["sessions"]
        assert (path["delivery"], path["name"], path["version"]) == ("native-inbox", "proj-7c", "2.1.332")
    record = {"pid": os.getpid(), "version": "2.1.197"}
    assert native.path_of(record, disabled=False, channel=False)[1].startswith("Claude Code 2.1.197 has no inbox socket")
    path, why = native.path_of({"pid": os.getpid(), "version": "2.1.332"}, disabled=False, channel=True)
    assert path == "channel" and "messaging gate is off" in why


def push_again(app: App, mid: str) -> Any:
    row = app.mailbox.get_row(mid)
    return anyio.run(lambda: app.push(row, {}))


def test_a_push_another_live_process_holds_is_not_written_twice(app: App, session: Any) -> None:
    with session("silent") as inbox:
        mid = send(app).message["id"]  # written once, no evidence: unknown
        holder = {"pid": os.getpid(), "procStart": proc_start(os.getpid()), "via": "claude-inbox", "session": S}
        assert claim_push(app.mailbox, mid, holder) is None  # as if another push of it ran now
        delivery = push_again(app, mid)
        assert delivery.state == "queued-online" and delivery.warnings[0]["code"] == "push_in_progress"
        assert sum(f["type"] == "user" for f in inbox.frames) == 1


def test_a_dead_claim_without_a_trace_in_the_transcript_is_written_once(app: App, session: Any) -> None:
    from agent_link_core.mailbox import new_message_id
    from agent_link_core.records import OutgoingMessage

    with session("transcript") as inbox:
        mid = new_message_id()  # stored by a send that died after taking the push claim
        app.mailbox.store_message(OutgoingMessage(mid, ALICE, f"claude:{S}", f"claude:{S}", "x", "fyi", None, None))
        child = subprocess.Popen(["true"])
        child.wait()
        assert claim_push(app.mailbox, mid, {"pid": child.pid, "procStart": "1"}) is None
        delivery = push_again(app, mid)
        assert delivery.delivered and sum(f["type"] == "user" for f in inbox.frames) == 1
        again = push_again(app, mid)  # delivered by now: the core pushes no copy
        assert again.state == "delivered" and not again.delivered and sum(f["type"] == "user" for f in inbox.frames) == 1
        assert sum(f["type"] == "user" for f in inbox.frames) == 1


def test_a_message_the_session_holds_is_not_written_again(app: App, session: Any) -> None:
    with session("hold", token=None) as inbox:
        mid = send(app, anticipation="action").message["id"]
        again = push_again(app, mid)
        assert again.state == "held" and again.fields["inbox"]["state"] == "already_held"
        assert again.warnings[0]["code"] == "held"
        assert sum(f["type"] == "user" for f in inbox.frames) == 1
