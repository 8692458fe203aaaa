"""Knowing an opencode server's sessions from its event stream, so a send needs no look-up.

A send refuses mail to an unknown or archived session before storing it, which costs a round
trip to the server (``GET /session/{id}``) before the push. opencode 1.18.33 itself refuses a
prompt into an unknown session (``prompt_async`` answers 404) but not into an archived one (the
prompt is stored and a turn runs), so the archived check cannot be left to the push.

Instead, a long-lived agent-link process (an MCP server, the web page) follows each server's
``GET /global/event`` stream (server-sent events, ``data: <json>`` lines; each event
``{"directory", "payload": {"type", "properties"}}``, or the bare payload): ``session.created``
and ``session.updated`` carry the session's whole record (``time.archived`` included),
``session.deleted`` removes it, ``session.status`` its busy / idle state. A session is answered
from memory only when its record came from the stream, or from a look-up started while the
stream was already open and overtaken by no event about that session: whatever changed it later
came through the stream. The stream closing forgets everything (it is opened again, with a
growing pause, and look-ups fill it anew).

What remains is the stream's own delay (the event follows opencode's write, by 50-110 ms as
measured: opencode sends its events in batches): a send in that window between opencode archiving
a session and the event saying so pushes into the archived session. The push looks at the
session once it landed and the harness says so (``OpencodeHarness._archived_after``), and
:meth:`ServerWatch.forget` drops the stale record until the event comes.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
from typing import Any
from urllib.parse import urlsplit

from agent_link_opencode.client import auth_header

#: the stream's path: events of every directory the server serves
EVENT_PATH = "/global/event"
#: seconds between attempts to open the stream again (doubling up to the last)
RETRY_S = (1.0, 2.0, 5.0, 15.0, 30.0)
#: seconds to connect and to get the answer's head
CONNECT_TIMEOUT_S = 5.0


class ServerWatch:
    """One server's sessions as its event stream reports them (a daemon thread reads it).

    :param url: the server's base URL (``http://127.0.0.1:4096``).
    :param password: its basic auth: the password (user ``opencode``), ``(username,
        password)``, or None.
    """

    def __init__(self, url: str, password: str | tuple[str, str] | None) -> None:
        self.url, self.password = url, password
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: http.client.HTTPConnection | None = None
        #: the stream is open (its first event arrived); the counters below say since when
        self.connected = False
        self.generation = 0
        self.seq = 0
        #: session id -> (its record, the event count when it was set)
        self._sessions: dict[str, tuple[dict[str, Any], int]] = {}
        #: session id -> the event count of the last event about it
        self._touched: dict[str, int] = {}
        self._status: dict[str, str] = {}
        #: why the stream is closed ("refused", "http 404", ...), for health
        self.error: str | None = None

    def start(self) -> None:
        """Start reading the stream (once; again after :meth:`close`)."""
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=f"opencode-events {self.url}", daemon=True)
            self._thread.start()

    def close(self) -> None:
        """Stop reading and forget the sessions."""
        self._stop.set()
        conn = self._conn
        if conn is not None and conn.sock is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._forget(None)

    def mark(self) -> tuple[int, int] | None:
        """Where the stream is, to pass to :meth:`seed` after a look-up started now; None when
        it is not open (a look-up then teaches nothing)."""
        with self._lock:
            return (self.generation, self.seq) if self.connected else None

    def seed(self, mark: tuple[int, int] | None, entry: dict[str, Any], status: str) -> None:
        """Keep ``entry`` (a ``GET /session/{id}`` answer) read after :meth:`mark` gave ``mark``,
        unless the stream closed since or an event about this session came after the mark."""
        sid = entry.get("id")
        if mark is None or not isinstance(sid, str):
            return
        with self._lock:
            if self.connected and self.generation == mark[0] and self._touched.get(sid, 0) <= mark[1]:
                self._sessions[sid] = (entry, mark[1])
                self._status.setdefault(sid, status)

    def get(self, session_id: str) -> tuple[dict[str, Any], str] | None:
        """``(record, "busy" | "idle" | ...)`` of a session known while the stream stays open;
        None when not known that way (look it up)."""
        with self._lock:
            if not self.connected or session_id not in self._sessions:
                return None
            return self._sessions[session_id][0], self._status.get(session_id, "idle")

    def forget(self, session_id: str) -> None:
        """Drop what the stream said of ``session_id`` (found stale by a look-up); its next
        event, or a look-up started after it, teaches it again."""
        with self._lock:
            self._sessions.pop(session_id, None)
            self._touched[session_id] = self.seq

    # the reading thread ----------------------------------------------------------------------
    def _forget(self, error: str | None) -> None:
        with self._lock:
            self.connected = False
            self._sessions.clear()
            self._touched.clear()
            self._status.clear()
            self.error = error

    def _run(self) -> None:
        attempt = 0
        while not self._stop.is_set():
            error = self._read_stream()
            self._forget(error)
            if error is not None and error.startswith("http 4") and error != "http 408":
                return  # no such stream here (an older server, a wrong password): look-ups only
            attempt = attempt + 1 if error is not None else 0
            if self._stop.wait(RETRY_S[min(attempt, len(RETRY_S) - 1)]):
                return

    def _read_stream(self) -> str | None:
        """Read the stream until it ends: None when it closed cleanly, else why it failed."""
        parts = urlsplit(self.url)
        kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        conn = self._conn = kind(parts.hostname or "127.0.0.1", parts.port, timeout=CONNECT_TIMEOUT_S)
        headers = {"Accept": "text/event-stream"}
        header = auth_header(self.password)
        if header is not None:
            headers["Authorization"] = header
        try:
            conn.request("GET", EVENT_PATH, headers=headers)
            answer = conn.getresponse()
            if answer.status != 200:
                return f"http {answer.status}"
            if conn.sock is not None:
                conn.sock.settimeout(None)  # events may be far apart
            for raw in answer:
                if self._stop.is_set():
                    return None
                line = raw.decode("utf-8", "replace").strip()
                if line.startswith("data:"):
                    self._event(line[5:].strip())
            return None
        except (OSError, http.client.HTTPException) as exc:
            return type(exc).__name__
        finally:
            conn.close()

    def _event(self, data: str) -> None:
        try:
            event = json.loads(data)
        except ValueError:
            return
        if isinstance(event, dict) and isinstance(event.get("payload"), dict):
            event = event["payload"]
        if not isinstance(event, dict):
            return
        kind, props = event.get("type"), event.get("properties")
        props = props if isinstance(props, dict) else {}
        with self._lock:
            if not self.connected:  # the first event (server.connected) opens the stream
                self.connected, self.generation, self.error = True, self.generation + 1, None
            self.seq += 1
            info = props.get("info")
            sid = props.get("sessionID", info.get("id") if isinstance(info, dict) else None)
            if not isinstance(sid, str):
                return
            if kind in ("session.created", "session.updated") and isinstance(info, dict) and info.get("id") == sid:
                self._sessions[sid] = (info, self.seq)
            elif kind == "session.deleted":
                self._sessions.pop(sid, None)
            elif kind == "session.status" and isinstance(props.get("status"), dict):
                self._status[sid] = str(props["status"].get("type") or "idle")
            else:
                return
            self._touched[sid] = self.seq
