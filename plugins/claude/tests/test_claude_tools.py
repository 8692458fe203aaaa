"""The Claude session tools: schemas and annotations, every error path, results checked
against the declared output schemas, and the same tools through a real MCP client."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import anyio
import pytest
from jsonschema import Draft202012Validator

from agent_link_claude.tools import CLAUDE_TOOLS
from agent_link_core.app import App
from agent_link_core.model import Caller
from agent_link_core.tools.registry import output_schema
from agent_link_testing.mcp_client import agent_link_mcp
from agent_link_testing.tool_app import call_tool

ME = "aaaaaaaa-0000-4000-8000-000000000001"
PEER = "bbbbbbbb-0000-4000-8000-000000000002"
OTHER = "cccccccc-0000-4000-8000-000000000003"
SPECS = {spec.name: spec for spec in CLAUDE_TOOLS}
READ_ONLY = {"list_claude_sessions", "list_loaded_claude_sessions", "get_claude_session", "resolve_claude_session", "wait_for_claude_session"}


@pytest.fixture
def app(fake_claude, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", ME)
    fake_claude.write_transcript(ME, "/work/me", title="My own session")
    fake_claude.write_transcript(PEER, "/work/parser", title="Parser rewrite")
    fake_claude.write_transcript(OTHER, "/work/docs", title="Docs cleanup")
    fake_claude.write_sidecar(fake_claude.linux_desktop_root(), "dddd-0004", surface_dir="local-agent-mode-sessions",
                              title="Parser research", archived=True)
    application = App.create()
    yield application
    application.close()


async def call(app: App, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """Run a tool as the MCP server would, its result checked against its output schema."""
    return await call_tool(app, name, **args)


def code(result: dict[str, Any]) -> str | None:
    return None if result["ok"] else result["error"]["code"]


# -- schemas -----------------------------------------------------------------------------------


def test_every_tool_has_strict_valid_schemas_and_the_reference_annotations() -> None:
    assert set(SPECS) == READ_ONLY | {"message_claude_session"}
    for spec in CLAUDE_TOOLS:
        for schema in (spec.input_schema, output_schema(spec)):
            Draft202012Validator.check_schema(schema)
            assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert spec.read_only == (spec.name in READ_ONLY), spec.name
        assert not spec.destructive
        assert "agent-link" in spec.description or "Claude" in spec.description


@pytest.mark.anyio
@pytest.mark.parametrize("name", sorted(SPECS))
async def test_unknown_arguments_are_refused(app: App, name: str) -> None:
    result = await call(app, name, {"bogus": 1})
    assert code(result) == "invalid_arguments"
    assert {"path": "bogus", "rule": "unknown_property", "expected": "no such argument"} in result["error"]["details"]["errors"]


@pytest.mark.anyio
async def test_removed_arguments_name_their_replacement(app: App) -> None:
    result = await call(app, "message_claude_session", {"to": PEER, "message": "x"})
    assert code(result) == "invalid_arguments"
    assert result["error"]["details"]["removed"] == [{"argument": "to", "replacement": "sessionId (exact) or query (fuzzy)"}]
    result = await call(app, "resolve_claude_session", {"searchTerm": "x"})
    assert result["error"]["details"]["removed"] == [{"argument": "searchTerm", "replacement": "query"}]


@pytest.mark.anyio
async def test_ranges_are_enforced_never_clamped(app: App) -> None:
    for args in ({"limit": 0}, {"limit": 201}, {"surface": "web"}):
        assert code(await call(app, "list_claude_sessions", args)) == "invalid_arguments", args
    assert code(await call(app, "resolve_claude_session", {"query": "x", "limit": 51})) == "invalid_arguments"
    assert code(await call(app, "wait_for_claude_session", {"sessionId": PEER, "timeoutMs": 600001})) == "invalid_arguments"
    coerced = await call(app, "list_claude_sessions", {"limit": "2"})
    assert coerced["ok"] and len(coerced["sessions"]) == 2 and coerced["warnings"][0]["code"] == "coerced_argument"


# -- listing, getting, resolving ---------------------------------------------------------------


@pytest.mark.anyio
async def test_list_get_resolve(app: App, fake_claude) -> None:
    listed = await call(app, "list_claude_sessions", {})
    assert {s["address"] for s in listed["sessions"]} == {f"claude:{i}" for i in (ME, PEER, OTHER)}
    assert listed["provider"]["available"] is True
    with_archived = await call(app, "list_claude_sessions", {"includeArchived": True, "surface": "desktop"})
    assert [s["address"] for s in with_archived["sessions"]] == ["claude:dddd-0004"]
    assert (await call(app, "list_loaded_claude_sessions", {}))["sessions"] == []
    fake_claude.write_live(os.getpid(), PEER)
    loaded = await call(app, "list_loaded_claude_sessions", {"surface": "code"})
    assert [s["address"] for s in loaded["sessions"]] == [f"claude:{PEER}"]

    got = await call(app, "get_claude_session", {"sessionId": f"claude:{PEER}"})
    assert got["session"]["title"] == "Parser rewrite" and got["session"]["cwd"] == "/work/parser"
    assert got["session"]["loaded"] is True and got["session"]["cliSessionId"] == PEER
    assert got["session"]["createdAt"] == "2026-01-02T03:04:05.678Z" and got["session"]["entrypoint"] == "cli"
    assert (await call(app, "get_claude_session", {"sessionId": "local_dddd-0004"}))["session"]["archived"] is True

    resolved = await call(app, "resolve_claude_session", {"query": "parser"})
    assert resolved["status"] == "resolved" and resolved["best"]["address"] == f"claude:{PEER}"  # the archived one ranks lower
    desktop = await call(app, "resolve_claude_session", {"query": "parser", "surface": "desktop"})
    assert desktop["status"] == "resolved" and desktop["best"]["address"] == "claude:dddd-0004"
    assert (await call(app, "resolve_claude_session", {"query": "zebra"}))["status"] == "not_found"
    assert (await call(app, "resolve_claude_session", {"query": OTHER}))["best"]["address"] == f"claude:{OTHER}"


@pytest.mark.anyio
async def test_lookup_errors(app: App) -> None:
    missing = await call(app, "get_claude_session", {"sessionId": "claude:eeee"})
    assert code(missing) == "not_found" and missing["error"]["details"] == {"id": "claude:eeee", "candidates": []}
    assert code(await call(app, "get_claude_session", {"sessionId": "codex:abc"})) == "invalid_arguments"
    assert code(await call(app, "get_claude_session", {"sessionId": "bad id"})) == "invalid_arguments"
    assert code(await call(app, "resolve_claude_session", {"query": "codex:abc"})) == "invalid_arguments"
    assert code(await call(app, "wait_for_claude_session", {"sessionId": "claude:eeee"})) == "not_found"


# -- messaging and waiting ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_message_by_id_and_by_query(app: App) -> None:
    sent = await call(app, "message_claude_session", {"sessionId": PEER, "message": "please review", "anticipation": "reply"})
    assert sent["ok"] and sent["delivery"] == "queued-offline" and sent["messageDelivery"] == "queued"
    assert sent["target"] == {"address": f"claude:{PEER}", "sessionId": PEER, "title": "Parser rewrite", "loaded": False, "surface": ["code"]}
    assert sent["resolution"] == {"via": "exact", "query": PEER, "matchReasons": ["id:exact"]}
    row = app.mailbox.get_row(sent["messageId"])
    assert (row["from_addr"], row["recipient"], row["from_source"]) == (f"claude:{ME}", f"claude:{PEER}", "env")

    fuzzy = await call(app, "message_claude_session", {"query": "docs", "message": "fyi", "deliveryPreference": "mailbox"})
    assert fuzzy["delivery"] == "queued" and fuzzy["target"]["address"] == f"claude:{OTHER}"
    assert fuzzy["resolution"]["via"] == "fuzzy" and fuzzy["resolution"]["matchReasons"]
    assert app.mailbox.row_dict(app.mailbox.get_row(fuzzy["messageId"]))["metadata"]["claude"] == {"push": False}

    warned = await call(app, "message_claude_session", {"sessionId": f"claude:{PEER}", "message": "x", "deliveryPreference": "channel"})
    # the test process is no Claude Code process: its session variable alone proves nothing
    assert [w["code"] for w in warned["warnings"]] == ["sender_unverified", "channel_unavailable"]


@pytest.mark.anyio
async def test_an_exact_id_reaches_an_archived_session(app: App) -> None:
    # docs/behaviour.md §15: an exact sessionId reaches archived sessions; its mail waits for it
    for given in ("local_dddd-0004", "claude:dddd-0004"):
        sent = await call(app, "message_claude_session", {"sessionId": given, "message": "when you are back", "anticipation": "fyi"})
        assert sent["ok"] and sent["delivery"] == "queued-offline" and sent["messageDelivery"] == "queued", sent
        assert sent["target"]["address"] == "claude:dddd-0004" and sent["resolution"]["via"] == "exact"
        assert app.mailbox.get_row(sent["messageId"])["recipient"] == "claude:dddd-0004"
    # message_agent to the exact address behaves the same (its mail waits for the session)
    sent = await call(app, "message_agent", {"to": "claude:dddd-0004", "message": "x"})
    assert sent["ok"] and sent["delivery"] == "queued" and app.mailbox.get_row(sent["messageId"])["recipient"] == "claude:dddd-0004"


@pytest.mark.anyio
async def test_message_errors(app: App) -> None:
    assert code(await call(app, "message_claude_session", {"message": "x"})) == "invalid_arguments"
    both = await call(app, "message_claude_session", {"sessionId": PEER, "query": "x", "message": "x"})
    assert both["error"]["details"]["errors"][0]["rule"] == "xor"
    override = await call(app, "message_claude_session", {"sessionId": PEER, "message": "x", "model": "opus"})
    assert code(override) == "unsupported" and override["error"]["details"]["capability"] == "turn_overrides"
    assert code(await call(app, "message_claude_session", {"sessionId": "claude:nobody", "message": "x"})) == "not_found"
    assert code(await call(app, "message_claude_session", {"sessionId": "codex:abc", "message": "x"})) == "invalid_arguments"
    ambiguous = await call(app, "message_claude_session", {"query": "work", "message": "x"})
    assert code(ambiguous) == "ambiguous" and len(ambiguous["error"]["details"]["candidates"]) == 3
    archived_only = await call(app, "message_claude_session", {"query": "research", "message": "x"})
    assert code(archived_only) == "not_found"  # fuzzy queries skip archived sessions
    assert app.store.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0
    too_big = await call(app, "message_claude_session", {"sessionId": PEER, "message": "x" * 65537})
    assert code(too_big) == "body_too_large"
    bad_label = await call(app, "message_claude_session", {"sessionId": PEER, "message": "x", "anticipation": "fyi", "waitForReply": True})
    assert code(bad_label) == "invalid_arguments"


@pytest.mark.anyio
async def test_wait_outcomes(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    sent = await call(app, "message_claude_session", {"sessionId": PEER, "message": "ping", "anticipation": "reply"})
    mid = sent["messageId"]
    timed_out = await call(app, "wait_for_claude_session", {"sessionId": PEER, "replyToMessageId": mid, "timeoutMs": 300, "pollIntervalMs": 250})
    assert timed_out["outcome"] == "timeout" and timed_out["timedOut"] is True and timed_out["messageStatus"] == "pending"
    assert timed_out["target"] == {"address": f"claude:{PEER}", "sessionId": PEER, "lastLoaded": False}

    async def peer_replies() -> None:
        await anyio.sleep(0.4)
        await app.reply(caller=Caller(f"claude:{PEER}", "env", "claude"), message_id=mid, message="pong")

    async with anyio.create_task_group() as tg:
        tg.start_soon(peer_replies)
        replied = await call(app, "wait_for_claude_session", {"sessionId": PEER, "replyToMessageId": mid, "timeoutMs": 10000, "pollIntervalMs": 250})
    assert replied["outcome"] == "reply" and "pong" in replied["reply"]["envelope"]
    assert replied["messageStatus"] == "replied"

    assert code(await call(app, "wait_for_claude_session", {"sessionId": PEER, "replyToMessageId": "01ARZ3NDEKTSV4RRFFQ69G5FAV"})) == "not_found"
    monkeypatch.delenv("CLAUDE_CODE_SESSION_ID")
    anonymous = App.create()
    try:
        assert code(await call(anonymous, "wait_for_claude_session", {"sessionId": PEER, "timeoutMs": 100})) == "no_current_session"
    finally:
        anonymous.close()


@pytest.mark.anyio
async def test_wait_reports_idle_when_a_running_target_stops(app: App, fake_claude) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        fake_claude.write_live(sleeper.pid, PEER)
        sent = await call(app, "message_claude_session", {"sessionId": PEER, "message": "ping", "anticipation": "reply"})
        assert sent["delivery"] == "queued-online" and sent["target"]["loaded"] is True

        async def stop_target() -> None:
            await anyio.sleep(0.5)
            sleeper.kill()
            await anyio.to_thread.run_sync(sleeper.wait)

        async with anyio.create_task_group() as tg:
            tg.start_soon(stop_target)
            with anyio.fail_after(15):
                waited = await call(app, "wait_for_claude_session", {"sessionId": PEER, "replyToMessageId": sent["messageId"], "timeoutMs": 30000})
    finally:
        sleeper.kill()
        sleeper.wait()
    assert waited["outcome"] == "idle" and waited["timedOut"] is False and waited["messageStatus"] == "pending"
    assert waited["target"]["lastLoaded"] is False and waited["waitedMs"] < 10000


@pytest.mark.anyio
async def test_message_with_wait_for_reply(app: App) -> None:
    async def peer_replies() -> None:
        with anyio.fail_after(10):
            while not app.mailbox.open_for(f"claude:{PEER}", 1):
                await anyio.sleep(0.1)
        [row] = app.mailbox.open_for(f"claude:{PEER}", 1)
        await app.reply(caller=Caller(f"claude:{PEER}", "env", "claude"), message_id=row["id"], resolution="decline", message="busy")

    async with anyio.create_task_group() as tg:
        tg.start_soon(peer_replies)
        sent = await call(app, "message_claude_session", {"sessionId": PEER, "message": "help?", "waitForReply": True, "timeoutMs": 10000})
    assert sent["anticipation"] == "reply" and sent["wait"]["outcome"] == "declined" and "busy" in sent["wait"]["reply"]["envelope"]


# -- through a real MCP client -----------------------------------------------------------------


@pytest.mark.anyio
async def test_tools_over_real_mcp_stdio(fake_claude) -> None:
    fake_claude.write_transcript(ME, "/work/me", title="My own session")
    fake_claude.write_transcript(PEER, "/work/parser", title="Parser rewrite")
    async with agent_link_mcp({"CLAUDE_CODE_SESSION_ID": ME, "AGENT_LINK_HOST": "claude", "AGENT_LINK_TOOLS": "all"}) as me:
        tools = await me.tools()
        for spec in CLAUDE_TOOLS:
            listed = tools[spec.name]
            assert listed.input_schema == spec.input_schema
            assert listed.output_schema == output_schema(spec)
            assert listed.annotations.read_only_hint == spec.read_only and listed.annotations.open_world_hint is False
        # a server inside Claude Code declares the channel capability
        assert me.init.capabilities.experimental == {"claude/channel": {}}
        listed = await me.call("list_claude_sessions", {})
        assert [s["address"] for s in listed["sessions"]] == [f"claude:{PEER}", f"claude:{ME}"]
        assert (await me.call("resolve_claude_session", {"query": "parser"}))["best"]["address"] == f"claude:{PEER}"
        assert (await me.call("get_claude_session", {"sessionId": "claude:zzz"}))["error"]["code"] == "not_found"
        sent = await me.call("message_claude_session", {"sessionId": PEER, "message": "over stdio", "anticipation": "reply"})
        assert sent["ok"] and sent["delivery"] == "queued-offline"
        async with agent_link_mcp({"CLAUDE_CODE_SESSION_ID": PEER, "AGENT_LINK_HOST": "claude", "AGENT_LINK_TOOLS": "all"}) as peer:
            inbox = await peer.call("read_agent_link_inbox", {})
            assert "over stdio" in inbox["renderedBlock"] and inbox["markedDelivered"] == [sent["messageId"]]
            assert (await peer.call("reply_agent_link_message", {"messageId": sent["messageId"], "message": "got it"}))["ok"]
            # the test client is not Claude Code: its server never pushes, and says why
            health = await peer.call("agent_link_health", {})
            assert health["harnesses"]["claude"]["channel"]["bridge"]["gate"]["reason"] == "client_not_claude_code"
        waited = await me.call("wait_for_claude_session", {"sessionId": f"claude:{PEER}", "replyToMessageId": sent["messageId"], "timeoutMs": 5000})
        assert waited["outcome"] == "reply" and "got it" in waited["reply"]["envelope"]
        # only the session variable named PEER (no Claude Code process above the test's server)
        assert waited["reply"]["from"] == f"claude:{PEER}" and waited["reply"]["fromVerified"] is False


@pytest.mark.anyio
async def test_session_lists_page_with_a_working_cursor_over_real_mcp(fake_claude) -> None:
    """A page says it is a page (issue 18): ``complete`` only for the whole listing, the
    ``nextCursor`` walks the rest, filters say what they left out, a bad cursor is refused."""
    ids = [f"aaaaaaaa-0000-4000-8000-{n:012d}" for n in range(5)]
    for n, sid in enumerate(ids):
        fake_claude.write_transcript(sid, f"/work/p{n}", title=f"session {n}", mtime=1_767_000_000 - n)
    fake_claude.write_live(os.getpid(), ids[3])
    async with agent_link_mcp({"CLAUDE_CODE_SESSION_ID": ids[0], "AGENT_LINK_HOST": "claude", "AGENT_LINK_TOOLS": "all"}) as me:
        seen, pages, cursor = [], [], None
        while True:
            page = await me.call("list_claude_sessions", {"limit": 2, **({"cursor": cursor} if cursor else {})})
            assert page["ok"] is True and page["complete"] is False, page
            pages.append(page)
            seen += [s["id"] for s in page["sessions"]]
            cursor = page["nextCursor"]
            if cursor is None:
                break
        assert sorted(seen) == ids and [p["hasMore"] for p in pages] == [True, True, False]  # each once
        whole = await me.call("list_claude_sessions", {"limit": 5})
        assert whole["complete"] is True and whole["filters"]["includeArchived"] is False
        loaded = await me.call("list_loaded_claude_sessions", {})
        assert [s["id"] for s in loaded["sessions"]] == [ids[3]]
        assert loaded["complete"] is True and loaded["filteredOut"] == {"archived": 0, "loaded": 4}
        for name in ("list_claude_sessions", "list_loaded_claude_sessions"):
            refused = await me.call(name, {"cursor": "not-a-cursor"})
            assert refused["error"]["code"] == "invalid_arguments"
            assert [e["path"] for e in refused["error"]["details"]["errors"]] == ["cursor"]


@pytest.mark.anyio
async def test_a_session_id_with_no_such_session_signs_unverified(fake_claude, monkeypatch: pytest.MonkeyPatch) -> None:
    """``CLAUDE_CODE_SESSION_ID`` naming a session Claude Code does not have: the message is
    stored unverified and the send says so (issue 18, "Identity"). The send through a real
    server (the identity is its process's); the reading peer's inbox in this process."""
    fake_claude.write_transcript(PEER, "/work/parser", title="Parser rewrite")
    ghost = "eeeeeeee-0000-4000-8000-00000000000e"
    async with agent_link_mcp({"CLAUDE_CODE_SESSION_ID": ghost, "AGENT_LINK_HOST": "claude", "AGENT_LINK_TOOLS": "all"}) as me:
        sent = await me.call("message_agent", {"to": f"claude:{PEER}", "message": "who am I?"})
        assert sent["ok"] is True
        [warning] = [w for w in sent["warnings"] if w["code"] == "sender_unverified"]
        assert warning["details"] == {"address": f"claude:{ghost}", "namedBy": "env", "reason": "no_such_session"}
    for name, value in (("CLAUDE_CODE_SESSION_ID", PEER), ("AGENT_LINK_HOST", "claude"), ("AGENT_LINK_TOOLS", "all")):
        monkeypatch.setenv(name, value)
    peer = App.create()
    try:
        inbox = await call(peer, "read_agent_link_inbox", {})
    finally:
        await peer.aclose()
    [view] = inbox["messages"]
    assert view["from"] == f"claude:{ghost}" and view["fromVerified"] is False
    assert 'fromVerified="false"' in inbox["renderedBlock"]


@pytest.mark.anyio
@pytest.mark.parametrize(("extra", "era", "version", "refused", "reason"), [
    # the channel is wanted: server/discover is refused, the client falls back to initialize,
    # and the gate goes on to Claude Code's own conditions (the test client is not Claude Code)
    ({}, "handshake", "2025-11-25", True, "client_not_claude_code"),
    # no channel: nothing asks for the handshake, so the stateless revision is served
    ({"AGENT_LINK_DISABLE_CHANNEL": "1"}, "stateless", "2026-07-28", False, "channel_disabled"),
])
async def test_a_discover_first_client_gets_the_revision_the_channel_needs(
    fake_claude, extra: dict[str, str], era: str, version: str, refused: bool, reason: str
) -> None:
    env = {"CLAUDE_CODE_SESSION_ID": ME, "AGENT_LINK_HOST": "claude", "AGENT_LINK_TOOLS": "all", **extra}
    async with agent_link_mcp(env, revision="auto") as me:
        assert me.discover_refused is refused
        health = await me.call("agent_link_health", {})
        assert (health["mcp"]["era"], health["mcp"]["protocolVersion"]) == (era, version)
        channel = health["harnesses"]["claude"]["channel"]
        assert channel["protocolVersion"] == version and channel["bridge"]["gate"]["reason"] == reason
        # the bridge started with the server, whatever the revision (it waits for its gate)
        assert channel["bridge"]["running"] is (not extra)


@pytest.mark.anyio
async def test_a_retried_send_with_its_message_id_is_stored_once(app: App) -> None:
    """issue 29: a model that retries after a host tool timeout sends the same messageId; it
    gets the first message back (duplicate), and other content under it is refused."""
    assert SPECS["message_claude_session"].input_schema["properties"]["messageId"]["pattern"]
    key = "01J00000000000000000000001"
    first = await call(app, "message_claude_session", {"sessionId": PEER, "message": "please review", "messageId": key})
    again = await call(app, "message_claude_session", {"sessionId": PEER, "message": "please review", "messageId": key.lower()})
    assert first["messageId"] == again["messageId"] == key and (first["duplicate"], again["duplicate"]) == (False, True)
    changed = await call(app, "message_claude_session", {"sessionId": PEER, "message": "please merge", "messageId": key})
    assert code(changed) == "invalid_arguments" and changed["error"]["details"]["differs"] == ["message"]
    assert app.store.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 1
