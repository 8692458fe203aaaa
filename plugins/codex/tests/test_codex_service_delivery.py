"""Connection and delivery rules against a scripted app-server (no real Codex): endpoint
probing, the push claim, start/steer decisions, and what happens when evidence is missing."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agent_link_codex import delivery as delivery_mod
from agent_link_codex import rollouts
from agent_link_codex import service as service_mod
from agent_link_codex.appserver import Notification
from agent_link_codex.delivery import Deliverer, PushClaims
from agent_link_codex.endpoints import socket_endpoint
from agent_link_codex.schema import MIGRATIONS
from agent_link_codex.service import CodexService, ThreadTracker
from agent_link_core.errors import AgentLinkError
from agent_link_core.store import CORE_MIGRATIONS, Store

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

TID = "01a22a93-0000-7000-8000-0000000000aa"


def make_service(tmp: Path, sock: Path | None, registered: list[Any] = (), **values: Any) -> CodexService:
    base = {"AGENT_LINK_CODEX_SOCK": str(sock) if sock else None, "AGENT_LINK_CODEX_AUTOSTART": False, "AGENT_LINK_CODEX_IDLE_MS": 0}
    return CodexService({**base, **values}, {"CODEX_HOME": str(tmp / "codex-home"), "HOME": str(tmp)}, tmp / "state",
                        lambda: list(registered))


def hanging_socket(path: Path) -> socket.socket:
    """A socket that accepts connections into its backlog but never answers the handshake."""
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(8)
    return listener


async def test_unreachable_endpoints_are_reported_and_never_hide_others(short_tmp: Path, mini: Any) -> None:
    # The probes' real bound (2 s), not a shorter one: a loaded machine can take over half a
    # second to answer the live endpoint's handshake, which then counted as unreachable.
    probe_s = service_mod.PROBE_OPEN_MS / 1000
    stuck = [hanging_socket(short_tmp / f"stuck{i}.sock") for i in range(2)]
    try:
        registered = [socket_endpoint(str(short_tmp / f"stuck{i}.sock"), "registered") for i in range(2)]
        registered.append(socket_endpoint(str(short_tmp / "gone.sock"), "registered"))
        service = make_service(short_tmp, mini.path, registered)
        start = time.monotonic()
        links = await service.connect(spawn=False)
        elapsed = time.monotonic() - start
        assert [ln.endpoint.source for ln in links] == ["env-sock"]
        assert elapsed < 1.75 * probe_s, f"probes ran one after another ({elapsed:.2f} s)"  # two timeouts, concurrently
        reasons = {r["target"]: r["reason"] for r in service.endpoint_reports()}
        assert reasons[str(short_tmp / "stuck0.sock")] == "open-timeout" and reasons[str(short_tmp / "stuck1.sock")] == "open-timeout"
        assert reasons[str(short_tmp / "gone.sock")] == "absent"
        assert reasons[str(short_tmp / "codex-home" / "app-server-control" / "app-server-control.sock")] == "absent"
        assert reasons[str(mini.path)] is None
        # a warm connect reuses the link and does not wait for the failed ones again
        start = time.monotonic()
        assert await service.connect(spawn=False) == links and time.monotonic() - start < probe_s / 2
        await service.aclose()
    finally:
        for s in stuck:
            s.close()


async def test_no_app_server_errors_say_why(short_tmp: Path) -> None:
    explicit = make_service(short_tmp, short_tmp / "nobody.sock", AGENT_LINK_CODEX_AUTOSTART=True)
    with pytest.raises(AgentLinkError) as info:
        await explicit.connect(spawn=True)
    assert info.value.code == "codex_unavailable" and info.value.details["reason"] == "explicit-endpoint-unreachable"
    assert info.value.details["endpoint"] == str(short_tmp / "nobody.sock")
    off = make_service(short_tmp, None)
    with pytest.raises(AgentLinkError) as info:
        await off.connect(spawn=True)
    assert info.value.details["reason"] == "autostart-disabled" and "AGENT_LINK_CODEX_AUTOSTART" in (info.value.hint or "")
    assert await off.connect(spawn=False) == []  # background asks never raise


def test_tracker_follows_notifications() -> None:
    woke: list[str] = []
    tracker = ThreadTracker(woke.append)

    def note(method: str, **params: Any) -> Notification:
        return Notification(method, {"threadId": TID, **params})

    tracker.handle(note("thread/status/changed", status={"type": "active", "activeFlags": []}))
    tracker.handle(note("turn/started", turn={"id": "turn-1"}))
    assert tracker.status[TID] == "active" and tracker.active_turn[TID] == "turn-1" and TID not in tracker.seen_idle
    tracker.handle(note("item/completed", turnId="turn-1", item={"type": "userMessage", "id": "item-1", "clientId": "M1"}))
    assert tracker.echo("M1") == {"threadId": TID, "turnId": "turn-1", "itemId": "item-1"}
    tracker.handle(note("thread/status/changed", status={"type": "idle"}))
    assert TID in tracker.seen_idle and TID not in tracker.active_turn and woke == [TID]
    tracker.subscribed.add(TID)
    tracker.handle(note("thread/closed"))
    assert tracker.status[TID] == "notLoaded" and TID not in tracker.subscribed and TID not in tracker.seen_idle


async def test_tracker_waits_while_the_named_mcp_server_is_starting() -> None:
    tracker = ThreadTracker()
    names = frozenset({"agent-link"})

    def status(name: str, state: str) -> None:
        tracker.handle(Notification("mcpServer/startupStatus/updated", {"threadId": TID, "name": name, "status": state}))

    assert await tracker.wait_mcp_started(TID, names, 5_000) == {}  # nothing reported: nothing to wait for
    status("agent-link", "starting")
    status("other", "starting")  # another server's start-up is not waited for
    assert await tracker.wait_mcp_started(TID, names, 0) == {"agent-link": "starting"}  # the bound holds
    waiting = asyncio.ensure_future(tracker.wait_mcp_started(TID, names, 5_000))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    status("agent-link", "ready")
    assert await waiting == {"agent-link": "ready"}
    tracker.handle(Notification("thread/closed", {"threadId": TID}))
    assert TID not in tracker.mcp_status  # a later resume starts the servers afresh


async def test_tracker_waits_for_the_first_report_on_a_thread_it_started_or_resumed() -> None:
    tracker = ThreadTracker()
    names = frozenset({"agent-link", "codex-agent-link"})

    def status(tid: str, name: str, state: str) -> None:
        tracker.handle(Notification("mcpServer/startupStatus/updated", {"threadId": tid, "name": name, "status": state}))

    tracker.expect_mcp_reports(TID)
    waiting = asyncio.ensure_future(tracker.wait_mcp_started(TID, names, 5_000))
    await asyncio.sleep(0.01)
    assert not waiting.done()  # Codex may send the reports after the start/resume answer
    status(TID, "agent-link", "starting")
    await asyncio.sleep(0.01)
    assert not waiting.done()
    status(TID, "agent-link", "ready")
    assert await waiting == {"agent-link": "ready"}
    tracker.handle(Notification("thread/closed", {"threadId": TID}))
    assert TID not in tracker.mcp_expected  # a later resume is expected afresh by whoever makes it


async def test_a_start_up_report_that_never_comes_is_waited_for_once_per_connection() -> None:
    tracker = ThreadTracker()
    names = frozenset({"agent-link", "codex-agent-link"})
    unreported = {"agent-link": "unreported", "codex-agent-link": "unreported"}
    tracker.expect_mcp_reports("t1")
    assert await tracker.wait_mcp_started("t1", names, 5_000, report_ms=50) == unreported
    assert tracker.mcp_silent == names
    # likely not configured in this Codex: the next expected thread does not wait for it again
    tracker.expect_mcp_reports("t2")
    again = asyncio.ensure_future(tracker.wait_mcp_started("t2", names, 5_000))
    await asyncio.sleep(0)
    assert again.done() and again.result() == unreported
    # a report, even a late one, ends that: the next expected thread waits again
    tracker.handle(Notification("mcpServer/startupStatus/updated", {"threadId": "t1", "name": "agent-link", "status": "starting"}))
    assert tracker.mcp_silent == {"codex-agent-link"}
    tracker.expect_mcp_reports("t3")
    waiting = asyncio.ensure_future(tracker.wait_mcp_started("t3", names, 5_000))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    tracker.handle(Notification("mcpServer/startupStatus/updated", {"threadId": "t3", "name": "agent-link", "status": "failed"}))
    assert await waiting == {"agent-link": "failed"}
    # the overall bound holds for the first report too
    tracker.expect_mcp_reports("t4")
    assert await tracker.wait_mcp_started("t4", names, 0) == unreported


@pytest.fixture
def claims(tmp_path: Path) -> PushClaims:
    return PushClaims(Store(tmp_path / "db.sqlite", (*CORE_MIGRATIONS, *MIGRATIONS)))


def test_push_claim_is_unique_and_only_a_failed_push_is_claimed_again(claims: PushClaims, tmp_path: Path) -> None:
    wins: list[bool] = []

    def race() -> None:
        store = Store(tmp_path / "db.sqlite", (*CORE_MIGRATIONS, *MIGRATIONS))
        wins.append(PushClaims(store).claim("M1", TID, "ep"))
        store.close()

    threads = [threading.Thread(target=race) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(wins) == [False] * 7 + [True]
    for state in ("pushing", "unknown", "confirmed"):
        claims.settle("M1", state)
        assert not claims.claim("M1", TID, "ep") and not claims.reclaimable("M1"), state
    for attempt in range(2, delivery_mod.MAX_ATTEMPTS + 1):
        claims.settle("M1", "failed")
        assert claims.reclaimable("M1") and claims.claim("M1", TID, "ep")
        assert claims.get("M1")["attempts"] == attempt
    claims.settle("M1", "failed")
    assert not claims.reclaimable("M1") and not claims.claim("M1", TID, "ep")  # gives up: left for the inbox


class ScriptedThread:
    """App-server behaviour of one thread for the mini server: status, turns, echoes."""

    def __init__(self, server: Any, status: str = "idle", echo: bool = True) -> None:
        self.server = server
        self.status = status
        self.echo = echo
        self.turn = "turn-live" if status == "active" else None
        self.items: list[dict[str, Any]] = []
        self.steer_error: str | None = None
        self.start_error: str | None = None
        server.handlers.update({
            "thread/read": self.read, "thread/resume": self.resume, "turn/start": self.start, "turn/steer": self.steer,
            "thread/items/list": self.items_list, "thread/turns/list": self.turns_list,
        })

    def thread(self) -> dict[str, Any]:
        return {"id": TID, "status": {"type": self.status}, "path": f"/codex/sessions/rollout-x-{TID}.jsonl", "cwd": "/w"}

    def read(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"thread": self.thread()}

    def resume(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self.status == "notLoaded":
            self.status = "idle"
            self.server.report_mcp_startup(TID)  # loading the thread starts its MCP servers
        return {"thread": self.thread()}

    def turns_list(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"data": [{"id": self.turn, "status": "inProgress"}] if self.turn else []}

    async def _land(self, turn: str, client_id: str | None) -> None:
        item = {"type": "userMessage", "id": f"item-{len(self.items)}", "clientId": client_id}
        self.items.append({"turnId": turn, "item": item})
        if self.echo:
            await self.server.notify("item/completed", {"threadId": TID, "turnId": turn, "item": item})

    async def start(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self.start_error:
            raise self.server_error(self.start_error)
        self.turn = self.turn or "turn-new"
        self.status = "active"
        asyncio.get_running_loop().call_later(0.01, lambda: asyncio.ensure_future(self._land(self.turn, params.get("clientUserMessageId"))))
        return {"turn": {"id": self.turn, "status": "inProgress"}}

    async def steer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self.steer_error:
            error, self.steer_error = self.steer_error, None
            raise self.server_error(error)
        if params["expectedTurnId"] != self.turn:
            raise self.server_error(f"expected active turn id `{params['expectedTurnId']}` but found `{self.turn}`")
        asyncio.get_running_loop().call_later(0.01, lambda: asyncio.ensure_future(self._land(self.turn, params.get("clientUserMessageId"))))
        return {"turnId": self.turn}

    def items_list(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"data": list(reversed(self.items))}

    server_error: Any = None


@pytest.fixture
def scripted(mini: Any, mini_error: Any) -> Any:
    def make(**kwargs: Any) -> ScriptedThread:
        thread = ScriptedThread(mini, **kwargs)
        thread.server_error = mini_error
        return thread

    return make


@pytest.fixture
async def deliverer(short_tmp: Path, mini: Any, claims: PushClaims) -> Any:
    service = make_service(short_tmp, mini.path)
    yield Deliverer(service, claims)
    await service.aclose()


def sent(mini: Any, method: str) -> list[dict[str, Any]]:
    return [p for m, p in mini.requests if m == method]


async def test_idle_thread_turn_start_with_client_id(deliverer: Deliverer, mini: Any, scripted: Any) -> None:
    scripted()
    out = await deliverer.push("M1", TID, "<agent-link-message ...>", {})
    assert out.delivered and out.via == "codex-turn" and out.fields["action"] == "started_turn"
    [start] = sent(mini, "turn/start")
    assert start == {"threadId": TID, "input": [{"type": "text", "text": "<agent-link-message ...>", "text_elements": []}],
                     "clientUserMessageId": "M1", "turnTrigger": "agent-link"}
    assert out.evidence["clientId"] == "M1" and deliverer.claims.get("M1")["state"] == "confirmed"
    # pushing the same message again starts no second turn
    again = await deliverer.push("M1", TID, "<agent-link-message ...>", {})
    assert again.delivered and again.fields["action"] == "already_delivered" and len(sent(mini, "turn/start")) == 1


async def test_answered_without_echo_is_accepted_not_believed_and_never_resent(deliverer: Deliverer, mini: Any, scripted: Any,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(delivery_mod, "CONFIRM_MS", 300)
    thread = scripted(echo=False)
    thread.start = lambda method, params: {"turn": {"id": "turn-x", "status": "inProgress"}}  # accepted, echo not yet
    mini.handlers["turn/start"] = thread.start
    out = await deliverer.push("M2", TID, "text", {})
    assert not out.delivered and not out.unknown and out.accepted and out.state == "accepted_awaiting_thread"
    assert out.note == "accepted, awaiting the thread" and [w["code"] for w in out.warnings] == ["codex_push_accepted"]
    assert deliverer.claims.get("M2")["state"] == "accepted" and not deliverer.claims.reclaimable("M2")
    starts = len(sent(mini, "turn/start"))
    again = await deliverer.push("M2", TID, "text", {})  # e.g. the background pass: nothing is sent twice
    assert again.accepted and again.fields["action"] == "already_accepted" and len(sent(mini, "turn/start")) == starts
    # it landed without a notification: found by reading the thread, delivered
    thread2 = scripted(echo=False)
    out = await deliverer.push("M3", TID, "text", {})
    assert out.delivered and thread2.items[0]["item"]["clientId"] == "M3"


async def test_active_thread_is_steered_with_the_right_turn(deliverer: Deliverer, mini: Any, scripted: Any) -> None:
    thread = scripted(status="active")
    out = await deliverer.push("M4", TID, "text", {})
    assert out.delivered and out.fields["action"] == "steered_active_turn" and out.fields["turnId"] == "turn-live"
    assert [p["expectedTurnId"] for p in sent(mini, "turn/steer")] == ["turn-live"] and sent(mini, "turn/start") == []
    # a caller's stale expectedTurnId is a conflict, nothing is pushed, the claim is released
    with pytest.raises(AgentLinkError) as info:
        await deliverer.push("M5", TID, "text", {"expectedTurnId": "turn-old"})
    assert info.value.code == "active_turn_conflict" and info.value.details == {"status": "active", "activeTurnId": "turn-live"}
    assert deliverer.claims.get("M5")["state"] == "failed" and len(thread.items) == 1
    # the turn ended between our look and the steer: one turn/start instead
    thread.steer_error = "no active turn to steer"
    out = await deliverer.push("M6", TID, "text", {})
    assert out.delivered and len(sent(mini, "turn/start")) == 1
    # steer_active needs an active turn (the tracker learns "idle" from the broadcast)
    thread.status = "idle"
    await mini.notify("thread/status/changed", {"threadId": TID, "status": {"type": "idle"}})
    await asyncio.sleep(0.1)
    with pytest.raises(AgentLinkError) as info:
        await deliverer.push("M7", TID, "text", {"mode": "steer_active"})
    assert info.value.code == "active_turn_conflict" and info.value.details["status"] == "idle"


async def test_a_turn_after_a_resume_waits_for_start_up_reports_sent_after_the_answer(
        deliverer: Deliverer, mini: Any, scripted: Any) -> None:
    scripted(status="notLoaded")
    reports_at_turn = mini.reports_seen_by("turn/start")
    out = await deliverer.push("R1", TID, "text", {})
    assert out.delivered and out.fields["action"] == "resumed+started_turn" and out.warnings == []
    assert reports_at_turn == [[(TID, "agent-link", "starting"), (TID, "agent-link", "ready")]]


async def test_a_start_up_report_that_never_comes_is_a_warning(short_tmp: Path, mini: Any, scripted: Any, claims: PushClaims) -> None:
    thread = scripted(status="notLoaded")
    thread.resume = lambda method, params: {"thread": {**thread.thread(), "status": {"type": "idle"}}}  # no reports
    mini.handlers["thread/resume"] = thread.resume
    service = make_service(short_tmp, mini.path)
    try:
        out = await Deliverer(service, claims, mcp_ready_ms=100).push("R2", TID, "text", {})
    finally:
        await service.aclose()
    assert out.delivered and [w["code"] for w in out.warnings] == ["codex_tools_not_ready"]
    assert out.warnings[0]["details"]["servers"] == {"agent-link": "unreported"}


async def test_claimed_elsewhere_and_rejected_pushes(deliverer: Deliverer, mini: Any, scripted: Any) -> None:
    thread = scripted()
    assert deliverer.claims.claim("M8", TID, "other")  # another process is pushing it
    out = await deliverer.push("M8", TID, "text", {})
    assert not out.delivered and [w["code"] for w in out.warnings] == ["codex_push_claimed_elsewhere"]
    assert sent(mini, "turn/start") == []
    thread.start_error = "thread not found: " + TID
    with pytest.raises(AgentLinkError) as info:
        await deliverer.push("M9", TID, "text", {})
    assert info.value.code == "not_found" and deliverer.claims.get("M9")["state"] == "failed"
    thread.status, thread.start_error = "notLoaded", None
    await mini.notify("thread/status/changed", {"threadId": TID, "status": {"type": "notLoaded"}})
    await asyncio.sleep(0.1)
    deliverer.service._located.clear()
    out = await deliverer.push("M10", TID, "text", {"resumeIfNeeded": False})
    assert out.state == "queued" and out.warnings[0]["code"] == "codex_thread_not_loaded"
    assert deliverer.claims.get("M10") is None  # nothing was claimed, nothing was sent


async def test_threads_held_elsewhere_get_mail_only_unless_shared_daemon_is_explicit(
        short_tmp: Path, mini: Any, scripted: Any, claims: PushClaims) -> None:
    rollout = short_tmp / f"rollout-x-{TID}.jsonl"
    rollout.write_text("{}\n")
    holder = subprocess.Popen([sys.executable, "-c", f"f = open({str(rollout)!r}); import time; time.sleep(60)"])
    try:
        thread = scripted(status="notLoaded")
        thread.thread = lambda: {"id": TID, "status": {"type": thread.status}, "path": str(rollout), "cwd": "/w"}
        deadline = time.monotonic() + 5
        while not rollouts.rollout_holders(str(rollout), set()) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        service = make_service(short_tmp, mini.path)
        refused_deliverer = Deliverer(service, claims, desktop_push="shared-daemon", explicit_endpoint=False)
        refused = await refused_deliverer.push("H1", TID, "t", {})
        assert refused.state == "queued" and refused.fields["action"] == "held_elsewhere" and not refused.delivered
        assert [w["code"] for w in refused.warnings] == ["desktop_push_override_refused", "codex_desktop_push_disabled"]
        assert refused.warnings[1]["details"] == {"signal": "rollout-open-elsewhere", "holders": [holder.pid]}
        refused_checks = refused_deliverer.rollout_checks
        assert refused_checks == {"checked": 1, "held": 1, "skipped": {}}
        assert sent(mini, "thread/resume") == [] and sent(mini, "turn/start") == [] and claims.get("H1") is None
        forced = await Deliverer(service, claims, desktop_push="shared-daemon", explicit_endpoint=True).push("H2", TID, "t", {})
        assert forced.delivered and forced.fields["action"] == "resumed+started_turn"
        assert [w["code"] for w in forced.warnings] == ["desktop_push_unverified"]
        await service.aclose()
    finally:
        holder.kill()
        holder.wait()


async def test_holder_checks_that_cannot_run_are_counted_and_never_block(
        short_tmp: Path, mini: Any, scripted: Any, claims: PushClaims, monkeypatch: pytest.MonkeyPatch) -> None:
    rollout = short_tmp / f"rollout-y-{TID}.jsonl"
    rollout.write_text("{}\n")
    thread = scripted(status="notLoaded")
    monkeypatch.setattr(rollouts, "rollout_holders", lambda path, exclude: None)  # neither psutil nor lsof works here
    # a thread without a rollout path, then one whose holders cannot be asked for: each push
    # goes ahead (a fresh service each, so that the thread is not loaded yet) and is counted
    for path, reason in ((None, "no_rollout_path"), (str(rollout), "holder_check_unavailable")):
        thread.thread = lambda path=path: {"id": TID, "status": {"type": "notLoaded"}, "path": path, "cwd": "/w"}
        thread.status = "notLoaded"
        service = make_service(short_tmp, mini.path)
        deliverer = Deliverer(service, claims)
        try:
            out = await deliverer.push(f"K-{reason}", TID, "t", {})
            assert out.delivered, out
            assert deliverer.rollout_checks == {"checked": 0, "held": 0, "skipped": {reason: 1}}
        finally:
            await service.aclose()
