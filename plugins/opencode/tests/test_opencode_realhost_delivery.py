"""Push delivery into REAL opencode sessions (the pinned ``opencode serve``, stub Messages API).

One server serves the whole module (it takes 12-13 s to get ready); each test makes its own
sessions and its own agent-link App (sender ``test:alice``) that knows only that server.

* into an idle session the envelope is delivered on the session's own record (a user message
  whose text is the envelope) and reaches the model; pushing the same message again adds
  nothing;
* into a busy session it is only ``accepted`` (stored in the session, queued behind the
  running turn), never pushed twice, and delivered once the model was handed it;
* while the server's event stream is followed a send pushes without looking the session up
  first, and a session archived in opencode meanwhile is still refused;
* a send in the window between opencode archiving a session and the event saying so (the
  stream held back until the push stored its user message) lands, as opencode runs it, and says
  so: delivered with the warning ``opencode_session_archived`` (the push's own look at the
  session, asked with it); the next send is refused.

If the program is missing these tests fail with "run `make hosts`" -- they never skip.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError
from agent_link_core.model import Caller
from agent_link_opencode.delivery import envelope_prefix
from agent_link_testing.messages_stub import MessagesStub, Reply
from agent_link_testing.opencode_host import OpencodeServer

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(180)]

ALICE = Caller("test:alice", "config", "test")
TURN_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def stub() -> Iterator[MessagesStub]:
    with MessagesStub() as running:
        yield running


@pytest.fixture(scope="module")
def server(stub: MessagesStub) -> Iterator[OpencodeServer]:
    with OpencodeServer(stub.base_url) as running:
        yield running


@pytest.fixture
async def app(server: OpencodeServer, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[App]:
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "opencode")
    monkeypatch.setenv("AGENT_LINK_OPENCODE_SERVERS", str(server.url))
    application = App.create()
    try:
        yield application
    finally:
        await application.aclose()


def copies(server: OpencodeServer, session_id: str, message_id: str) -> list[dict[str, Any]]:
    """The session's user messages holding the envelope of ``message_id``."""
    prefix = envelope_prefix(message_id)
    return [m for m in server.session_messages(session_id) if m["info"]["role"] == "user"
            and any(p.get("type") == "text" and p["text"].startswith(prefix) for p in m["parts"])]


async def test_opencode_push_into_an_idle_session_is_delivered_once_on_the_sessions_record(
        app: App, server: OpencodeServer, stub: MessagesStub) -> None:
    session = server.request("POST", "/session", {"title": "idle one"})
    stub.enqueue("got it")
    before = len(stub.main_requests)
    outcome = await app.send(caller=ALICE, to=f"opencode:{session['id']}", body="please look at the build")
    message_id = outcome.message["id"]
    delivery = outcome.delivery
    assert delivery is not None and delivery.delivered and delivery.via == "opencode-prompt", delivery
    [held] = copies(server, session["id"], message_id)
    assert delivery.evidence["userMessageId"] == held["info"]["id"] == delivery.fields["opencodeUserMessageId"]
    assert app.mailbox.state(app.mailbox.require(message_id)).delivery == "delivered"
    # the model was handed the envelope itself (never the raw body alone)
    seen = stub.wait_for_main(before + 1, timeout_s=TURN_TIMEOUT_S)
    assert any(r.locate(envelope_prefix(message_id)) and r.locate("please look at the build") for r in seen[before:])
    server.wait_for_reply(session["id"], timeout_s=TURN_TIMEOUT_S)

    # the same message pushed again (a resend, another process's push loop): no second copy
    again = await app.harnesses["opencode"].deliver(app.mailbox.row_dict(app.mailbox.require(message_id)),
                                                    app.mailbox.envelope(app.mailbox.require(message_id)), {})
    assert again.delivered and again.evidence["userMessageId"] == held["info"]["id"]
    assert len(copies(server, session["id"], message_id)) == 1


async def test_opencode_push_into_a_busy_session_is_accepted_then_delivered_never_twice(
        app: App, server: OpencodeServer, stub: MessagesStub) -> None:
    session = server.request("POST", "/session", {"title": "busy one"})
    before = len(stub.main_requests)
    stub.enqueue(Reply.text("slow answer", delay_s=6.0), "answered the mail")
    server.request("POST", f"/session/{session['id']}/prompt_async", {"parts": [{"type": "text", "text": "work a while"}]})
    stub.wait_for_main(before + 1, timeout_s=TURN_TIMEOUT_S)

    outcome = await app.send(caller=ALICE, to=f"opencode:{session['id']}", body="when you are free")
    message_id = outcome.message["id"]
    delivery = outcome.delivery
    assert delivery is not None and not delivery.delivered and delivery.accepted, delivery
    assert delivery.state == "accepted_queued_in_session"
    assert [w["code"] for w in delivery.warnings] == ["opencode_session_busy"]
    assert app.mailbox.state(app.mailbox.require(message_id)).delivery == "accepted"
    assert len(copies(server, session["id"], message_id)) == 1
    # a second push while it waits adds nothing and stays honest
    row = app.mailbox.require(message_id)
    again = await app.harnesses["opencode"].deliver(app.mailbox.row_dict(row), app.mailbox.envelope(row), {})
    assert again.accepted and not again.delivered
    assert len(copies(server, session["id"], message_id)) == 1
    assert not await app.refresh_delivery(message_id)  # the model has not been handed it yet

    # the running turn ends, the queued message goes to the model with the next request
    seen = stub.wait_for_main(before + 2, timeout_s=TURN_TIMEOUT_S)
    assert any(r.locate(envelope_prefix(message_id)) for r in seen[before + 1:])
    server.wait_for_reply(session["id"], timeout_s=TURN_TIMEOUT_S)
    assert await app.refresh_delivery(message_id)
    assert app.mailbox.state(app.mailbox.require(message_id)).delivery == "delivered"
    assert len(copies(server, session["id"], message_id)) == 1


async def until(check: Any, what: str, timeout_s: float = 30.0) -> Any:
    """Poll ``check()`` (every 0.1 s, up to ``timeout_s`` s) until it is truthy; its value."""
    deadline = time.monotonic() + timeout_s
    while not (value := await check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not so within {timeout_s} s: {what}")
        await asyncio.sleep(0.1)
    return value


async def test_opencode_send_needs_no_look_up_while_the_event_stream_runs_and_an_archive_still_refuses(
        app: App, server: OpencodeServer, stub: MessagesStub, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_link_opencode import harness as module

    session = server.request("POST", "/session", {"title": "watched"})
    harness = app.harnesses["opencode"]
    await harness.list_sessions()  # opens the server's event stream
    watch = harness._watches[str(server.url)]

    async def connected() -> bool:
        return watch.connected

    await until(connected, "the event stream is open")
    await harness.list_sessions()  # read while the stream is open: known from here on
    asked: list[str] = []
    real = module.call_api

    def counting(url: str, method: str, path: str, body: Any, password: Any, *rest: Any) -> Any:
        asked.append(f"{method} {path}")
        return real(url, method, path, body, password, *rest)

    monkeypatch.setattr(module, "call_api", counting)
    stub.enqueue("ok")
    outcome = await app.send(caller=ALICE, to=f"opencode:{session['id']}", body="no look-up first")
    assert outcome.delivery is not None and outcome.delivery.delivered, outcome.delivery
    # no look-up (GET /session/{id} and /session/status) before the push: only the push's own look, asked with it
    assert asked.count(f"GET /session/{session['id']}") == 1 and "GET /session/status" not in asked, asked
    assert f"POST /session/{session['id']}/prompt_async" in asked
    assert outcome.delivery.evidence["sessionArchived"] is False  # the push's own look, asked with it
    server.wait_for_reply(session["id"], timeout_s=TURN_TIMEOUT_S)

    # archived in opencode meanwhile: the stream tells, and the next send is refused before storing
    server.request("PATCH", f"/session/{session['id']}", {"time": {"archived": int(time.time() * 1000)}})

    async def archived() -> bool:
        found = await harness.get_session(session["id"])
        return found is not None and found.archived

    await until(archived, "the archive reached the event stream")
    with pytest.raises(AgentLinkError) as refused:
        await app.send(caller=ALICE, to=f"opencode:{session['id']}", body="too late")
    assert refused.value.code == "archived"
    assert len([m for m in server.session_messages(session["id"]) if m["info"]["role"] == "user"]) == 1


async def test_opencode_send_in_the_window_before_the_archive_event_says_the_session_was_archived(
        app: App, server: OpencodeServer, stub: MessagesStub, monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    import threading

    session = server.request("POST", "/session", {"title": "archived meanwhile"})
    harness = app.harnesses["opencode"]
    await harness.list_sessions()
    watch = harness._watches[str(server.url)]

    async def connected() -> bool:
        return watch.connected

    await until(connected, "the event stream is open")
    await harness.list_sessions()  # known from the stream from here on
    # the stream's delay, made long: events wait until the push's user message comes, then all
    # arrive in opencode's order (the archive first)
    held: list[str] = []
    holding = threading.Event()
    holding.set()
    real_event = watch._event

    def delayed(data: str) -> None:
        if not holding.is_set():
            real_event(data)
            return
        held.append(data)
        event = json.loads(data)
        event = event.get("payload", event)  # the global stream wraps each event
        info = (event.get("properties") or {}).get("info") or {}
        if event.get("type") == "message.updated" and info.get("role") == "user":
            holding.clear()
            for line in held:
                real_event(line)

    monkeypatch.setattr(watch, "_event", delayed)
    server.request("PATCH", f"/session/{session['id']}", {"time": {"archived": int(time.time() * 1000)}})
    stale = await harness.get_session(session["id"])
    assert stale is not None and not stale.archived  # the window: agent-link does not know yet

    stub.enqueue("ok")
    outcome = await app.send(caller=ALICE, to=f"opencode:{session['id']}", body="in the window")
    delivery = outcome.delivery
    assert delivery is not None and delivery.delivered and delivery.evidence["sessionArchived"] is True, delivery
    assert [w["code"] for w in delivery.warnings] == ["opencode_session_archived"]
    assert len(copies(server, session["id"], outcome.message["id"])) == 1  # opencode stored it (and runs the turn)
    with pytest.raises(AgentLinkError) as refused:
        await app.send(caller=ALICE, to=f"opencode:{session['id']}", body="after the window")
    assert refused.value.code == "archived"
