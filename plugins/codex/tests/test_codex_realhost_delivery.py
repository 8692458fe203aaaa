"""Delivery into REAL Codex threads (the pinned Codex CLI app-server, stub Responses API).

Each test runs ``codex app-server --listen unix://…`` in a temporary CODEX_HOME whose model is
the stub (``agent_link_testing``), and an in-process agent-link App (sender ``test:alice``)
whose only endpoint is that socket (``AGENT_LINK_CODEX_SOCK``; autostart off). A second raw
JSON-RPC client plays "someone else using Codex" (starting threads and turns).

Facts observed here beyond docs/hosts/codex.md:

* a thread whose turn started before agent-link subscribed has no known turn id in the
  notifications; ``thread/turns/list {limit:1}`` names the in-progress one, and
  ``turn/steer`` with it works;
* a second app-server on the same CODEX_HOME keeps the rollout of a thread it has loaded
  open, so a ``/proc`` holder scan tells "held by another app-server" apart from "unloaded";
* after SIGKILL mid-turn, the rollout already holds the userMessage (with ``client_id``) of a
  message delivered before the kill; a fresh app-server shows it in ``thread/items/list``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent_link_codex.appserver import AppServerClient
from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError
from agent_link_core.mailbox import new_message_id
from agent_link_core.records import OutgoingMessage
from agent_link_core.model import Caller
from agent_link_core.tools.registry import ToolCall
from agent_link_testing.codex_host import CodexAppServer, host_env
from agent_link_testing.host_process import freeze
from agent_link_testing.responses_stub import ResponsesStub, text

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(90)]

WAIT_MS = 15_000
WAIT_S = WAIT_MS / 1000
ALICE = Caller("test:alice", "config", "test")


def text_input(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value, "text_elements": []}]


def use_endpoint(monkeypatch: pytest.MonkeyPatch, host: CodexAppServer) -> None:
    monkeypatch.setenv("AGENT_LINK_CODEX_SOCK", str(host.socket_path))
    monkeypatch.setenv("CODEX_HOME", str(host.codex_home))
    monkeypatch.setenv("AGENT_LINK_CODEX_AUTOSTART", "0")
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "claude roles receipts")


@pytest.fixture
async def app(host: CodexAppServer, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[App]:
    use_endpoint(monkeypatch, host)
    application = App.create()
    try:
        yield application
    finally:
        await application.aclose()


@pytest.fixture
async def raw(host: CodexAppServer) -> AsyncIterator[AppServerClient]:
    client = await AppServerClient.connect_unix(host.socket_path, refuse_server_requests=True)
    await client.initialize("someone-else", "0.0.1", timeout_ms=WAIT_MS)
    try:
        yield client
    finally:
        await client.close()


async def new_thread(raw: AppServerClient, *, first_turn: bool = True) -> str:
    """A thread started by another client; with ``first_turn`` it has a finished turn (a rollout)."""
    thread_id = str((await raw.request("thread/start", {}, timeout_ms=WAIT_MS))["thread"]["id"])
    if first_turn:
        async with raw.subscription(thread_id=thread_id) as sub:
            await raw.request("turn/start", {"threadId": thread_id, "input": text_input("setup")}, timeout_ms=WAIT_MS)
            await sub.wait_for(lambda n: n.method == "turn/completed", timeout_ms=WAIT_MS)
    return thread_id


async def user_items(client: AppServerClient, thread_id: str) -> list[dict[str, Any]]:
    page = await client.request("thread/items/list", {"threadId": thread_id, "limit": 100}, timeout_ms=WAIT_MS)
    return [e["item"] for e in page["data"] if e["item"]["type"] == "userMessage"]


def claim_state(app: App, message_id: str) -> str | None:
    row = app.store.conn.execute("SELECT state FROM codex_pushes WHERE message_id = ?", (message_id,)).fetchone()
    return row["state"] if row else None


async def test_idle_thread_gets_a_turn_confirmed_by_client_id(app: App, raw: AppServerClient, stub: ResponsesStub) -> None:
    thread_id = await new_thread(raw, first_turn=False)  # even a thread with no turn yet
    outcome = await app.send(caller=ALICE, to=f"codex:{thread_id}", body="Please review PR 12", anticipation="reply")
    message_id = outcome.message["id"]
    delivery = outcome.delivery
    assert delivery is not None and delivery.delivered and delivery.via == "codex-turn", delivery
    assert delivery.evidence["clientId"] == message_id and delivery.evidence["threadId"] == thread_id
    assert delivery.fields["action"] == "started_turn" and delivery.fields["target"]["previousStatus"] == "idle"
    row = app.mailbox.get_row(message_id)
    assert row["first_delivered_at"] is not None and row["delivered_via"] == "codex-turn"
    assert claim_state(app, message_id) == "confirmed"
    # the model saw the envelope, on this thread
    request = await asyncio.to_thread(stub.wait_for, lambda r: r.contains(message_id), WAIT_S)
    assert request.thread_id == thread_id
    [seen] = [t for t in request.user_texts() if message_id in t]
    assert seen.startswith("<agent-link-message") and "Please review PR 12" in seen and 'from="test:alice"' in seen
    # the thread's own item carries the id as clientId
    assert [i["clientId"] for i in await user_items(raw, thread_id)] == [message_id]
    # a second send is a second turn; the same id again is not pushed twice
    again = await app.send(caller=ALICE, to=f"codex:{thread_id}", body="Please review PR 12", anticipation="reply", message_id=message_id)
    assert again.created is False and again.delivery is None


async def test_active_turn_is_steered(app: App, raw: AppServerClient, stub: ResponsesStub, host: CodexAppServer) -> None:
    thread_id = await new_thread(raw)
    hold = stub.hold(timeout_s=WAIT_S)
    stub.enqueue(text("busy answer", hold=hold, stream_first=True))
    started = await raw.request("turn/start", {"threadId": thread_id, "input": text_input("long task")}, timeout_ms=WAIT_MS)
    turn_id = started["turn"]["id"]
    assert await asyncio.to_thread(hold.wait_arrived, WAIT_S)
    [link] = await app.harnesses["codex"].service.connect(spawn=False)
    assert link.pid == host.pid  # SO_PEERCRED names the app-server process
    methods: list[str] = []
    original = link.client.request

    async def spy(method: str, params: Any = None, timeout_ms: int | None = None) -> Any:
        if method != "hooks/list":  # health's trust read runs aside
            methods.append(method)
        return await original(method, params, timeout_ms)

    link.client.request = spy  # type: ignore[method-assign]
    outcome = await app.send(caller=ALICE, to=f"codex:{thread_id}", body="Stop and read this", anticipation="fyi")
    delivery = outcome.delivery
    assert delivery is not None and delivery.delivered, delivery
    assert delivery.fields["action"] == "steered_active_turn" and delivery.fields["turnId"] == turn_id
    # the turn started before we subscribed: its id is looked up, then steered with it
    assert methods == ["thread/read", "thread/resume", "thread/turns/list", "turn/steer"], methods
    assert delivery.fields["target"]["previousStatus"] == "active"
    message_id = outcome.message["id"]
    steered = await asyncio.to_thread(stub.wait_for, lambda r: r.contains(message_id), WAIT_S)
    assert steered.user_texts()[-2] == "long task"  # appended to the running turn's input
    assert stub.responses_requests()[1].cancelled  # Codex dropped the held request for the steer
    hold.release()


async def test_unloaded_thread_is_resumed(stub: ResponsesStub, tmp_path: Path, isolated_env: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "codex"
    with CodexAppServer(stub.base_url, root=root, env=host_env(isolated_env)) as first:
        async with await AppServerClient.connect_unix(first.socket_path) as raw:
            await raw.initialize("someone-else", "0.0.1", timeout_ms=WAIT_MS)
            thread_id = await new_thread(raw)
    # a fresh app-server on the same CODEX_HOME: the thread exists but is not loaded
    with CodexAppServer(stub.base_url, root=root, env=host_env(isolated_env)) as second:
        use_endpoint(monkeypatch, second)
        app = App.create()
        try:
            kept = await app.send(caller=ALICE, to=f"codex:{thread_id}", body="only if loaded", options={"resumeIfNeeded": False})
            assert kept.delivery is not None and not kept.delivery.delivered
            assert [w["code"] for w in kept.delivery.warnings] == ["codex_thread_not_loaded"]
            assert app.mailbox.get_row(kept.message["id"])["first_delivered_at"] is None

            outcome = await app.send(caller=ALICE, to=f"codex:{thread_id}", body="wake up", anticipation="action")
            assert outcome.delivery is not None and outcome.delivery.delivered, outcome.delivery
            assert outcome.delivery.fields["action"] == "resumed+started_turn"
            assert outcome.delivery.fields["target"]["previousStatus"] == "notLoaded"
            assert await asyncio.to_thread(stub.wait_for, lambda r: r.contains(outcome.message["id"]), WAIT_S)
        finally:
            await app.aclose()


async def test_archived_and_unknown_threads_are_refused(app: App, raw: AppServerClient) -> None:
    thread_id = await new_thread(raw)
    await raw.request("thread/archive", {"threadId": thread_id}, timeout_ms=WAIT_MS)
    with pytest.raises(AgentLinkError) as archived:
        await app.send(caller=ALICE, to=f"codex:{thread_id}", body="too late")
    assert archived.value.code == "archived" and archived.value.details == {"address": f"codex:{thread_id}"}
    unknown = "01a22a93-0000-7000-8000-0000000000ff"
    with pytest.raises(AgentLinkError) as missing:
        await app.send(caller=ALICE, to=f"codex:{unknown}", body="anyone?")
    assert missing.value.code == "not_found"
    assert app.store.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0
    # a message stored earlier (before the archive) is refused at push time and stays queued
    row, _ = app.mailbox.store_message(OutgoingMessage(new_message_id(), ALICE, f"codex:{thread_id}", f"codex:{thread_id}",
                                                       "queued before", "fyi", None, None))
    delivery = await app.push(row, {})
    assert delivery is not None and not delivery.delivered and delivery.warnings[0]["code"] == "archived"
    assert app.mailbox.get_row(row["id"])["first_delivered_at"] is None and claim_state(app, row["id"]) is None


async def test_thread_held_by_another_app_server_gets_mail_only(stub: ResponsesStub, tmp_path: Path, isolated_env: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "codex"
    with CodexAppServer(stub.base_url, root=root, env=host_env(isolated_env)) as ours, \
            CodexAppServer(stub.base_url, root=root, socket_path=tmp_path / "desktop.sock", env=host_env(isolated_env)) as desktop:
        async with await AppServerClient.connect_unix(desktop.socket_path) as other:
            await other.initialize("desktop-app", "0.0.1", timeout_ms=WAIT_MS)
            thread_id = await new_thread(other)  # loaded (and its rollout held open) by the other server
            use_endpoint(monkeypatch, ours)
            app = App.create()
            try:
                outcome = await app.send(caller=ALICE, to=f"codex:{thread_id}", body="for the desktop thread", anticipation="reply")
                delivery = outcome.delivery
                assert delivery is not None and not delivery.delivered and delivery.state == "queued" and delivery.fields.get("action") == "held_elsewhere"
                [warn] = delivery.warnings
                assert warn["code"] == "codex_desktop_push_disabled" and warn["details"]["holders"] == [desktop.pid]
                assert app.mailbox.get_row(outcome.message["id"])["first_delivered_at"] is None
                assert len(await user_items(other, thread_id)) == 1  # only the setup turn
                health = await app.hooks.tools()["agent_link_health"].handler(app, {}, ToolCall(meta={}, caller=ALICE))
                checks = health["harnesses"]["codex"]["desktopPush"]["rolloutChecks"]
                assert checks == {"checked": 1, "held": 1, "skipped": {}}
            finally:
                await app.aclose()


async def test_app_server_killed_mid_turn_loses_no_message(stub: ResponsesStub, tmp_path: Path, isolated_env: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_link_codex import delivery as delivery_mod
    from agent_link_codex import harness as harness_mod

    root = tmp_path / "codex"
    first = CodexAppServer(stub.base_url, root=root, env=host_env(isolated_env)).start()
    try:
        use_endpoint(monkeypatch, first)
        app = App.create()
        harness = app.harnesses["codex"]
        async with await AppServerClient.connect_unix(first.socket_path) as raw:
            await raw.initialize("someone-else", "0.0.1", timeout_ms=WAIT_MS)
            thread_id = await new_thread(raw)
        # M1 starts a turn whose model answer never comes (the turn stays active)
        hold = stub.hold(timeout_s=60)
        stub.enqueue(text("never finished", hold=hold, stream_first=True))
        m1 = await app.send(caller=ALICE, to=f"codex:{thread_id}", body="first", anticipation="reply")
        assert m1.delivery is not None and m1.delivery.delivered
        assert await asyncio.to_thread(hold.wait_arrived, WAIT_S)
        # the app-server freezes, M2's push gets no answer and cannot be checked, then it dies
        [link] = harness.service.live_links()
        link.client.default_timeout_ms = 1000
        monkeypatch.setattr(delivery_mod, "CONFIRM_MS", 1000)
        freeze(pgid=first.pid)
        m2 = await app.send(caller=ALICE, to=f"codex:{thread_id}", body="second", anticipation="reply")
        assert m2.delivery is not None and m2.delivery.unknown and not m2.delivery.delivered, m2.delivery
        assert [w["code"] for w in m2.delivery.warnings] == ["codex_push_unverified"]
        assert claim_state(app, m2.message["id"]) == "unknown"
        first.kill()
        await link.client.wait_closed(timeout_ms=WAIT_MS)
        hold.release()
    finally:
        first.stop()
    with CodexAppServer(stub.base_url, root=root, env=host_env(isolated_env)) as second:
        use_endpoint(monkeypatch, second)
        harness.service.values["AGENT_LINK_CODEX_SOCK"] = str(second.socket_path)
        links = await harness.service.connect(spawn=False)
        assert [ln.endpoint.target for ln in links] == [str(second.socket_path)]
        # the unsettled push is checked against the thread before anything is resent
        counts = await harness.background_pass(app, stale_after_ms=0)
        assert counts["rechecked"] == 1 and claim_state(app, m2.message["id"]) == "failed"
        assert app.mailbox.get_row(m2.message["id"])["first_delivered_at"] is None
        # M1 is still evidenced by the thread; M2 is not in it (nothing was lost or doubled)
        async with await AppServerClient.connect_unix(second.socket_path) as raw:
            await raw.initialize("someone-else", "0.0.1", timeout_ms=WAIT_MS)
            ids = [i["clientId"] for i in await user_items(raw, thread_id)]
            assert m1.message["id"] in ids and m2.message["id"] not in ids
            # once the thread runs here again and goes idle, the background pass offers M2: once
            m3 = await app.send(caller=ALICE, to=f"codex:{thread_id}", body="third", anticipation="fyi")
            assert m3.delivery is not None and m3.delivery.fields["action"] == "resumed+started_turn"
            async with raw.subscription() as sub:
                await sub.wait_for(lambda n: n.method == "thread/status/changed" and n.params["status"]["type"] == "idle"
                                   and n.thread_id == thread_id, timeout_ms=WAIT_MS)
            monkeypatch.setattr(harness_mod, "QUEUED_MIN_AGE_MS", 0)
            await asyncio.sleep(0.2)
            counts = await harness.background_pass(app)
            assert counts["pushed"] == 1 and claim_state(app, m2.message["id"]) == "confirmed"
            assert app.mailbox.get_row(m2.message["id"])["delivered_via"] == "codex-turn"
            assert (await harness.background_pass(app))["pushed"] == 0
            await asyncio.sleep(0.5)
            ids = [i["clientId"] for i in await user_items(raw, thread_id)]
            assert ids.count(m2.message["id"]) == 1 and ids.count(m1.message["id"]) == 1
        await app.aclose()
