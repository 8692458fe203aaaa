"""The Codex tools through a real MCP client session (``python -m agent_link_core mcp``), with no
Codex app-server reachable (autostart off): schemas, annotations, argument rules, every error
path, and the transcript fallback over rollouts written in Codex 0.169.0's layout.

Every result is checked by the SDK client against the tool's declared outputSchema, and the
client checks text content == structuredContent and ``isError == not ok``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from agent_link_testing.mcp_client import AgentLinkClient, agent_link_mcp

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

CODEX_TOOLS = {
    "list_codex_threads", "resolve_codex_thread", "list_loaded_codex_threads", "get_codex_thread",
    "get_codex_sidebar_state", "wait_for_codex_thread", "launch_codex_thread", "archive_codex_thread",
    "message_codex_thread",
}
READ_ONLY = {"list_codex_threads", "resolve_codex_thread", "list_loaded_codex_threads", "get_codex_thread",
             "get_codex_sidebar_state", "wait_for_codex_thread"}
T1 = "01a22a93-0000-7000-8000-000000000001"
T2 = "01a22a93-0000-7000-8000-000000000002"
T3 = "01a22a93-0000-7000-8000-000000000003"
EXEC = "01a22a93-0000-7000-8000-00000000000e"
ARCHIVED = "01a22a93-0000-7000-8000-00000000000a"
UNKNOWN = "01a22a93-0000-7000-8000-0000000000ff"
MINIMAL_ARGS: dict[str, dict[str, Any]] = {
    "list_codex_threads": {}, "resolve_codex_thread": {"query": "x"}, "list_loaded_codex_threads": {},
    "get_codex_thread": {"threadId": T1}, "get_codex_sidebar_state": {}, "wait_for_codex_thread": {"threadId": T1},
    "launch_codex_thread": {}, "archive_codex_thread": {"threadId": T1}, "message_codex_thread": {"threadId": T1, "message": "hi"},
}
OTHER_PLUGINS = "claude roles receipts"


@pytest.fixture
async def alice(isolated_env: Path) -> AsyncIterator[AgentLinkClient]:
    env = {"AGENT_LINK_ADDRESS": "test:alice", "AGENT_LINK_CODEX_AUTOSTART": "0", "AGENT_LINK_DISABLE_PLUGINS": OTHER_PLUGINS}
    async with agent_link_mcp(env) as client:
        yield client


@pytest.fixture
def codex_home(isolated_env: Path, make_rollout: Callable[..., Path]) -> Path:
    home = isolated_env.parent / ".codex"
    make_rollout(home, T1, cwd="/work/alpha", messages=[("user", "Refactor the parser module", None), ("agent", "Parser done", None)],
                 name="parser work")
    make_rollout(home, T2, cwd="/work/beta", messages=[("user", "Write the release notes", None)], lifecycle="task_started")
    make_rollout(home, T3, cwd="/work/alpha", messages=[("user", "Fix the lexer", None)], name="lexer")
    make_rollout(home, EXEC, cwd="/work/alpha", messages=[("user", "exec run", None)], source="exec")
    make_rollout(home, ARCHIVED, cwd="/work/alpha", messages=[("user", "old parser notes", None)], archived=True)
    return home


async def fail(client: AgentLinkClient, name: str, args: dict[str, Any], code: str) -> dict[str, Any]:
    result = await client.call(name, args)
    assert result["ok"] is False and result["error"]["code"] == code, result
    return result["error"]


async def ok(client: AgentLinkClient, name: str, args: dict[str, Any] | None = None, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    result = await client.call(name, args or {}, meta=meta)
    assert result["ok"] is True, result
    return result


async def test_schemas_annotations_and_unknown_arguments(alice: AgentLinkClient) -> None:
    tools = await alice.tools()
    assert CODEX_TOOLS <= set(tools)
    for name in CODEX_TOOLS:
        tool = tools[name]
        Draft202012Validator.check_schema(tool.input_schema)
        Draft202012Validator.check_schema(tool.output_schema)
        assert tool.input_schema["additionalProperties"] is False, name
        assert tool.output_schema["additionalProperties"] is False and "ok" in tool.output_schema["required"], name
        ann = tool.annotations
        assert ann.read_only_hint is (name in READ_ONLY), name
        assert ann.destructive_hint is (name == "archive_codex_thread"), name
        assert ann.open_world_hint is False and tool.description, name
    assert tools["archive_codex_thread"].annotations.idempotent_hint is True
    for name, args in MINIMAL_ARGS.items():
        error = await fail(alice, name, {**args, "bogus": 1}, "invalid_arguments")
        assert [e["path"] for e in error["details"]["errors"]] == ["bogus"], (name, error)
    error = await fail(alice, "list_codex_threads", {"limit": 0}, "invalid_arguments")
    assert error["details"]["errors"][0]["path"] == "limit"
    error = await fail(alice, "message_codex_thread", {"threadId": T1, "message": "x", "mode": "sideways"}, "invalid_arguments")
    assert error["details"]["errors"][0]["path"] == "mode"
    error = await fail(alice, "list_codex_threads", {"searchTerm": "x"}, "invalid_arguments")
    assert error["details"]["removed"] == [{"argument": "searchTerm", "replacement": "query"}]


async def test_no_app_server_errors(alice: AgentLinkClient, codex_home: Path) -> None:
    for name in ("list_loaded_codex_threads", "get_codex_sidebar_state", "launch_codex_thread"):
        error = await fail(alice, name, {}, "codex_unavailable")
        assert error["details"]["reason"] == "autostart-disabled", error
        reports = {r["source"]: r for r in error["details"]["endpoints"]}
        assert reports["control-socket"]["reason"] == "absent"
    error = await fail(alice, "get_codex_thread", {"threadId": UNKNOWN}, "not_found")
    assert error["details"]["id"] == UNKNOWN
    error = await fail(alice, "get_codex_thread", {"threadId": "not an id"}, "invalid_arguments")
    error = await fail(alice, "get_codex_thread", {"threadId": T1, "useLocalFallback": False}, "codex_unavailable")
    # archive: without a thread id the caller must be a Codex thread
    error = await fail(alice, "archive_codex_thread", {}, "invalid_arguments")
    assert error["details"]["errors"][0]["path"] == "threadId"
    # Codex 0.169.0 always keeps a state DB: the local fallback refuses to move files behind it
    (codex_home / "state_5.sqlite").write_bytes(b"")
    error = await fail(alice, "archive_codex_thread", {"threadId": T3}, "unsupported")
    assert error["details"] == {"capability": "local_archive", "reason": "codex_state_db"}
    (codex_home / "state_5.sqlite").unlink()
    moved = await ok(alice, "archive_codex_thread", {"threadId": T3, "reason": "done"})
    assert (moved["status"], moved["action"]) == ("archived", "local_archive_moved")
    assert Path(moved["archive"]["to"]).parent == codex_home / "archived_sessions" and not Path(moved["archive"]["from"]).exists()
    again = await ok(alice, "archive_codex_thread", {"threadId": T3})
    assert again["status"] == "already_archived"


async def test_messages_without_app_server(alice: AgentLinkClient, codex_home: Path) -> None:
    # unknown and archived threads: refused, nothing stored
    error = await fail(alice, "message_codex_thread", {"threadId": UNKNOWN, "message": "hello"}, "not_found")
    error = await fail(alice, "message_codex_thread", {"threadId": f"codex:{ARCHIVED}", "message": "hello"}, "archived")
    assert error["details"] == {"address": f"codex:{ARCHIVED}"}
    # a model change nobody allowed (override policy, docs/behaviour.md §19): refused before storing
    error = await fail(alice, "message_agent", {"to": f"codex:{T1}", "message": "x", "model": "gpt-x"}, "permission_denied")
    assert error["details"]["reason"] == "model_switch_requires_fork_or_opt_in"
    error = await fail(alice, "message_codex_thread", {"threadId": T1, "message": "x", "cwd": "/elsewhere"}, "permission_denied")
    assert error["details"]["reason"] in ("cwd_change_not_permitted", "cwd_outside_workspace")
    assert (await ok(alice, "agent_link_mailbox_inspect"))["messages"] == []
    # a known thread with no app-server: stored and queued, with the reason
    sent = await ok(alice, "message_codex_thread", {"threadId": T1, "message": "hello parser", "anticipation": "reply"})
    assert sent["delivery"] == "queued" and sent["deliveredVia"] is None
    assert sent["target"] == {"threadId": T1, "address": f"codex:{T1}"}
    assert [w["code"] for w in sent["warnings"]] == ["codex_unavailable"]
    [row] = (await ok(alice, "agent_link_mailbox_inspect"))["messages"]
    assert (row["id"], row["to"], row["delivery"]) == (sent["messageId"], f"codex:{T1}", "queued")


async def test_retries_with_a_message_id_send_and_launch_once(alice: AgentLinkClient, codex_home: Path) -> None:
    """issue 29: a model retrying after a host timeout passes the same messageId. The retry
    returns the first message (duplicate); a retried launch starts no second thread (no
    app-server is reachable here, so anything but the stored answer would fail)."""
    tools = await alice.tools()
    for name in ("message_codex_thread", "launch_codex_thread"):
        assert "messageId" in tools[name].input_schema["properties"], name
    key = "01J00000000000000000000005"
    first = await ok(alice, "message_codex_thread", {"threadId": T1, "message": "hello", "messageId": key})
    again = await ok(alice, "message_codex_thread", {"threadId": T1, "message": "hello", "messageId": key})
    assert (first["messageId"], first["duplicate"], again["messageId"], again["duplicate"]) == (key, False, key, True)
    error = await fail(alice, "message_codex_thread", {"threadId": T2, "message": "hello", "messageId": key}, "invalid_arguments")
    assert error["details"]["differs"] == ["to"]
    relaunched = await ok(alice, "launch_codex_thread", {"message": "hello", "messageId": key})
    assert (relaunched["duplicate"], relaunched["threadId"], relaunched["messageId"]) == (True, T1, key)
    error = await fail(alice, "launch_codex_thread", {"message": "bye", "messageId": key}, "invalid_arguments")
    assert error["details"]["differs"] == ["message"]
    error = await fail(alice, "launch_codex_thread", {"messageId": key}, "invalid_arguments")
    assert error["details"]["errors"][0] == {"path": "messageId", "rule": "requires_message", "expected": "a message to label"}
    assert len((await ok(alice, "agent_link_mailbox_inspect"))["messages"]) == 1


async def test_transcript_fallback_listing(alice: AgentLinkClient, codex_home: Path) -> None:
    listed = await ok(alice, "list_codex_threads")
    assert listed["source"] == "local-jsonl-fallback" and listed["appServerError"]["code"] == "codex_unavailable"
    ids = {t["id"] for t in listed["data"]}
    assert ids == {T1, T2, T3}  # exec runs and archived threads hidden by default
    by_id = {t["id"]: t for t in listed["data"]}
    assert by_id[T1]["name"] == "parser work" and by_id[T1]["preview"] == "Refactor the parser module"
    assert by_id[T1]["status"] == "idle" and by_id[T2]["status"] == "active" and by_id[T1]["localOnly"] is True
    assert listed["complete"] is True and listed["hasMore"] is False and "exec" in listed["filteredSourceKinds"]
    first = await ok(alice, "list_codex_threads", {"limit": 2})
    assert len(first["data"]) == 2 and first["hasMore"] is True and first["complete"] is False
    rest = await ok(alice, "list_codex_threads", {"limit": 2, "cursor": first["nextCursor"]})
    assert {t["id"] for t in first["data"] + rest["data"]} == ids and rest["hasMore"] is False and rest["nextCursor"] is None
    error = await fail(alice, "list_codex_threads", {"cursor": "next"}, "invalid_arguments")
    assert [e["path"] for e in error["details"]["errors"]] == ["cursor"]
    assert {t["id"] for t in (await ok(alice, "list_codex_threads", {"includeExec": True}))["data"]} == {T1, T2, T3, EXEC}
    assert {t["id"] for t in (await ok(alice, "list_codex_threads", {"cwd": "/work/beta"}))["data"]} == {T2}
    assert {t["id"] for t in (await ok(alice, "list_codex_threads", {"archiveScope": "all", "query": "parser"}))["data"]} == {T1, ARCHIVED}
    deprecated = await ok(alice, "list_codex_threads", {"archived": True})
    assert {t["id"] for t in deprecated["data"]} == {ARCHIVED}
    assert deprecated["warnings"][0]["code"] == "deprecated_argument"

    resolved = await ok(alice, "resolve_codex_thread", {"query": "lexer"})
    assert resolved["status"] == "resolved" and resolved["best"]["id"] == T3
    assert "name:exact" in resolved["best"]["matchReasons"]
    assert (await ok(alice, "resolve_codex_thread", {"query": f"codex:{T2}"}))["best"]["id"] == T2
    assert (await ok(alice, "resolve_codex_thread", {"query": "zebra crossing"}))["status"] == "not_found"
    tie = await ok(alice, "resolve_codex_thread", {"query": "/work/alpha", "archiveScope": "active"})
    assert tie["status"] == "ambiguous" and tie["best"] is None and tie["selection"]["tiedCount"] == 3  # T1, T3 and the exec run

    got = await ok(alice, "get_codex_thread", {"threadId": T1, "recentItems": 5})
    assert got["source"] == "local-jsonl-fallback" and got["thread"]["cwd"] == "/work/alpha"
    assert [(i["type"], i["text"]) for i in got["recentItems"]] == [("userMessage", "Refactor the parser module"), ("agentMessage", "Parser done")]

    idle = await ok(alice, "wait_for_codex_thread", {"threadId": T1})
    assert (idle["outcome"], idle["timedOut"], idle["finalResponse"]) == ("idle", False, "Parser done")
    assert idle["waitState"] == {"threadStatus": "idle", "latestTurnId": None, "latestTurnStatus": None, "activeTurnIds": [],
                                 "sawActiveTurn": False, "polls": 1, "continueWaiting": False, "statusSource": "local-jsonl-fallback"}
    assert idle["thread"]["id"] == T1 and idle["thread"]["name"] == "parser work" and idle["thread"]["loaded"] is None
    assert [(i["type"], i["text"]) for i in idle["thread"]["recentItems"]] == [("userMessage", "Refactor the parser module"),
                                                                               ("agentMessage", "Parser done")]
    one = await ok(alice, "wait_for_codex_thread", {"threadId": T1, "recentItems": 1})
    assert [i["text"] for i in one["thread"]["recentItems"]] == ["Parser done"]
    assert "deprecated_argument" not in [w["code"] for w in one.get("warnings", [])]
    assert (await ok(alice, "wait_for_codex_thread", {"threadId": T1, "recentItems": 0}))["thread"]["recentItems"] == []
    busy = await ok(alice, "wait_for_codex_thread", {"threadId": T2, "timeoutMs": 300, "pollIntervalMs": 250})
    assert busy["outcome"] == "timeout" and busy["timedOut"] is True and busy["waitedMs"] >= 300
    assert busy["waitState"]["threadStatus"] == "active" and busy["waitState"]["continueWaiting"] is True
    assert busy["waitState"]["sawActiveTurn"] is True and busy["waitState"]["polls"] >= 2
    assert [i["text"] for i in busy["thread"]["recentItems"]] == ["Write the release notes"]
    for bad in ({"threadId": T1, "recentItems": 101}, {"threadId": T1, "recentItems": -1}, {"threadId": T1, "recentItems": "many"}):
        await fail(alice, "wait_for_codex_thread", bad, "invalid_arguments")
    await fail(alice, "wait_for_codex_thread", {"threadId": UNKNOWN}, "not_found")

    agents = await ok(alice, "list_agents", {"harness": "codex"})
    # every source kind (issue 18): the exec run is an agent too, and the listing is complete
    assert {s["address"] for s in agents["sessions"]} == {f"codex:{T1}", f"codex:{T2}", f"codex:{T3}", f"codex:{EXEC}"}
    assert agents["providers"]["codex"]["source"] == "local-jsonl-fallback" and agents["providers"]["codex"]["available"] is True
    assert agents["complete"] is True
    found = await ok(alice, "resolve_agent", {"query": T3})
    assert found["status"] == "resolved" and found["best"]["address"] == f"codex:{T3}"


async def test_caller_identity_from_meta_and_health(alice: AgentLinkClient) -> None:
    meta = {"threadId": T1, "callId": "call_7", "x-codex-turn-metadata": {"turn_id": "turn-9", "thread_id": T1}}
    health = await ok(alice, "agent_link_health", {"includeCallerContext": True}, meta=meta)
    assert (health["address"], health["addressSource"]) == (f"codex:{T1}", "runtime_context")
    codex = health["harnesses"]["codex"]
    assert codex["autoStart"] is False and codex["promptHook"]["trust"] == "unknown"
    assert codex["desktopPush"]["rolloutChecks"] == {"checked": 0, "held": 0, "skipped": {}}
    assert {c["source"] for c in codex["endpoints"]["candidates"]} == {"control-socket"}
    # without _meta the configured address is used (no CODEX_THREAD_ID in an MCP server's env)
    plain = await ok(alice, "agent_link_health")
    assert plain["address"] == "test:alice"


def test_sidebar_membership_needs_the_renderer_model() -> None:
    from agent_link_codex.thread_reads import sidebar_membership

    state = {"authority": "rendererSidebarModel",
             "sections": [{"key": "pinned", "itemKeys": [f"local:{T1}", "remote:abc"]},
                          {"key": "background-threads", "itemKeys": [f"local:{T2}"]}]}
    assert sidebar_membership(state, [T1, T2, T3]) == {T1: "in_sidebar_model", T2: "background_only", T3: "background_only"}
    for untrusted in ({**state, "authority": "cache"}, {"authority": None, "unsupported": []}, None):
        assert sidebar_membership(untrusted, [T1, T2]) == {T1: "unknown", T2: "unknown"}


def test_a_transcript_search_that_cannot_read_says_so(codex_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_link_codex import rollouts
    from agent_link_codex.threads import source_kinds
    from agent_link_codex.thread_reads import _local_matches

    harness = type("H", (), {"env": {"CODEX_HOME": str(codex_home)}})()
    kinds = source_kinds(False, False)
    added, info = _local_matches(harness, "active", None, kinds, "parser", {T3})  # type: ignore[arg-type]
    assert [t["id"] for t in added] == [T1] and (info["checked"], info["addedIds"]) == (True, [T1])
    assert _local_matches(harness, "active", None, kinds, "parser", {T1})[1]["addedCount"] == 0  # type: ignore[arg-type]

    def unreadable(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(rollouts, "summary", unreadable)
    added, info = _local_matches(harness, "active", None, kinds, "parser", set())  # type: ignore[arg-type]
    assert added == [] and info == {"checked": False, "error": "PermissionError: Permission denied"}
