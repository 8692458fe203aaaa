"""The opencode event stream follower (``agent_link_opencode.watch``) against a fake stream: what
it learns from events, when a look-up may teach it, and that a closed stream forgets."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agent_link_opencode.watch import ServerWatch


class FakeStream:
    """``GET /global/event`` answering ``status``; with 200, the events put in :attr:`events`
    (None ends the stream)."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.auth: list[str | None] = []
        self.url = ""

    def send(self, kind: str, **properties: Any) -> None:
        self.events.put({"directory": "/w", "payload": {"type": kind, "properties": properties}})


@pytest.fixture
def stream() -> Iterator[Callable[..., FakeStream]]:
    started: list[ThreadingHTTPServer] = []

    def start(status: int = 200) -> FakeStream:
        fake = FakeStream(status)

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
                pass

            def do_GET(self) -> None:  # noqa: N802
                fake.auth.append(self.headers.get("Authorization"))
                self.send_response(fake.status if self.path == "/global/event" else 404)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                if fake.status != 200:
                    return
                self.wfile.write(b'data: {"payload": {"type": "server.connected", "properties": {}}}\n\n')
                self.wfile.flush()
                while (event := fake.events.get()) is not None:
                    self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                    self.wfile.flush()

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        started.append(httpd)
        fake.url = f"http://127.0.0.1:{httpd.server_address[1]}"
        return fake

    yield start
    for httpd in started:
        httpd.shutdown()
        httpd.server_close()


def until(check: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + 20
    while not (value := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"never: {what}")
        time.sleep(0.02)
    return value


def record(sid: str, archived: int | None = None) -> dict[str, Any]:
    return {"id": sid, "title": "t", "time": {"created": 1, **({"archived": archived} if archived else {})}}


def test_sessions_come_from_created_updated_deleted_and_status_events(stream: Any) -> None:
    fake = stream()
    watch = ServerWatch(fake.url, "pw")
    watch.start()
    try:
        until(lambda: watch.connected, "connected")
        assert fake.auth == ["Basic b3BlbmNvZGU6cHc="]  # opencode:pw
        assert watch.get("ses_a") is None
        fake.send("session.created", sessionID="ses_a", info=record("ses_a"))
        assert until(lambda: watch.get("ses_a"), "created") == (record("ses_a"), "idle")
        fake.send("session.status", sessionID="ses_a", status={"type": "busy"})
        until(lambda: watch.get("ses_a") == (record("ses_a"), "busy"), "busy")
        fake.send("session.updated", sessionID="ses_a", info=record("ses_a", archived=5))
        until(lambda: (watch.get("ses_a") or ({}, ""))[0].get("time", {}).get("archived") == 5, "archived")
        fake.send("message.updated", sessionID="ses_a", info={"id": "msg_1", "role": "user"})  # not a session record
        fake.send("session.deleted", sessionID="ses_a", info=record("ses_a"))
        until(lambda: watch.get("ses_a") is None, "deleted")
    finally:
        watch.close()


def test_a_look_up_teaches_only_while_the_stream_stays_open_and_no_event_overtook_it(stream: Any) -> None:
    fake = stream()
    watch = ServerWatch(fake.url, None)
    assert watch.mark() is None
    watch.seed(None, record("ses_x"), "idle")  # read before the stream was open: not kept
    watch.start()
    try:
        until(lambda: watch.connected, "connected")
        mark = watch.mark()
        watch.seed(mark, record("ses_b"), "idle")
        assert watch.get("ses_b") == (record("ses_b"), "idle") and watch.get("ses_x") is None
        # an event about ses_c after the mark is newer than the look-up's answer
        fake.send("session.updated", sessionID="ses_c", info=record("ses_c", archived=9))
        until(lambda: watch.get("ses_c"), "event")
        watch.seed(mark, record("ses_c"), "idle")
        assert watch.get("ses_c") == (record("ses_c", archived=9), "idle")
        # the stream ends: everything is forgotten and an old mark teaches nothing
        fake.events.put(None)
        until(lambda: not watch.connected, "closed")
        assert watch.get("ses_b") is None
        watch.seed(mark, record("ses_b"), "idle")
        assert watch.get("ses_b") is None
    finally:
        watch.close()


def test_a_server_without_the_stream_is_left_to_look_ups(stream: Any) -> None:
    fake = stream(status=404)
    watch = ServerWatch(fake.url, None)
    watch.start()
    until(lambda: watch.error == "http 404", "gave up")
    assert watch._thread is not None
    watch._thread.join(5)
    assert not watch._thread.is_alive() and watch.mark() is None


def test_a_session_found_stale_is_forgotten_until_its_event_or_a_newer_look_up(stream: Any) -> None:
    fake = stream()
    watch = ServerWatch(fake.url, None)
    watch.start()
    try:
        until(lambda: watch.connected, "connected")
        before = watch.mark()
        fake.send("session.created", sessionID="ses_a", info=record("ses_a"))
        until(lambda: watch.get("ses_a"), "created")
        watch.forget("ses_a")  # a push found it archived before the stream said so
        assert watch.get("ses_a") is None
        watch.seed(before, record("ses_a"), "idle")  # a look-up older than the forgetting teaches nothing
        assert watch.get("ses_a") is None
        watch.seed(watch.mark(), record("ses_a", archived=3), "idle")  # one started after it does
        assert (watch.get("ses_a") or ({}, ""))[0]["time"]["archived"] == 3
        watch.forget("ses_a")
        fake.send("session.updated", sessionID="ses_a", info=record("ses_a", archived=4))  # the late event
        until(lambda: watch.get("ses_a"), "the event teaches it again")
    finally:
        watch.close()
