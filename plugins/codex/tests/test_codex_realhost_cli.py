"""The ``agent-link`` CLI against REAL Codex app-servers (the pinned Codex CLI, stub
Responses API), as subprocesses of the installed ``agent-link`` and in-process through click's
runner.

Two app-servers with their own CODEX_HOME run for the whole module; each test makes its own
threads. The CLI's own CODEX_HOME is the test's empty one, so it can check a thread only
through an app-server, never through transcripts: that is what makes a lost answer
``unknown``.

Observed here: a ``turn/start`` whose connection is cut right after the request is still
carried out by Codex (the userMessage with the message id as ``clientId`` appears), so a blind
resend would start a second turn.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_link_codex.appserver import AppServerClient
from agent_link_codex.endpoints import socket_endpoint
from agent_link_testing.codex_host import CodexAppServer
from agent_link_testing.responses_stub import ResponsesStub
from click.testing import CliRunner, Result

from agent_link_core.cli import EXIT_UNKNOWN, build_cli
from agent_link_core.commands.send import send_reliably
from agent_link_core.errors import AgentLinkError
from agent_link_core.mailbox import new_message_id

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(120)]

WAIT_MS = 15_000
AGENT_LINK = str(Path(sys.executable).parent / "agent-link")


@pytest.fixture(scope="module")
def stub() -> Iterator[ResponsesStub]:
    with ResponsesStub() as server:
        yield server


@pytest.fixture(scope="module")
def server_a(stub: ResponsesStub, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CodexAppServer]:
    with CodexAppServer(stub.base_url, root=tmp_path_factory.mktemp("codex-a")) as server:
        yield server


@pytest.fixture(scope="module")
def server_b(stub: ResponsesStub, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CodexAppServer]:
    with CodexAppServer(stub.base_url, root=tmp_path_factory.mktemp("codex-b")) as server:
        yield server


@pytest.fixture(autouse=True)
def cli_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI never starts a private app-server here, and only the codex harness is loaded."""
    monkeypatch.setenv("AGENT_LINK_CODEX_AUTOSTART", "0")
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "claude roles receipts")


def agent_link(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``agent-link ARGS`` as a subprocess, with the test's environment plus ``env``."""
    return subprocess.run([AGENT_LINK, *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=60)


async def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(agent_link, *args, **env)


async def cli(*args: str) -> Result:
    """``agent-link ARGS`` in-process (click's runner), off the event loop."""
    return await asyncio.to_thread(lambda: CliRunner().invoke(build_cli(), list(args), catch_exceptions=False))


def ep_id(server: CodexAppServer) -> str:
    return socket_endpoint(str(server.socket_path), "registered").id


async def connect(server: CodexAppServer) -> AppServerClient:
    client = await AppServerClient.connect_unix(server.socket_path, refuse_server_requests=True)
    await client.initialize("someone-else", "0.0.1", timeout_ms=WAIT_MS)
    return client


async def new_thread(raw: AppServerClient) -> str:
    """A thread with one finished turn (so it has a rollout and is listed)."""
    thread_id = str((await raw.request("thread/start", {}, timeout_ms=WAIT_MS))["thread"]["id"])
    async with raw.subscription(thread_id=thread_id) as sub:
        await raw.request("turn/start", {"threadId": thread_id, "input": [{"type": "text", "text": "setup", "text_elements": []}]},
                          timeout_ms=WAIT_MS)
        await sub.wait_for(lambda n: n.method == "turn/completed", timeout_ms=WAIT_MS)
    return thread_id


async def client_ids(raw: AppServerClient, thread_id: str) -> list[str | None]:
    """The ``clientId`` of every userMessage of the thread, oldest first."""
    page = await raw.request("thread/items/list", {"threadId": thread_id, "limit": 100}, timeout_ms=WAIT_MS)
    return [e["item"].get("clientId") for e in page["data"] if e["item"]["type"] == "userMessage"]


async def turn_count(raw: AppServerClient, thread_id: str) -> int:
    page = await raw.request("thread/turns/list", {"threadId": thread_id, "limit": 100, "itemsView": "notLoaded"}, timeout_ms=WAIT_MS)
    return len(page["data"])


async def test_sessions_lists_two_app_servers_while_a_third_is_dead(stub: ResponsesStub, server_a: CodexAppServer,
                                                                    server_b: CodexAppServer, tmp_path: Path) -> None:
    threads = {}
    for server in (server_a, server_b):
        raw = await connect(server)
        try:
            threads[ep_id(server)] = await new_thread(raw)
        finally:
            await raw.close()
    with CodexAppServer(stub.base_url, root=tmp_path / "codex-c") as server_c:
        for server, label in ((server_a, "alpha"), (server_b, "beta"), (server_c, "gamma")):
            added = await run("endpoints", "add", str(server.socket_path), "--label", label, "--json")
            assert added.returncode == 0, added.stderr
            assert json.loads(added.stdout)["endpoint"] == {"id": ep_id(server), "label": label, "source": "registered",
                                                            "reachable": True, "reason": None}
        server_c.kill()  # crashed: its socket file stays behind and nobody answers
        listed = await run("endpoints", "list", "--json")
        result = await run("sessions", "--json")
        human = await cli("sessions")
    reachable = {e["id"]: (e["label"], e["reachable"]) for e in json.loads(listed.stdout)["endpoints"] if e["source"] == "registered"}
    assert reachable == {ep_id(server_a): ("alpha", True), ep_id(server_b): ("beta", True), ep_id(server_c): ("gamma", False)}
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    found = {s["endpoint"]: s["threadId"] for s in data["sessions"] if s["threadId"] in threads.values()}
    assert found == threads  # each thread from its own app-server, in one listing
    for s in data["sessions"]:
        assert s["endpointAddress"] == f"{s['endpoint']}:{s['threadId']}" and s["cwd"] == "work"
    codex = data["providers"]["codex"]
    assert codex["complete"] is False
    assert {e["id"]: e["reachable"] for e in codex["endpoints"]} == {ep_id(server_a): True, ep_id(server_b): True, ep_id(server_c): False}
    dead_line = f"agent-link: codex endpoint {ep_id(server_c)} (registered) is unreachable"
    assert dead_line in result.stderr.splitlines() and dead_line in human.stderr.splitlines()
    assert all(f"codex:{t}" in human.stdout for t in threads.values())
    for output in (listed.stdout, result.stdout, result.stderr, human.stdout):
        assert str(tmp_path) not in output and str(server_a.root) not in output and "/tmp/codex-daemon" not in output


async def test_send_to_a_real_thread_is_delivered_once(stub: ResponsesStub, server_a: CodexAppServer,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    raw = await connect(server_a)  # stays connected: the threads stay loaded
    try:
        target, sender = await new_thread(raw), await new_thread(raw)
        monkeypatch.setenv("AGENT_LINK_CODEX_SOCK", str(server_a.socket_path))
        ep, mid = ep_id(server_a), new_message_id()
        args = ("send", f"{ep}:{target}", "Please review PR 7", "--message-id", mid, "--from-thread", sender,
                "--from-endpoint", ep, "--json")
        first = await cli(*args)
        assert first.exit_code == 0, first.stderr
        data = json.loads(first.stdout)
        assert (data["outcome"], data["to"], data["attempts"]) == ("delivered", f"codex:{target}", 1)
        assert data["evidence"]["clientId"] == mid and data["evidence"]["threadId"] == target and data["action"] == "started_turn"
        seen = await asyncio.to_thread(stub.wait_for, lambda r: r.contains(mid), WAIT_MS / 1000)
        assert seen.thread_id == target and any(f'from="codex:{sender}"' in t for t in seen.user_texts())
        turns = await turn_count(raw, target)
        again = await cli(*args)
        assert again.exit_code == 0
        assert {k: json.loads(again.stdout)[k] for k in ("outcome", "duplicate", "attempts")} == {
            "outcome": "delivered", "duplicate": True, "attempts": 0}
        changed = await cli("send", f"{ep}:{target}", "Other text", "--message-id", mid, "--from-thread", sender,
                            "--from-endpoint", ep, "--json")
        assert changed.exit_code == 1 and json.loads(changed.stdout)["outcome"] == "rejected"
        await asyncio.sleep(0.5)  # a second turn, had one been started, would show by now
        assert await turn_count(raw, target) == turns
        assert (await client_ids(raw, target)).count(mid) == 1
        # in a shell Codex runs, the sender is the thread that runs it
        monkeypatch.setenv("CODEX_THREAD_ID", sender)
        inside = await cli("send", f"codex:{target}", "From inside Codex", "--json")
        assert inside.exit_code == 0 and json.loads(inside.stdout)["outcome"] == "delivered"
        seen = await asyncio.to_thread(stub.wait_for, lambda r: r.contains(json.loads(inside.stdout)["messageId"]), WAIT_MS / 1000)
        assert any(f'from="codex:{sender}"' in t for t in seen.user_texts())
    finally:
        await raw.close()


class AckCutter:
    """A Unix-socket relay to an app-server that loses the answer to the first ``turn/start``.

    It passes the WebSocket handshake through and reads the client's frames (masked, not
    compressed: the client disables compression); when the first ``turn/start`` request comes,
    it forwards it, cuts the client's side at once and stops accepting connections. The
    app-server's side stays open until :meth:`close`, so Codex carries the request out as usual
    and only its answer (and every notification after it) is lost.
    """

    def __init__(self, path: Path, upstream: str) -> None:
        self.path = path
        self.upstream = upstream
        self.cut = threading.Event()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._listener = socket.socket(socket.AF_UNIX)
        self._listener.bind(str(path))
        self._listener.listen(8)
        self._spawn(self._accept)

    def _spawn(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self.cut.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.socket(socket.AF_UNIX)
            server.connect(self.upstream)
            self._sockets += [client, server]
            self._spawn(self._up, client, server)
            self._spawn(self._down, server, client)

    def _up(self, client: socket.socket, server: socket.socket) -> None:
        buf = b""
        handshake = True
        try:
            while True:
                if handshake and b"\r\n\r\n" in buf:
                    head, _, buf = buf.partition(b"\r\n\r\n")
                    server.sendall(head + b"\r\n\r\n")
                    handshake = False
                frame = None if handshake else _frame(buf)
                if frame is None:
                    data = client.recv(65536)
                    if not data:
                        return
                    buf += data
                    continue
                raw, opcode, payload, buf = frame
                if opcode == 1 and not self.cut.is_set() and json.loads(payload).get("method") == "turn/start":
                    self.cut.set()  # before forwarding: the answer must not get through
                    server.sendall(raw)
                    client.shutdown(socket.SHUT_RDWR)
                    self._listener.close()
                    return
                server.sendall(raw)
        except OSError:
            return

    def _down(self, server: socket.socket, client: socket.socket) -> None:
        try:
            while data := server.recv(65536):
                if not self.cut.is_set():
                    client.sendall(data)
        except OSError:
            return

    def close(self) -> None:
        """Close every socket and wait (bounded) for the relay threads."""
        self.cut.set()
        for sock in [self._listener, *self._sockets]:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        for thread in self._threads:
            thread.join(5)


def _frame(buf: bytes) -> tuple[bytes, int, bytes, bytes] | None:
    """``(frame bytes, opcode, unmasked payload, rest)`` for the first whole WebSocket frame."""
    if len(buf) < 2:
        return None
    size, at = buf[1] & 0x7F, 2
    if size >= 126:
        width = 2 if size == 126 else 8
        if len(buf) < 2 + width:
            return None
        size, at = int.from_bytes(buf[2:2 + width], "big"), 2 + width
    key = b""
    if buf[1] & 0x80:
        key, at = buf[at:at + 4], at + 4
    if len(buf) < at + size:
        return None
    payload = buf[at:at + size]
    if key:
        payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return buf[:at + size], buf[0] & 0x0F, payload, buf[at + size:]


async def test_lost_acknowledgement_is_unknown_and_retry_unknown_does_not_duplicate(server_a: CodexAppServer) -> None:
    raw = await connect(server_a)
    short = Path(tempfile.mkdtemp(prefix="alc-"))  # Unix socket paths must stay short
    proxy = AckCutter(short / "cut.sock", os.path.realpath(server_a.socket_path))
    try:
        target = await new_thread(raw)
        mid = new_message_id()
        args = ("send", f"codex:{target}", "Did this arrive?", "--message-id", mid, "--json")
        lost = await run(*args, "--retry-count", "2", "--retry-delay-ms", "10", AGENT_LINK_CODEX_SOCK=str(proxy.path))
        assert proxy.cut.is_set() and lost.returncode == EXIT_UNKNOWN, (lost.stdout, lost.stderr)
        data = json.loads(lost.stdout)
        assert (data["outcome"], data["attempts"]) == ("unknown", 1)  # never retried automatically
        assert [w["code"] for w in data["warnings"]] == ["codex_push_unverified"]
        # the request did reach Codex: the thread has the message, so a blind resend would double it
        deadline = time.monotonic() + WAIT_MS / 1000
        while mid not in await client_ids(raw, target) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert (await client_ids(raw, target)).count(mid) == 1
        turns = await turn_count(raw, target)
        direct = {"AGENT_LINK_CODEX_SOCK": str(server_a.socket_path)}
        kept = await run(*args, **direct)
        assert kept.returncode == EXIT_UNKNOWN and json.loads(kept.stdout)["attempts"] == 0  # not resent without asking
        retried = await run(*args, "--retry-unknown", **direct)
        assert retried.returncode == 0, (retried.stdout, retried.stderr)
        data = json.loads(retried.stdout)
        assert (data["outcome"], data["attempts"], data["action"]) == ("delivered", 1, "already_delivered")
        assert [w["code"] for w in data["warnings"]] == ["codex_push_response_lost"]
        await asyncio.sleep(0.5)
        assert (await client_ids(raw, target)).count(mid) == 1 and await turn_count(raw, target) == turns
    finally:
        proxy.close()
        shutil.rmtree(short, ignore_errors=True)
        await raw.close()


async def test_intercom_variables_source_proof_and_source_filter(server_a: CodexAppServer) -> None:
    """Intercom's variable names work as aliases, a CODEX_THREAD_ID no app-server knows is
    signs unverified and says so, and --source filters by a thread's source kind."""
    raw = await connect(server_a)  # stays connected: the threads stay loaded
    try:
        target, sender = await new_thread(raw), await new_thread(raw)
        ep = ep_id(server_a)
        extra = {"CODEX_APP_SERVER_SOCKET": str(server_a.socket_path)}
        listed = await run("sessions", "--json", **extra)
        assert listed.returncode == 0, listed.stderr
        # only codex rows: a CI run once listed a row without threadId, whose kind this shows if it recurs
        rows = json.loads(listed.stdout)["sessions"]
        sessions = {s["threadId"]: s for s in rows if s["harness"] == "codex" and "threadId" in s}
        assert {target, sender} <= set(sessions), [s for s in rows if "threadId" not in s]
        eps = json.loads((await run("endpoints", "list", "--json", **extra)).stdout)["endpoints"]
        assert [e["source"] for e in eps if e["id"] == ep] == ["env-extra"]
        assert ep not in [e["id"] for e in json.loads((await run("endpoints", "list", "--json")).stdout)["endpoints"]]

        kind = sessions[target]["source"]
        only = json.loads((await run("sessions", "--json", "--source", kind, **extra)).stdout)["sessions"]
        assert target in {s["threadId"] for s in only} and {s["source"] for s in only} == {kind}
        other = json.loads((await run("sessions", "--json", "--source", "exec", **extra)).stdout)["sessions"]
        assert target not in {s.get("threadId") for s in other}

        bogus = await run("send", f"codex:{target}", "hi", "--json", **extra, CODEX_THREAD_ID="019a0000-0000-7000-8000-00000000abcd")
        assert bogus.returncode == 0 and "has no such session" in bogus.stderr, bogus.stderr
        assert "sender_unverified" in [w["code"] for w in json.loads(bogus.stdout)["warnings"]]
        proved = await run("send", f"codex:{target}", "hi from a proved thread", "--json", **extra, CODEX_THREAD_ID=sender,
                           AGENT_SESSION_INTERCOM_SOURCE_ENDPOINT=ep)
        assert proved.returncode == 0, proved.stderr
        assert json.loads(proved.stdout)["outcome"] == "delivered"
    finally:
        await raw.close()


async def test_socket_option_uses_one_app_server_and_registers_it(server_a: CodexAppServer, server_b: CodexAppServer,
                                                                   tmp_path: Path) -> None:
    threads = {}
    for server in (server_a, server_b):
        raw = await connect(server)
        try:
            threads[ep_id(server)] = await new_thread(raw)
        finally:
            await raw.close()
    env = {"AGENT_LINK_CODEX_SOCK": str(server_b.socket_path)}  # would be used, were it not for --socket
    listed = await run("sessions", "--socket", str(server_a.socket_path), "--json", **env)
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    assert {s["endpoint"] for s in data["sessions"]} == {ep_id(server_a)}
    assert threads[ep_id(server_a)] in {s["threadId"] for s in data["sessions"]}
    assert data["providers"]["codex"]["registration"] == "added"
    assert str(server_a.socket_path) not in listed.stdout
    registered = json.loads((await run("endpoints", "list", "--json")).stdout)["endpoints"]
    assert [e["source"] for e in registered if e["id"] == ep_id(server_a)] == ["registered"]

    # send through the socket: the target thread is on server_b, reached through its own socket
    sent = await run("send", f"codex:{threads[ep_id(server_b)]}", "via --socket", "--from", "team:me",
                     "--socket", str(server_b.socket_path), "--json")
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout)["endpointRegistration"] == "added"
    # the other app-server is not asked: its thread is not found through server_b's socket
    missed = await run("send", f"codex:{threads[ep_id(server_a)]}", "x", "--from", "team:me",
                       "--socket", str(server_b.socket_path))
    assert missed.returncode == 1 and "Traceback" not in missed.stderr
    dead = await run("sessions", "--socket", str(tmp_path / "nothing.sock"))
    assert dead.returncode != 0 and dead.stderr.startswith("agent-link:") and "Traceback" not in dead.stderr


async def test_envelope_intercom_v2_reaches_the_thread(stub: ResponsesStub, server_a: CodexAppServer,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_link_codex.intercom import HEADER, parse_envelope_v2
    from ulid import ULID

    raw = await connect(server_a)
    try:
        target, sender = await new_thread(raw), await new_thread(raw)
        uid = "0b0d6f58-64a4-4a8e-9f5e-3c2a1d0e9f11"
        env = {"AGENT_LINK_CODEX_SOCK": str(server_a.socket_path), "CODEX_THREAD_ID": sender}
        sent = await run("send", f"codex:{target}", "Please review the report.", "--envelope", "intercom-v2",
                         "--message-id", uid, "--ttl-ms", "300000", "--correlation-id", "job-7", "--from-project", "reports",
                         "--label", "reviewer", "--json", **env)
        assert sent.returncode == 0, sent.stderr
        data = json.loads(sent.stdout)
        assert data["outcome"] == "delivered" and data["clientMessageId"] == uid
        assert str(ULID.from_str(data["messageId"]).to_uuid()) == uid
        seen = await asyncio.to_thread(stub.wait_for, lambda r: any(t.startswith(HEADER) for t in r.user_texts()), WAIT_MS / 1000)
        text = next(t for t in seen.user_texts() if t.startswith(HEADER))
        envelope = parse_envelope_v2(text)
        ep = ep_id(server_a)
        assert envelope["messageId"] == uid and envelope["correlationId"] == "job-7"
        assert envelope["expiresAt"] == data["expiresAt"]  # --ttl-ms 300000: five minutes, not the default day
        assert envelope["sender"]["address"] == {"scheme": "codex-thread", "endpointId": ep, "threadId": sender}
        assert envelope["target"] == {"scheme": "codex-thread", "endpointId": ep, "threadId": target}
        assert envelope["sender"]["project"] == {"name": "reports"} and envelope["sender"]["label"] == "reviewer"
        assert envelope["content"] == {"type": "text", "text": "Please review the report."}
        assert str(server_a.socket_path) not in text
        # The answer, in v2 too: correlated with the message it answers.
        answered = await run("reply", data["messageId"].lower(), "Reviewed.", "--envelope", "intercom-v2", "--json",
                             AGENT_LINK_CODEX_SOCK=str(server_a.socket_path), CODEX_THREAD_ID=target)
        assert answered.returncode == 0, answered.stderr
        seen = await asyncio.to_thread(stub.wait_for, lambda r: any(t.startswith(HEADER) and "Reviewed." in t for t in r.user_texts()),
                                       WAIT_MS / 1000)
        back = parse_envelope_v2(next(t for t in seen.user_texts() if t.startswith(HEADER) and "Reviewed." in t))
        assert back["correlationId"] == uid and back["sender"]["threadId"] == target and back["target"]["threadId"] == sender
        # Not from a Codex thread: refused before anything is stored.
        plain = await run("send", f"codex:{target}", "x", "--envelope", "intercom-v2", "--from", "team:me",
                          AGENT_LINK_CODEX_SOCK=str(server_a.socket_path))
        assert plain.returncode == 2 and "Codex thread" in plain.stderr
    finally:
        await raw.close()


async def test_python_resolve_source_send_and_reply(server_a: CodexAppServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_link_codex.api import resolve_source

    from agent_link_core.app import App
    from agent_link_core.identity import named_sender

    raw = await connect(server_a)
    try:
        thread = await new_thread(raw)
    finally:
        await raw.close()
    monkeypatch.setenv("AGENT_LINK_CODEX_SOCK", str(server_a.socket_path))
    app = App.create()
    try:
        ep = ep_id(server_a)
        assert await resolve_source(app, thread) == {"scheme": "codex-thread", "endpointId": ep, "threadId": thread}
        assert (await resolve_source(app, thread, ep))["endpointId"] == ep
        for bad_thread, bad_ep in ((thread, "ep_" + "0" * 16), ("019a0000-0000-7000-8000-00000000abcd", None)):
            with pytest.raises(AgentLinkError) as err:
                await resolve_source(app, bad_thread, bad_ep)
            assert err.value.code == "not_found"
        me, peer = named_sender(app, explicit="team:me"), named_sender(app, explicit=f"codex:{thread}")
        sent = await send_reliably(app, f"codex:{thread}", "question?", sender=me, anticipation="reply")
        answered = await app.reply(caller=peer, message_id=sent.message_id.lower(), message="answer")
        assert answered["replyToMessageId"] == sent.message_id and answered["target"]["address"] == "team:me"
    finally:
        await app.aclose()
