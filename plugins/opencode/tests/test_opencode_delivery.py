"""The opencode push (``agent_link_opencode.delivery``) against a fake server, for the outcomes a
real server rarely shows: a refused push, a server that is gone, a prompt that never shows (and
is then never pushed again), and how the session's own messages decide idle or busy."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_opencode.delivery import PushClaims, Pusher, envelope_prefix, find_pushed
from agent_link_opencode.client import call_api

pytestmark = pytest.mark.anyio

SID = "ses_fake"
MID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
ENVELOPE = f'{envelope_prefix(MID)} from="test:alice">\n<body>hi</body>\n</agent-link-message>'


class FakeSession:
    """One session's messages; ``post_status`` answers prompt_async, ``store`` says whether a
    prompt is kept in the messages."""

    def __init__(self, messages: list[dict[str, Any]] | None = None, post_status: int = 204, store: bool = True,
                 record: dict[str, Any] | None = None) -> None:
        self.messages = list(messages or [])
        self.post_status, self.store = post_status, store
        self.posts: list[Any] = []
        #: the ``GET /session/{id}`` answer (None: 404)
        self.record = record
        self.looks: list[int] = []  # how many posts there were at each GET /session/{id}


@pytest.fixture
def fake() -> Iterator[Any]:
    started: list[ThreadingHTTPServer] = []

    def start(session: FakeSession) -> str:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
                pass

            def _send(self, status: int, body: Any = None) -> None:
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                if self.path.startswith(f"/session/{SID}/message"):
                    return self._send(200, session.messages)
                if self.path == f"/session/{SID}" and session.record is not None:
                    session.looks.append(len(session.posts))
                    return self._send(200, session.record)
                self._send(404, {"error": "no"})

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                session.posts.append(body)
                if session.post_status == 204 and session.store:
                    n = len(session.messages)
                    session.messages.append({"info": {"id": f"msg_{n}", "role": "user"}, "parts": body["parts"]})
                self._send(session.post_status, None if session.post_status == 204 else {"error": "refused"})

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        started.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    yield start
    for httpd in started:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def claims(monkeypatch: pytest.MonkeyPatch) -> Iterator[PushClaims]:
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "opencode")
    app = App.create()
    yield PushClaims(app.store)
    app.close()


def pusher(claims: PushClaims) -> Pusher:
    return Pusher(lambda url, method, path, body: call_api(url, method, path, body, None, 2.0), claims, confirm_ms=300)


def assistant(mid: str, parent: str, completed: bool) -> dict[str, Any]:
    return {"info": {"id": mid, "role": "assistant", "parentID": parent, "time": {"created": 1, **({"completed": 2} if completed else {})}},
            "parts": []}


async def test_opencode_push_into_an_idle_session_is_delivered_and_never_posted_twice(fake: Any, claims: PushClaims) -> None:
    session = FakeSession([{"info": {"id": "msg_a", "role": "user"}, "parts": []}, assistant("msg_b", "msg_a", True)])
    url = fake(session)
    first = await pusher(claims).deliver(MID, SID, url, ENVELOPE)
    assert first.delivered and first.evidence["userMessageId"] == "msg_2" and first.evidence["how"] == "started_turn"
    again = await pusher(claims).deliver(MID, SID, url, ENVELOPE)
    assert again.delivered and len(session.posts) == 1
    assert claims.get(MID)["state"] == "confirmed"
    assert "sessionArchived" not in first.evidence  # the server did not answer the look: the harness looks again


@pytest.mark.parametrize("archived", [None, 1700000000000])
async def test_opencode_push_looks_at_the_session_it_is_sent_to(archived: int | None, fake: Any, claims: PushClaims) -> None:
    times = {"created": 1, **({"archived": archived} if archived else {})}
    session = FakeSession(record={"id": SID, "title": "t", "time": times})
    delivery = await pusher(claims).deliver(MID, SID, fake(session), ENVELOPE)
    # opencode runs a prompt pushed into an archived session: it lands, and the push says what it found
    assert delivery.delivered and delivery.evidence["sessionArchived"] is bool(archived)
    assert len(session.looks) == 1  # asked once, together with the push


async def test_opencode_push_behind_a_running_turn_is_accepted_then_delivered_when_answered(fake: Any, claims: PushClaims) -> None:
    session = FakeSession([{"info": {"id": "msg_a", "role": "user"}, "parts": []}, assistant("msg_b", "msg_a", False)])
    url = fake(session)
    queued = await pusher(claims).deliver(MID, SID, url, ENVELOPE)
    assert queued.accepted and not queued.delivered and queued.state == "accepted_queued_in_session"
    assert [w["code"] for w in queued.warnings] == ["opencode_session_busy"]
    session.messages.append(assistant("msg_3", "msg_2", False))  # the model was handed it
    late = await pusher(claims).recheck(MID, SID, url)
    assert late is not None and late.delivered and late.evidence["how"] == "answered"


async def test_opencode_push_refused_by_the_server_stays_queued_and_may_be_tried_again(fake: Any, claims: PushClaims) -> None:
    session = FakeSession(post_status=500)
    url = fake(session)
    refused = await pusher(claims).deliver(MID, SID, url, ENVELOPE)
    assert not refused.delivered and not refused.unknown and not refused.retryable
    assert [w["code"] for w in refused.warnings] == ["opencode_push_refused"]
    assert claims.get(MID)["state"] == "failed"
    session.post_status = 204
    assert (await pusher(claims).deliver(MID, SID, url, ENVELOPE)).delivered
    assert len(session.posts) == 2


async def test_opencode_push_to_a_server_that_is_gone_is_retryable(claims: PushClaims) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    gone = await pusher(claims).deliver(MID, SID, url, ENVELOPE)
    assert gone.retryable and not gone.unknown and [w["code"] for w in gone.warnings] == ["opencode_unavailable"]


async def test_opencode_push_that_never_shows_is_unknown_and_not_pushed_again(fake: Any, claims: PushClaims) -> None:
    session = FakeSession(store=False)
    url = fake(session)
    lost = await pusher(claims).deliver(MID, SID, url, ENVELOPE)
    assert lost.unknown and not lost.delivered and [w["code"] for w in lost.warnings] == ["opencode_push_unconfirmed"]
    again = await pusher(claims).deliver(MID, SID, url, ENVELOPE)
    assert again.unknown and [w["code"] for w in again.warnings] == ["opencode_push_open"]
    assert len(session.posts) == 1
    assert await pusher(claims).recheck(MID, SID, url) is None


def test_find_pushed_tells_idle_from_queued_behind_a_waiting_prompt() -> None:
    ours = {"info": {"id": "msg_2", "role": "user"}, "parts": [{"type": "text", "text": ENVELOPE}]}
    waiting = {"info": {"id": "msg_1", "role": "user"}, "parts": [{"type": "text", "text": "someone else's prompt"}]}
    assert find_pushed([ours], MID) == {"id": "msg_2", "answered": False, "queued": False}
    assert find_pushed([waiting, ours], MID) == {"id": "msg_2", "answered": False, "queued": True}
    assert find_pushed([waiting], MID) is None
