"""agent-link agents as peers of Claude Code sessions (``agent-link claude-peers``; opt-in).

Claude Code's ``ListAgents`` lists every ``<config dir>/sessions/<pid>.json`` whose process runs
with the recorded start time, and only files named after a pid (docs/claude-native-inbox.md).
So each published agent gets its own small proxy process (:func:`proxy_main`) that binds an
inbox socket, writes a record under its own pid with the agent's name, and reports every
message it receives to the publisher on stdout, with the sender's pid as the kernel reports it
(``SO_PEERCRED``). The publisher (:class:`PeerPublisher`) turns such a message into an
agent-link message from the Claude session that pid runs: the pid must run Claude Code's own
program and its live record must name it (start time checked), so the sender is what the
kernel and the host say, never what the frame or a record another process wrote claims. Replies to that
session reach it the usual way (its inbox socket).

A proxy removes its record and socket when the publisher closes its stdin (the publisher
ended, however it ended); if a proxy is killed outright its record names a dead pid, which
neither Claude Code nor agent-link lists.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from agent_link_core.json_files import read_json_object

from agent_link_claude.procs import proc_start, same_process
from agent_link_claude.sessions import host_session

NAME_RE = re.compile(r"[^a-z0-9-]+")
WRAPPER_RE = re.compile(r"^<cross-session-message [^>]*>\n?(.*?)\n?</cross-session-message>\s*$", re.DOTALL)
MAX_LINE = 1024 * 1024


def peer_name(address: str, title: str | None = None) -> str:
    """A one-word name for ``ListAgents`` / ``SendMessage``: the title (or address) lower-cased,
    runs of other characters turned into ``-``, at most 40 characters."""
    base = NAME_RE.sub("-", (title or address).lower()).strip("-")[:40].strip("-")
    return base or "agent"


def socket_dir() -> str:
    """Where Claude Code puts inbox sockets: ``$XDG_RUNTIME_DIR/cc-socks`` or ``<tmp>/cc-socks``."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return os.path.join(runtime or tempfile.gettempdir(), "cc-socks")


def message_text(frame: dict[str, Any]) -> str | None:
    """The text of a ``user`` frame, without the sender's ``<cross-session-message>`` wrapper."""
    message = frame.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if frame.get("type") != "user" or not isinstance(content, str) or not content.strip():
        return None
    match = WRAPPER_RE.match(content.strip())
    return match.group(1).strip() if match else content.strip()


# -- the proxy process ---------------------------------------------------------------------------


def proxy_main(config_dir: str, name: str, cwd: str) -> None:
    """Run one proxy until stdin closes (``python -m agent_link_claude.peers``).

    Prints one JSON line per received connection: ``{"peerPid": int|None, "peerUid": int|None,
    "frames": [...]}``; the first line is ``{"ready": <socket path>}``.
    """
    pid = os.getpid()
    sessions = os.path.join(config_dir, "sessions")
    directory = socket_dir()
    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.makedirs(sessions, mode=0o700, exist_ok=True)
    path = os.path.join(directory, f"{pid}.sock")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        server.bind(path)
    finally:
        os.umask(old)
    server.listen(16)
    record_path = os.path.join(sessions, f"{pid}.json")
    key_path = os.path.join(sessions, f"{pid}.{hashlib.sha256(path.encode()).hexdigest()}.key")
    now = int(time.time() * 1000)
    start = proc_start(pid)
    record = {
        "pid": pid, "sessionId": str(uuid.uuid4()), "cwd": cwd, "startedAt": now, "procStart": start,
        "version": "agent-link", "peerProtocol": 1, "peerFeatures": [], "kind": "interactive",
        "entrypoint": "agent-link", "messagingSocketPath": path, "name": name, "nameSource": "explicit",
        "status": "idle", "updatedAt": now, "statusUpdatedAt": now,
    }
    _write_private(key_path, {"peerToken": secrets.token_hex(16), "procStart": start})
    _write_private(record_path, record)
    out_lock = threading.Lock()

    def emit(obj: dict[str, Any]) -> None:
        with out_lock:
            sys.stdout.write(json.dumps(obj) + "\n")
            sys.stdout.flush()

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
                peer_pid, peer_uid, _gid = struct.unpack("3i", creds)
                conn.settimeout(30)
                data = b""
                with contextlib.suppress(OSError):
                    while len(data) <= MAX_LINE and (chunk := conn.recv(65536)):
                        data += chunk
            frames = []
            for line in data.splitlines():
                with contextlib.suppress(ValueError):
                    frame = json.loads(line)
                    if isinstance(frame, dict) and frame.get("type") != "auth":
                        frames.append(frame)
            if frames:  # the host probes with empty connections first
                emit({"peerPid": peer_pid, "peerUid": peer_uid, "frames": frames})

    threading.Thread(target=serve, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: sys.stdin.close())
    emit({"ready": path})
    try:
        with contextlib.suppress(OSError, ValueError):
            while sys.stdin.readline():
                pass
    finally:
        for leftover in (record_path, key_path, path):
            with contextlib.suppress(OSError):
                os.unlink(leftover)
        server.close()


def _write_private(path: str, data: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".agent-link.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(tmp, path)


# -- the publisher -------------------------------------------------------------------------------


def sender_session(config_dir: str, peer_pid: int | None) -> str | None:
    """The session id of the Claude Code process ``peer_pid`` (the kernel-reported peer):
    only when that process runs Claude Code's program and its own live record names it
    (:func:`agent_link_claude.sessions.host_session`); a record any other process wrote for
    itself, this publisher's proxies' included, names nobody."""
    if peer_pid is None or peer_pid <= 0:
        return None
    live = host_session(config_dir, peer_pid)
    return live.session_id if live is not None else None


class PeerPublisher:
    """Publishes agents as Claude Code peers and reports what Claude sessions send them.

    :param config_dir: Claude Code's config dir (records go to its ``sessions/``).
    :param on_message: ``(target address, sender session id, text)``, called from a reader
        thread for every message a live Claude session sent to a published agent.
    :param on_rejected: ``(target address, why)`` for a message whose sender is not a live
        Claude session of this config dir (it is dropped).
    """

    def __init__(self, config_dir: str, on_message: Callable[[str, str, str], None],
                 on_rejected: Callable[[str, str], None] | None = None) -> None:
        self.config_dir = config_dir
        self.on_message = on_message
        self.on_rejected = on_rejected
        self.proxies: dict[str, tuple[subprocess.Popen[str], str]] = {}

    def sweep(self) -> int:
        """Remove records (and key files) that agent-link proxies left when they were killed
        outright; returns how many. Records of other programs are never touched."""
        directory = os.path.join(self.config_dir, "sessions")
        removed = 0
        try:
            names = os.listdir(directory)
        except OSError:
            return 0
        for entry in names:
            if not entry.endswith(".json"):
                continue
            record = read_json_object(os.path.join(directory, entry))
            if record is None:
                continue
            pid = record.get("pid")
            if record.get("entrypoint") != "agent-link" or not isinstance(pid, int) or same_process(pid, record.get("procStart")):
                continue
            for leftover in [entry, *(n for n in names if n.startswith(f"{pid}.") and n.endswith(".key"))]:
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(directory, leftover))
            removed += 1
        return removed

    def publish(self, address: str, name: str, cwd: str | None = None, timeout_s: float = 30.0) -> str:
        """Start the proxy for ``address`` under ``name``; returns its socket path.

        :raises RuntimeError: the proxy did not come up within ``timeout_s`` seconds.
        """
        self.sweep()
        proc = subprocess.Popen(
            [sys.executable, "-m", "agent_link_claude.peers", self.config_dir, name, cwd or os.getcwd()],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert proc.stdout is not None
        ready: dict[str, Any] = {}
        got = threading.Event()

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if "ready" in event:
                    ready.update(event)
                    got.set()
                    continue
                self._received(address, event)
            got.set()

        threading.Thread(target=read, name=f"claude-peer:{name}", daemon=True).start()
        if not got.wait(timeout_s) or "ready" not in ready:
            self._stop(proc)
            raise RuntimeError(f"the peer proxy for {address} did not start")
        self.proxies[address] = (proc, ready["ready"])
        return str(ready["ready"])

    def _received(self, address: str, event: dict[str, Any]) -> None:
        peer_pid = event.get("peerPid") if isinstance(event.get("peerPid"), int) else None
        sid = sender_session(self.config_dir, peer_pid)
        for frame in event.get("frames") or []:
            text = message_text(frame) if isinstance(frame, dict) else None
            if text is None:
                continue
            if sid is None or event.get("peerUid") != os.getuid():
                if self.on_rejected is not None:
                    self.on_rejected(address, f"sender pid {peer_pid} is not a live Claude session")
                continue
            self.on_message(address, sid, text)

    @staticmethod
    def _stop(proc: subprocess.Popen[str]) -> None:
        with contextlib.suppress(OSError, ValueError):
            if proc.stdin is not None:
                proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)

    def close(self) -> None:
        """Stop every proxy (each removes its record and socket)."""
        for proc, _ in self.proxies.values():
            self._stop(proc)
        self.proxies.clear()


def forward(app: Any, target: str, session_id: str, text: str) -> dict[str, Any]:
    """Store and push ``text`` as an agent-link message from ``claude:<session_id>`` to
    ``target`` (blocking; call from the thread that owns ``app``). Returns ``{messageId,
    delivery}`` or ``{error}`` (an :class:`AgentLinkError` as a dict)."""
    import anyio

    from agent_link_core.errors import AgentLinkError
    from agent_link_core.model import Caller

    # the session's current id, read from its live record for the pid the kernel reported
    # (sender_session): the host proved it, and prove_sender still checks that the session exists
    caller = Caller(f"claude:{session_id}", "current_session", "claude",
                    evidence="the kernel-reported peer of the socket is the Claude Code process of that session")
    try:
        outcome = anyio.run(lambda: app.send(caller=caller, to=target, body=text, anticipation="reply",
                                             tool="claude_peer_message"))
    except AgentLinkError as exc:
        return {"error": exc.to_dict()}
    delivery = outcome.delivery
    return {"messageId": outcome.message["id"], "from": caller.address, "to": outcome.message["recipient"],
            "delivered": bool(delivery and delivery.delivered)}


if __name__ == "__main__":  # pragma: no cover - the proxy process
    proxy_main(sys.argv[1], sys.argv[2], sys.argv[3])
