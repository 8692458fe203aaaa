"""The channel bridge: the gate, pushing new mail as notifications, delivery evidence,
failures, the registry of running bridges and the capability declaration."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from agent_link_claude.channel import (
    CHANNEL_BUDGET_BYTES,
    HANDSHAKE,
    METHOD,
    STATELESS,
    BridgeStatus,
    ChannelBridge,
    GateState,
    PeerGone,
    active_bridges,
    channel_entries,
    channel_meta,
    connection_gate,
    evaluate_gate,
)
from agent_link_claude import channel as channel_mod
from agent_link_claude.connection import McpPeer
from agent_link_claude.harness import ClaudeHarness
from agent_link_core import hookimpl
from agent_link_core.app import App
from agent_link_core.model import Caller
from agent_link_waits.waits import waits_of

A = "11111111-1111-4111-8111-111111111111"
ADDR = f"claude:{A}"
ALICE = Caller("test:alice", "config", "test")
FLAGS = {"cachedGrowthBookFeatures": {"tengu_harbor": True, "tengu_harbor_ledger": [{"marketplace": "agent-link", "plugin": "agent-link"}]}}
STREAM = ["claude", "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]


# -- the gate ----------------------------------------------------------------------------------


def test_channel_entries_parse_variadic_and_equals_forms() -> None:
    argv = ["claude", "--channels", "plugin:a@m", "server:x", "--verbose", "--dangerously-load-development-channels=server:y,plugin:b@n", "prompt"]
    assert channel_entries(argv) == [
        ("--channels", "plugin:a@m"), ("--channels", "server:x"),
        ("--dangerously-load-development-channels", "server:y"), ("--dangerously-load-development-channels", "plugin:b@n"),
    ]


AS_PLUGIN = {"CLAUDE_PLUGIN_DATA": "/home/u/.claude/plugins/data/agent-link-agent-link"}


@pytest.mark.parametrize(
    ("env", "argv", "config", "client", "expected"),
    [
        (AS_PLUGIN, STREAM + ["--channels", "plugin:agent-link@agent-link"], FLAGS, "claude-code", ("open", "plugin:agent-link@agent-link")),
        # the same server configured as a plain MCP server: the entry names another server
        ({}, STREAM + ["--channels", "plugin:agent-link@agent-link"], FLAGS, "claude-code", ("server_not_from_plugin", None)),
        ({"CLAUDE_PLUGIN_DATA": "/h/.claude/plugins/data/agent-link-elsewhere"}, STREAM + ["--channels", "plugin:agent-link@agent-link"],
         FLAGS, "claude-code", ("server_not_from_plugin", None)),
        ({}, STREAM + ["--channels", "plugin:agent-link@agent-link"], FLAGS, "mcp", ("client_not_claude_code", None)),
        ({"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}, STREAM + ["--channels", "plugin:agent-link@agent-link"], FLAGS, "claude-code",
         ("flag_cache_off:CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", None)),
        ({"DO_NOT_TRACK": "0", **AS_PLUGIN}, STREAM + ["--channels", "plugin:agent-link@agent-link"], FLAGS, "claude-code",
         ("open", "plugin:agent-link@agent-link")),
        ({}, STREAM + ["--channels", "plugin:agent-link@agent-link"], {}, "claude-code", ("feature_flag_off", None)),
        ({}, STREAM + ["--channels", "plugin:agent-link@other"], FLAGS, "claude-code", ("plugin_not_allowlisted", None)),
        ({}, STREAM + ["--channels", "plugin:someone-else@agent-link"], FLAGS, "claude-code", ("not_listed", None)),
        ({}, STREAM, FLAGS, "claude-code", ("not_listed", None)),
        ({}, ["claude", "-p", "hi", "--channels", "plugin:agent-link@agent-link"], FLAGS, "claude-code", ("print_mode_without_stream_input", None)),
        ({}, STREAM + ["--channels", "server:agent-link"], FLAGS, "claude-code", ("server_entry_needs_development_flag", None)),
        ({}, STREAM + ["--dangerously-load-development-channels", "server:agent-link"], FLAGS, "claude-code",
         ("development_flag_ignored_in_print_mode", None)),
        ({}, ["claude", "--dangerously-load-development-channels", "server:agent-link"], FLAGS, "claude-code", ("open", "server:agent-link")),
        (AS_PLUGIN, ["claude", "--dangerously-load-development-channels", "server:agent-link"], FLAGS, "claude-code",
         ("plugin_server_not_named_by_server_entry", None)),
        ({"CLAUDE_PLUGIN_DATA": "/h/.claude/plugins/data/agent-link-local/"}, ["claude", "--dangerously-load-development-channels",
                                                                          "plugin:agent-link@local"], FLAGS, "claude-code", ("open", "plugin:agent-link@local")),
        ({}, None, FLAGS, "claude-code", ("no_parent_command_line", None)),
    ],
)
def test_gate(env: dict, argv: list[str] | None, config: dict, client: str, expected: tuple[str, str | None]) -> None:
    gate = evaluate_gate(env, argv, config, client)
    assert (gate.reason, gate.entry) == expected
    assert gate.open == (expected[0] == "open")


# -- the bridge --------------------------------------------------------------------------------


class RecordingPeer(McpPeer):
    """A peer that records notifications; ``fail`` makes the next writes raise it."""

    def __init__(self) -> None:
        super().__init__(None)
        self.client_info = {"name": "claude-code"}
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.fail: Exception | None = None

    async def notify(self, method: str, params: Mapping[str, Any]) -> None:
        if self.fail is not None:
            raise self.fail
        self.sent.append((method, json.loads(json.dumps(params))))


@pytest.fixture
def app(fake_claude):
    fake_claude.write_transcript(A)
    application = App.create()
    yield application
    application.close()


async def send(app: App, body: str = "hello there", **kw: Any) -> str:
    outcome = await app.send(caller=ALICE, to=ADDR, body=body, anticipation="reply", **kw)
    return outcome.message["id"]


def bridge(gate: GateState = GateState(True, "open", "plugin:agent-link@agent-link"), session: str | None = A) -> ChannelBridge:
    return ChannelBridge(lambda: gate, lambda: session, BridgeStatus())


async def until(predicate, timeout_s: float = 5.0) -> None:
    with anyio.fail_after(timeout_s):
        while not predicate():
            await anyio.sleep(0.05)


@pytest.mark.anyio
async def test_pushes_new_mail_from_other_processes_and_marks_it_delivered_after_the_write(app: App) -> None:
    early = await send(app, "queued before the bridge started")
    peer, b = RecordingPeer(), bridge()
    other = App.create()  # another process's connection: wakes the bridge through data_version
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(b.run, app, peer)
            await until(lambda: len(peer.sent) == 1)
            assert active_bridges(app.config.state_dir)[A]["pid"] == os.getpid()
            late = (await other.send(caller=ALICE, to=ADDR, body="sent while it runs", anticipation="fyi")).message["id"]
            await until(lambda: len(peer.sent) == 2, 5.0)
            tg.cancel_scope.cancel()
    finally:
        other.close()
    (method1, first), (_, second) = peer.sent
    assert method1 == METHOD
    assert first["meta"] == {"message_id": early, "from_session_id": "test:alice", "from_kind": "test", "from_verified": "false"}
    assert first["content"].startswith(f'<agent-link-message id="{early}"') and "queued before the bridge started" in first["content"]
    assert second["meta"]["message_id"] == late
    for mid in (early, late):
        row = app.mailbox.get_row(mid)
        assert row["delivered_via"] == "channel" and row["first_delivered_at"] is not None
    event = app.store.conn.execute("SELECT data FROM message_events WHERE message_id = ? AND kind = 'delivered'", (early,)).fetchone()
    assert json.loads(event[0])["evidence"] == {"method": METHOD, "session": A}
    assert active_bridges(app.config.state_dir) == {}  # unregistered when it stopped
    assert b.status.pushed == 2


@pytest.mark.anyio
async def test_a_message_larger_than_the_budget_is_announced_once_and_stays_undelivered(
    app: App, monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert CHANNEL_BUDGET_BYTES > 64 * 1024  # measured: any plain 64 KiB body is pushed whole
    monkeypatch.setattr(channel_mod, "CHANNEL_BUDGET_BYTES", 5_000)  # stands for an envelope escaping made too large
    big = await send(app, "x" * 5_010)
    small = await send(app, "a short one after it")
    peer, b = RecordingPeer(), bridge()
    async with anyio.create_task_group() as tg:
        tg.start_soon(b.run, app, peer)
        await until(lambda: len(peer.sent) == 2)
        await send(app, "a write that wakes the bridge again")
        await until(lambda: len(peer.sent) == 3)
        tg.cancel_scope.cancel()
    notice, second = peer.sent[0][1], peer.sent[1][1]
    assert notice["meta"]["message_id"] == big and notice["content"].startswith("<agent-link-notice")
    assert big in notice["content"] and "xxxx" not in notice["content"] and len(notice["content"]) < 1000
    assert second["meta"]["message_id"] == small  # the big one is not announced again
    assert app.mailbox.get_row(big)["first_delivered_at"] is None  # read in pages from the inbox, later
    assert app.mailbox.get_row(small)["delivered_via"] == "channel"


@pytest.mark.anyio
async def test_own_writes_wake_the_bridge_too(app: App) -> None:
    peer, b = RecordingPeer(), bridge()
    async with anyio.create_task_group() as tg:
        tg.start_soon(b.run, app, peer)
        await anyio.sleep(0.5)
        # a send by this very process (nobody may message itself: a peer's address, written here)
        mid = (await app.send(caller=Caller("test:peer", "config", "test"), to=ADDR, body="from this process")).message["id"]
        await until(lambda: len(peer.sent) == 1)
        tg.cancel_scope.cancel()
    assert peer.sent[0][1]["meta"]["from_session_id"] == "test:peer" and peer.sent[0][1]["meta"]["message_id"] == mid


@pytest.mark.anyio
async def test_a_failed_write_leaves_the_message_queued_and_is_retried(app: App) -> None:
    mid = await send(app)
    peer, b = RecordingPeer(), bridge()
    peer.fail = RuntimeError("stream hiccup")
    async with anyio.create_task_group() as tg:
        tg.start_soon(b.run, app, peer)
        await until(lambda: b.status.last_error is not None)
        assert app.mailbox.get_row(mid)["first_delivered_at"] is None
        peer.fail = None
        await until(lambda: len(peer.sent) == 1, 6.0)
        tg.cancel_scope.cancel()
    assert app.mailbox.get_row(mid)["delivered_via"] == "channel"


@pytest.mark.anyio
async def test_a_gone_peer_ends_the_bridge_without_marking(app: App) -> None:
    mid = await send(app)
    peer, b = RecordingPeer(), bridge()
    peer.fail = PeerGone(METHOD)
    with pytest.raises(PeerGone), anyio.fail_after(5):
        await b.run(app, peer)
    assert app.mailbox.get_row(mid)["first_delivered_at"] is None
    assert active_bridges(app.config.state_dir) == {} and b.status.running is False


@pytest.mark.anyio
async def test_closed_gate_pushes_nothing_and_registers_nothing(app: App) -> None:
    mid = await send(app)
    peer, b = RecordingPeer(), bridge(GateState(False, "not_listed"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(b.run, app, peer)
        await anyio.sleep(1.0)
        assert active_bridges(app.config.state_dir) == {}
        tg.cancel_scope.cancel()
    assert peer.sent == [] and app.mailbox.get_row(mid)["first_delivered_at"] is None


@pytest.mark.anyio
async def test_mailbox_only_messages_are_never_pushed(app: App) -> None:
    kept = (await app.send(caller=ALICE, to=ADDR, body="pull me", tool="message_claude_session",
                           arguments={"deliveryPreference": "mailbox"})).message["id"]
    pushed = await send(app, "push me")
    peer, b = RecordingPeer(), bridge()
    async with anyio.create_task_group() as tg:
        tg.start_soon(b.run, app, peer)
        await until(lambda: len(peer.sent) == 1)
        await anyio.sleep(0.5)
        tg.cancel_scope.cancel()
    assert [p["meta"]["message_id"] for _, p in peer.sent] == [pushed]
    assert app.mailbox.get_row(kept)["first_delivered_at"] is None


@pytest.mark.anyio
@pytest.mark.parametrize("by_reply_to", [True, False], ids=["wait-for-reply", "wait-for-any-message"])
async def test_a_message_an_in_process_wait_returns_is_not_pushed_too(app: App, by_reply_to: bool) -> None:
    # the session waits (wait_for_agent in its own server) for test:alice; her answer must reach
    # the model once, as the wait's result, not also as a channel turn
    me = Caller(ADDR, "env", "claude")
    asked = (await app.send(caller=me, to="test:alice", body="question", anticipation="reply")).message["id"]
    peer, b = RecordingPeer(), bridge()
    other = App.create()  # test:alice answers from another process
    waited: dict[str, Any] = {}
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(b.run, app, peer)

            async def wait() -> None:
                waited["out"] = await waits_of(app).wait(caller=me, agent="test:alice", reply_to=asked if by_reply_to else None,
                                               timeout_ms=10_000, poll_ms=1500)

            tg.start_soon(wait)
            await until(lambda: waits_of(app).waiting)
            if by_reply_to:
                answer = (await other.reply(caller=ALICE, message_id=asked, message="the answer"))["messageId"]
            else:
                answer = (await other.send(caller=ALICE, to=ADDR, body="the answer", anticipation="fyi")).message["id"]
            # the commit wakes the bridge and the wait alike: the wait takes it, the bridge leaves it
            await until(lambda: "out" in waited, 5.0)
            await anyio.sleep(0.5)
            assert peer.sent == []
            # a later message that no wait holds is pushed as usual
            later = (await other.send(caller=ALICE, to=ADDR, body="unrelated", anticipation="fyi")).message["id"]
            await until(lambda: len(peer.sent) == 1)
            tg.cancel_scope.cancel()
    finally:
        other.close()
    assert waited["out"]["outcome"] == "reply" and waited["out"]["reply"]["id"] == answer
    assert app.mailbox.get_row(answer)["delivered_via"] == "wait"
    assert [p["meta"]["message_id"] for _, p in peer.sent] == [later]


@pytest.mark.anyio
async def test_a_held_message_is_pushed_when_the_wait_ends_without_it(app: App) -> None:
    me = Caller(ADDR, "env", "claude")
    asked = (await app.send(caller=me, to="test:alice", body="question", anticipation="reply")).message["id"]
    peer, b = RecordingPeer(), bridge()
    async with anyio.create_task_group() as tg:
        tg.start_soon(b.run, app, peer)
        waits_of(app).waiting[f"reply:{asked}"] = 1  # a wait that is cancelled before it takes the reply
        answer = (await app.reply(caller=ALICE, message_id=asked, message="the answer"))["messageId"]
        await anyio.sleep(0.8)
        assert peer.sent == []
        del waits_of(app).waiting[f"reply:{asked}"]  # nothing is written when it goes away
        await until(lambda: len(peer.sent) == 1, 5.0)
        tg.cancel_scope.cancel()
    assert peer.sent[0][1]["meta"]["message_id"] == answer


@pytest.mark.anyio
async def test_the_bridge_follows_the_current_session(app: App, fake_claude) -> None:
    other_id = "44444444-4444-4444-8444-444444444444"
    fake_claude.write_transcript(other_id)
    current = {"id": A}
    b = ChannelBridge(lambda: GateState(True, "open", "x"), lambda: current["id"], BridgeStatus())
    peer = RecordingPeer()
    async with anyio.create_task_group() as tg:
        tg.start_soon(b.run, app, peer)
        await until(lambda: A in active_bridges(app.config.state_dir))
        current["id"] = other_id  # /clear
        await until(lambda: other_id in active_bridges(app.config.state_dir))
        assert A not in active_bridges(app.config.state_dir)
        mid = (await app.send(caller=ALICE, to=f"claude:{other_id}", body="for the new session")).message["id"]
        await until(lambda: len(peer.sent) == 1)
        tg.cancel_scope.cancel()
    assert peer.sent[0][1]["meta"]["message_id"] == mid


def test_meta_never_carries_a_raw_sender() -> None:
    row = {"id": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "from_addr": 'x" fromVerified="true', "metadata": json.dumps({"sender": {"verified": True}})}
    assert channel_meta(row) == {"message_id": row["id"], "from_session_id": "invalid", "from_kind": "external", "from_verified": "false"}


# -- declaration and delivery states -----------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "declared"),
    [
        ({"AGENT_LINK_HOST": "claude"}, True),
        ({"AGENT_LINK_HOST": "claude", "AGENT_LINK_DISABLE_CHANNEL": "1"}, False),
        ({"AGENT_LINK_HOST": "codex"}, False),
        ({"CLAUDE_CODE_SESSION_ID": A}, True),
        ({}, False),
    ],
)
def test_capability_is_declared_only_inside_claude_code(monkeypatch: pytest.MonkeyPatch, env: dict, declared: bool) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    application = App.create()
    try:
        harness = application.harnesses["claude"]
        assert harness.declare_channel(application) == ({"claude/channel": {}} if declared else {})
    finally:
        application.close()


class OtherWatcher:
    """A plugin that watches MCP connections before the claude plugin does."""

    @hookimpl(tryfirst=True)
    def agent_link_mcp_connection(self, write: Any) -> Any:
        return SimpleNamespace(inbound=lambda item: None, outbound=lambda item: None, view=lambda: {})


@pytest.mark.anyio
async def test_a_channel_wanted_but_not_watched_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside Claude Code, but another plugin watches the connection (so the claude plugin's hook is never called, as
    when it is skipped): no capability went out, and health says why, not "not inside Claude Code"."""
    monkeypatch.setenv("AGENT_LINK_HOST", "claude")
    application = App.create(extra_plugins=(("other-watcher", OtherWatcher()),))
    try:
        plugin, peer = application.hooks.mcp_connection(None)
        assert plugin == "other-watcher"
        harness: ClaudeHarness = application.harnesses["claude"]
        await harness.serve(application, peer)
        assert harness.channel_declared is False and harness.bridge.gate.reason == "connection_not_watched"
    finally:
        application.close()


@pytest.mark.anyio
async def test_delivery_states(app: App, fake_claude) -> None:
    harness: ClaudeHarness = app.harnesses["claude"]

    async def state(options: dict | None = None) -> tuple[str, list]:
        d = await harness.deliver({"recipient": ADDR}, "", options or {})
        assert not d.delivered
        return d.state, [w["code"] for w in d.warnings]

    assert await state() == ("queued-offline", [])
    assert await state({"deliveryPreference": "channel"}) == ("queued-offline", ["channel_unavailable"])
    fake_claude.write_live(os.getpid(), A)
    assert await state() == ("queued-online", [])
    assert await state({"deliveryPreference": "mailbox"}) == ("queued", [])
    peer, b = RecordingPeer(), bridge()
    async with anyio.create_task_group() as tg:
        tg.start_soon(b.run, app, peer)
        await until(lambda: A in active_bridges(app.config.state_dir))
        assert await state() == ("queued-channel", [])
        assert await state({"deliveryPreference": "channel"}) == ("queued-channel", [])
        session = await harness.get_session(A)
        assert session.receive == {"push": "channel", "nudge": "claude-hook", "pull": True}
        health = harness.health()
        assert health["channel"]["activeBridges"] == [A]
        tg.cancel_scope.cancel()


def test_the_connection_gate_waits_for_the_handshake_and_refuses_the_stateless_revision() -> None:
    peer = McpPeer(None)
    assert connection_gate(peer) == GateState(False, "client_not_connected")
    peer.era, peer.protocol_version = HANDSHAKE, "2025-11-25"
    assert connection_gate(peer) == GateState(False, "client_not_connected")  # no notifications/initialized yet
    peer.initialized = True
    assert connection_gate(peer) is None  # Claude Code's own conditions decide from here
    peer.era, peer.protocol_version = STATELESS, "2026-07-28"
    assert connection_gate(peer) == GateState(False, "stateless_protocol_revision")
