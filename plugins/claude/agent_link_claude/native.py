"""Live delivery into a Claude Code session through the session's own inbox socket.

Claude Code 2.1.224 and later (verified on 2.1.332 by ``tests/test_claude_native_realhost.py``;
docs/claude-native-inbox.md) binds a Unix socket per running session and names it in the
session's live record ``<config dir>/sessions/<pid>.json`` (``messagingSocketPath``), next to
the session's ``name`` and ``status`` (``idle`` / ``busy``). A newline-delimited JSON ``user``
frame written to that socket reaches the session's model: as a new turn when it is idle, after
the current tool call when it is busy. Nothing is written back for an accepted message; the
host sends ``peer_message_status`` receipts only for problems (held, refused, dropped ...) and
only to a ``uds:`` reply address in the same directory as its own socket.

What agent-link does with that (:func:`push_native`):

* the content of the frame is the agent-link envelope, as is; no ``<cross-session-message>``
  wrapper is written, so the message claims no permission mode and no session name. A
  receiver whose settings hold unverified peer mail (``bypassPermissions`` without
  ``crossSessionInbound: accept``) holds it; agent-link reports that, it never asserts a mode
  to get around the rule;
* ``priority`` follows the message's anticipation (:data:`PRIORITY`);
* the message counts as delivered only when the session's transcript shows a line carrying the
  message id (the host writes the prompt it gave the model there), never on a successful
  write alone;
* a ``held`` / ``refused`` / ``dropped`` / ``denied`` / ``expired`` receipt ends the wait and is
  reported as what it is; the message stays in the mailbox.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Self


from agent_link_core.json_files import read_json_object
from agent_link_hostkit.procs import lineage, socket_peer_pid

from agent_link_claude.procs import same_process

#: priority of the socket frame for each anticipation: ``next`` is read at the next tool
#: boundary of a busy session, ``later`` when it is idle again
PRIORITY = {"reply": "next", "action": "next", "fyi": "later"}
CONNECT_TIMEOUT_S = 5.0
POLL_S = 0.2
MAX_LINE = 1024 * 1024  # the host's own limit per frame line (characters)
#: receipt statuses; ``expired`` with ``status_detail: refused`` is the host's refusal
PROBLEMS = ("held", "refused", "dropped", "denied", "expired")
INBOX_SINCE = (2, 1, 224)  # the first Claude Code release with inbox sockets
GATE_ENV = "CLAUDE_CODE_HARBOR_KITE"
#: how far above a receipt's sender the session's process may be (the host itself sends them)
RECEIPT_LINEAGE = 4  # the host's switch for its messaging (0 = off)


@dataclass(frozen=True)
class Inbox:
    """A live Claude Code session that has an inbox socket.

    :param pid: the claude process.
    :param session_id: its current session id.
    :param name: the name other sessions use to message it (``name`` of the record).
    :param status: ``idle`` / ``busy`` as last written by the session, or None.
    :param socket_path: the absolute path of the inbox socket.
    :param version: the Claude Code release that wrote the record.
    :param token: the peer token from the session's key file, when readable.
    """

    pid: int
    session_id: str
    name: str | None
    status: str | None
    socket_path: str
    version: str | None
    token: str | None = None


def read_record(path: str) -> dict[str, Any] | None:
    """One ``sessions/<pid>.json`` record as an object, None when unreadable."""
    return read_json_object(path)


def key_token(sessions_dir: str, pid: int, socket_path: str) -> str | None:
    """The ``peerToken`` of ``<pid>.<sha256(socket path)>.key`` (mode 0600, owner only)."""
    digest = hashlib.sha256(socket_path.encode("utf-8")).hexdigest()
    data = read_record(os.path.join(sessions_dir, f"{pid}.{digest}.key"))
    token = data.get("peerToken") if data else None
    return token if isinstance(token, str) and token else None


def live_records(config_dir: str) -> list[dict[str, Any]]:
    """Every record in ``<config dir>/sessions`` whose process runs and started at the recorded
    ``procStart`` (a reused pid does not count), the way the host's own lister keeps them."""
    directory = os.path.join(config_dir, "sessions")
    out = []
    for path in glob.glob(os.path.join(glob.escape(directory), "*.json")):
        data = read_record(path)
        pid = data.get("pid") if data else None
        if not isinstance(pid, int) or isinstance(pid, bool) or os.path.basename(path) != f"{pid}.json":
            continue
        assert data is not None
        if same_process(pid, data.get("procStart")):
            out.append(data)
    return out


def inbox_of(config_dir: str, record: dict[str, Any]) -> Inbox | None:
    """The :class:`Inbox` of a live record, None when it names no socket or the socket is gone."""
    path = record.get("messagingSocketPath")
    sid = record.get("sessionId")
    if not isinstance(path, str) or not os.path.isabs(path) or not isinstance(sid, str):
        return None
    try:
        if not os.path.exists(path):
            return None
    except OSError:
        return None
    name, status, version = record.get("name"), record.get("status"), record.get("version")
    return Inbox(
        pid=record["pid"], session_id=sid, name=name if isinstance(name, str) else None,
        status=status if isinstance(status, str) else None, socket_path=path,
        version=version if isinstance(version, str) else None,
        token=key_token(os.path.join(config_dir, "sessions"), record["pid"], path),
    )


def find_inbox(config_dir: str, session_id: str) -> Inbox | None:
    """The inbox of the live session ``session_id``, or None."""
    for record in live_records(config_dir):
        if record.get("sessionId") == session_id:
            return inbox_of(config_dir, record)
    return None


def transcript_shows(config_dir: str, session_id: str, message_id: str, *, queued: bool = False) -> str | None:
    """The first transcript line kind that carries ``message_id`` as model input, or None.

    Queue bookkeeping lines (``queue-operation``) are skipped unless ``queued``: they record
    that the host took the message, not that the model saw it.
    """
    needle = message_id.encode("utf-8")
    pattern = os.path.join(glob.escape(os.path.join(config_dir, "projects")), "*", glob.escape(session_id) + ".jsonl")
    for path in glob.glob(pattern):
        try:
            with open(path, "rb") as f:
                for line in f:
                    if needle not in line:
                        continue
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue
                    kind = record.get("type") if isinstance(record, dict) else None
                    if isinstance(kind, str) and (queued or kind != "queue-operation"):
                        return kind
        except OSError:
            continue
    return None


class ReceiptListener:
    """A Unix socket that takes the host's ``peer_message_status`` receipts.

    Bound as ``<directory>/<our pid>.sock`` (the host answers only to reply addresses in its own
    socket's directory), mode 0600. Use as a context manager; :attr:`address` is the ``from``
    value to send. Receipts are collected per ``orig_msg_id`` in :attr:`receipts`, each with the
    pid the kernel reports for its connection (``_peerPid``): any process of the user can
    connect here, so :meth:`problem` believes only receipts from the session's own process.
    """

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, f"{os.getpid()}.sock")
        self.receipts: dict[str, list[dict[str, Any]]] = {}
        self._cond = threading.Condition()
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        return f"uds:{self.path}"

    def __enter__(self) -> Self:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)  # left by an earlier process with our pid
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(self.path)
        finally:
            os.umask(old)
        sock.listen(16)
        sock.settimeout(POLL_S)
        self._sock = sock
        self._thread = threading.Thread(target=self._serve, name="claude-inbox-receipts", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        sock, self._sock = self._sock, None
        if self._thread is not None:
            self._thread.join(timeout=5)
        if sock is not None:
            sock.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def _serve(self) -> None:
        while self._sock is not None:
            try:
                conn, _ = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            with conn:
                peer = socket_peer_pid(conn)
                conn.settimeout(5)
                data = b""
                with contextlib.suppress(OSError):
                    while len(data) < MAX_LINE:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        data += chunk
            for line in data.split(b"\n"):
                try:
                    frame = json.loads(line)
                except ValueError:
                    continue
                if isinstance(frame, dict) and frame.get("type") == "control" and isinstance(frame.get("orig_msg_id"), str):
                    frame["_peerPid"] = peer
                    with self._cond:
                        self.receipts.setdefault(frame["orig_msg_id"], []).append(frame)
                        self._cond.notify_all()

    def problem(self, message_id: str, host_pid: int) -> dict[str, Any] | None:
        """The newest problem receipt for ``message_id`` (``held``, ``refused``...) that the
        session's host sent, or None.

        :param host_pid: the claude process whose inbox the message was written to; a receipt
            counts only when the kernel reports that process (or one it started) as its
            sender. Others are kept in :attr:`receipts` but never believed.
        """
        with self._cond:
            for frame in reversed(self.receipts.get(message_id, [])):
                if frame.get("action") == "peer_message_status" and frame.get("status") in PROBLEMS \
                        and from_host(frame.get("_peerPid"), host_pid):
                    return frame
        return None


def from_host(peer_pid: Any, host_pid: int) -> bool:
    """True when the kernel-reported ``peer_pid`` is ``host_pid`` or runs under it."""
    return isinstance(peer_pid, int) and peer_pid > 0 and host_pid in lineage(peer_pid, RECEIPT_LINEAGE)


_LISTENERS: dict[str, tuple[ReceiptListener, int]] = {}
_LISTENERS_LOCK = threading.Lock()


@contextlib.contextmanager
def shared_listener(directory: str) -> Iterator[ReceiptListener | None]:
    """The process's one :class:`ReceiptListener` in ``directory`` (bound on first use, closed
    when the last user leaves); None when it cannot be bound (receipts are then not seen)."""
    with _LISTENERS_LOCK:
        entry = _LISTENERS.get(directory)
        if entry is None:
            listener = ReceiptListener(directory)
            try:
                listener.__enter__()
            except OSError:
                listener = None  # type: ignore[assignment]
            if listener is not None:
                entry = (listener, 0)
        if entry is not None:
            _LISTENERS[directory] = (entry[0], entry[1] + 1)
    try:
        yield entry[0] if entry is not None else None
    finally:
        if entry is not None:
            with _LISTENERS_LOCK:
                current, users = _LISTENERS[directory]
                if users <= 1:
                    del _LISTENERS[directory]
                    current.__exit__(None, None, None)
                else:
                    _LISTENERS[directory] = (current, users - 1)


def wire_id(message_id: str) -> str:
    """The frame's ``msg_id`` for an agent-link message id: the host echoes only UUIDs in its
    receipts (``orig_msg_id``), so the ULID is written as the UUID with the same 128 bits."""
    from ulid import ULID  # only a push writes frames

    try:
        return str(ULID.from_str(message_id).to_uuid())
    except ValueError:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"agent-link:{message_id}"))


def frames(inbox: Inbox, envelope: str, message_id: str, anticipation: str, reply_to: str | None) -> bytes:
    """The NDJSON bytes written to the socket: an auth line when the key file was readable,
    then the ``user`` frame (envelope as content, our receipt address as ``from``)."""
    lines: list[dict[str, Any]] = []
    if inbox.token:
        lines.append({"type": "auth", "token": inbox.token})
    user: dict[str, Any] = {
        "msgV": 1, "msg_id": wire_id(message_id), "type": "user",
        "message": {"role": "user", "content": envelope},
        "priority": PRIORITY.get(anticipation, "next"),
        "session_id": inbox.session_id,  # a session that was cleared since drops it instead of misdelivering
    }
    if reply_to is not None:
        user["from"] = reply_to
    lines.append(user)
    return b"".join(json.dumps(line, ensure_ascii=False).encode("utf-8") + b"\n" for line in lines)


def write_frames(socket_path: str, data: bytes) -> None:
    """Connect, write ``data``, half-close and close. Raises OSError when the socket refuses."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(CONNECT_TIMEOUT_S)
        sock.connect(socket_path)
        sock.sendall(data)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)


@dataclass
class NativeOutcome:
    """What :func:`push_native` saw.

    :param state: ``delivered`` (the transcript shows the message), ``held``, ``refused``,
        ``dropped``, ``denied``, ``expired`` (a receipt said so), ``pushed`` (written, no
        evidence within the wait) or ``failed`` (the socket refused the connection).
    :param evidence: what proved it (transcript line kind, receipt fields, socket path).
    """

    state: str
    evidence: dict[str, Any] = field(default_factory=dict)
    detail: str | None = None


def push_native(
    config_dir: str, inbox: Inbox, envelope: str, message_id: str, anticipation: str, wait_s: float,
    *, delivered_elsewhere: Callable[[], bool] | None = None,
) -> NativeOutcome:
    """Write one message into ``inbox`` and wait up to ``wait_s`` seconds for evidence.

    Blocking; run it in a worker thread. ``delivered_elsewhere`` (polled) ends the wait early
    when the message was meanwhile read another way (the inbox tool).
    """
    base = {"socket": inbox.socket_path, "pid": inbox.pid, "session": inbox.session_id}
    if len(envelope) >= MAX_LINE:
        return NativeOutcome("failed", base, "the envelope is longer than the host's frame limit")
    with shared_listener(os.path.dirname(inbox.socket_path)) as listener:
        try:
            write_frames(inbox.socket_path, frames(inbox, envelope, message_id, anticipation,
                                                   listener.address if listener else None))
        except OSError as exc:
            return NativeOutcome("failed", base, f"{type(exc).__name__}: {exc}"[:200])
        deadline = time.monotonic() + wait_s
        while True:
            kind = transcript_shows(config_dir, inbox.session_id, message_id)
            if kind is not None:
                return NativeOutcome("delivered", {**base, "transcript": kind})
            problem = listener.problem(wire_id(message_id), inbox.pid) if listener else None
            if problem is not None:
                status = problem.get("status_detail") if problem.get("status_detail") == "refused" else problem.get("status")
                return NativeOutcome(str(status), {**base, "receipt": {k: problem.get(k) for k in (
                    "status", "status_detail", "reason", "drop_reason")}}, problem.get("reason"))
            if delivered_elsewhere is not None and delivered_elsewhere():
                return NativeOutcome("pushed", base, "read through the inbox meanwhile")
            if time.monotonic() >= deadline:
                return NativeOutcome("pushed", base, "no evidence yet that the session's model saw it")
            time.sleep(POLL_S)


def await_evidence(config_dir: str, inbox: Inbox, message_id: str, wait_s: float) -> NativeOutcome:
    """Wait up to ``wait_s`` seconds, writing nothing, for the transcript to show a message
    the session's host already took (an earlier push of it): ``delivered`` or ``pushed``.
    Blocking; run it in a worker thread."""
    base = {"socket": inbox.socket_path, "pid": inbox.pid, "session": inbox.session_id}
    deadline = time.monotonic() + wait_s
    while True:
        kind = transcript_shows(config_dir, inbox.session_id, message_id)
        if kind is not None:
            return NativeOutcome("delivered", {**base, "transcript": kind})
        if time.monotonic() >= deadline:
            return NativeOutcome("pushed", base, "the session's host holds it from an earlier push; no evidence yet that its model saw it")
        time.sleep(POLL_S)


def _version_tuple(text: str | None) -> tuple[int, ...] | None:
    try:
        return tuple(int(p) for p in (text or "").split("-")[0].split(".")) or None
    except ValueError:
        return None


def path_of(record: dict[str, Any], *, disabled: bool, channel: bool) -> tuple[str, str]:
    """``(path, reason)``: how agent-link mail reaches the live session of ``record``.

    ``path`` is ``native-inbox``, ``channel`` or ``hook-only``; ``reason`` says why, in a few
    words (the first thing that rules the inbox out, when it is not used).
    """
    socket_path = record.get("messagingSocketPath")
    if isinstance(socket_path, str) and os.path.exists(socket_path) and not disabled:
        return "native-inbox", f"inbox socket {socket_path}"
    if disabled:
        why = "AGENT_LINK_DISABLE_CLAUDE_INBOX is set"
    elif isinstance(socket_path, str):
        why = "the session names an inbox socket that does not exist"
    else:
        version = record.get("version") if isinstance(record.get("version"), str) else None
        parsed = _version_tuple(version)
        gate = None
        import psutil  # only here: every other command of this process goes without it

        with contextlib.suppress(psutil.Error, OSError, TypeError, ValueError):
            gate = psutil.Process(int(record["pid"])).environ().get(GATE_ENV)
        if parsed is not None and parsed < INBOX_SINCE:
            why = f"Claude Code {version} has no inbox socket (2.1.224 and later have one)"
        elif gate is not None and gate.strip() == "0":
            why = f"the host's messaging is switched off ({GATE_ENV}=0)"
        else:
            why = "the host bound no inbox socket (its messaging gate is off)"
    if channel:
        return "channel", f"{why}; an agent-link channel is open"
    return "hook-only", f"{why}; no agent-link channel: hook notes and the inbox tool only"
