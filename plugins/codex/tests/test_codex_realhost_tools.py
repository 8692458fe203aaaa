"""Every Codex tool through a real MCP client session against a REAL Codex app-server (the pinned
Codex CLI, stub model): launch, list, resolve, read, wait, loaded, sidebar, message, archive."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_link_testing.codex_host import CodexAppServer
from agent_link_testing.mcp_client import agent_link_mcp
from agent_link_testing.responses_stub import ResponsesStub, function_call, text

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(120)]

WAIT_S = 15.0


async def test_thread_tools_against_the_real_app_server(stub: ResponsesStub, host: CodexAppServer) -> None:
    server = host
    env = {"AGENT_LINK_ADDRESS": "test:alice", "AGENT_LINK_CODEX_SOCK": str(server.socket_path), "CODEX_HOME": str(server.codex_home),
           "AGENT_LINK_CODEX_AUTOSTART": "0", "AGENT_LINK_DISABLE_PLUGINS": "claude roles receipts"}
    async with agent_link_mcp(env) as client:

        async def ok(name: str, args: dict | None = None) -> dict:
            result = await client.call(name, args or {})
            assert result["ok"], (name, result)
            return result

        stub.enqueue(text("launched and answered"))
        launched = await ok("launch_codex_thread", {"name": "release helper", "message": "Draft the release notes", "anticipation": "reply",
                                                    "cwd": str(server.workdir)})
        tid = launched["threadId"]
        assert launched["action"] == "started_thread+named_thread+started_turn" and launched["delivery"] == "delivered"
        assert launched["deliveredVia"] == "codex-turn" and launched["thread"]["name"] == "release helper"
        await asyncio.to_thread(stub.wait_for, lambda r: r.contains(launched["messageId"]), WAIT_S)

        waited = await ok("wait_for_codex_thread", {"threadId": tid, "timeoutMs": 15000, "pollIntervalMs": 250})
        assert waited["outcome"] in ("turn_completed", "idle") and waited["finalResponse"] == "launched and answered"
        assert waited["source"] == "app-server"

        listed = await ok("list_codex_threads")
        [view] = [t for t in listed["data"] if t["id"] == tid]
        assert listed["source"] == "app-server" and listed["complete"] is True
        assert (view["name"], view["source"], view["loaded"], view["archived"]) == ("release helper", "vscode", True, False)
        resolved = await ok("resolve_codex_thread", {"query": "release helper"})
        assert resolved["status"] == "resolved" and resolved["best"]["id"] == tid

        got = await ok("get_codex_thread", {"threadId": f"codex:{tid}", "recentItems": 10, "includeTurns": True})
        kinds = [i["type"] for i in got["recentItems"]]
        assert kinds == ["userMessage", "agentMessage"] and got["recentItems"][0]["clientId"] == launched["messageId"]
        assert len(got["turns"]) == 1 and got["thread"]["cwd"] == str(server.workdir)

        loaded = await ok("list_loaded_codex_threads", {"threadId": tid})
        assert loaded["lookup"]["loaded"] is True and tid in loaded["threadIds"]
        sidebar = await ok("get_codex_sidebar_state", {})  # a plain app-server has no sidebar: said, not an error
        assert sidebar["sidebarState"]["authority"] is None
        assert [u["method"] for u in sidebar["sidebarState"]["unsupported"]] == ["desktop/sidebar/state/read"]

        sent = await ok("message_codex_thread", {"threadId": tid, "message": "One more thing", "anticipation": "fyi"})
        assert (sent["delivery"], sent["deliveredVia"], sent["action"]) == ("delivered", "codex-turn", "started_turn")
        assert sent["target"]["address"] == f"codex:{tid}" and sent["evidence"]["clientId"] == sent["messageId"]

        agents = await ok("list_agents", {"harness": "codex"})
        [agent] = [s for s in agents["sessions"] if s["id"] == tid]
        assert agent["receive"] == {"push": "codex-turn", "nudge": "codex-hook", "pull": True} and agent["title"] == "release helper"

        await ok("wait_for_codex_thread", {"threadId": tid, "timeoutMs": 15000, "pollIntervalMs": 250})
        archived = await ok("archive_codex_thread", {"threadId": tid, "reason": "done"})
        assert (archived["status"], archived["action"]) == ("archived", "app_server_archive")
        again = await ok("archive_codex_thread", {"threadId": tid})
        assert again["status"] == "already_archived"
        refused = await client.call("message_codex_thread", {"threadId": tid, "message": "too late"})
        assert refused["ok"] is False and refused["error"]["code"] == "archived"
        scope = await ok("list_codex_threads", {"archiveScope": "archived"})
        assert [t["id"] for t in scope["data"]] == [tid] and scope["data"][0]["archived"] is True

        blank = await ok("launch_codex_thread", {})
        assert blank["action"] == "started_thread+named_thread" and blank["thread"]["name"] == "launched by agent-link"
        assert blank["messageId"] is None
        assert blank["gui"] == {"opened": False, "attempted": False, "deepLink": f"codex://threads/{blank['threadId']}"}
        assert (await ok("get_codex_thread", {"threadId": blank["threadId"], "recentItems": 0}))["thread"]["loaded"] is True
        # A blank thread with a name is found by that name (thread/list leaves a thread with no
        # turn out), by every resolver, and a bare id reaches it
        named = await ok("launch_codex_thread", {"name": "blank helper", "cwd": str(server.workdir)})
        bid = named["threadId"]
        for tool, args in (("resolve_codex_thread", {"query": "blank helper"}), ("resolve_agent", {"query": "blank helper"}),
                           ("resolve_project_orchestrator", {"query": "blank helper"})):
            found = await ok(tool, args)
            assert found["status"] == "resolved", (tool, found)
            assert (found.get("threadId") or found["best"]["id"]) == bid, (tool, found)
        stub.enqueue(text("blank thread answered"))
        reached = await ok("message_agent", {"to": bid, "message": "Your first task", "anticipation": "fyi"})
        assert reached["to"] == f"codex:{bid}" and reached["delivery"] == "delivered", reached

        health = await ok("agent_link_health")
        codex = health["harnesses"]["codex"]
        assert [c["source"] for c in codex["connections"]] == ["env-sock"] and codex["promptHook"]["trust"] == "not_installed"


async def test_wait_for_codex_thread_sees_the_turn_run_and_end(stub: ResponsesStub, host: CodexAppServer) -> None:
    """A turn held open at the stub model: the wait sees it running (waitState), then ends with
    turn_completed once the model answers, and returns the thread with its newest items."""
    server = host
    env = {"AGENT_LINK_ADDRESS": "test:alice", "AGENT_LINK_CODEX_SOCK": str(server.socket_path), "CODEX_HOME": str(server.codex_home),
           "AGENT_LINK_CODEX_AUTOSTART": "0", "AGENT_LINK_DISABLE_PLUGINS": "claude roles receipts", "AGENT_LINK_WAIT_PROGRESS_MS": "1000"}
    async with agent_link_mcp(env) as client:
        hold = stub.hold(timeout_s=60)
        stub.enqueue(text("held answer", hold=hold))
        launched = await client.call("launch_codex_thread", {"message": "Take your time", "cwd": str(server.workdir)})
        assert launched["ok"], launched
        tid = launched["threadId"]
        assert await asyncio.to_thread(hold.wait_arrived, WAIT_S), "the model request never reached the stub"

        short = await client.call("wait_for_codex_thread", {"threadId": tid, "timeoutMs": 500, "pollIntervalMs": 250, "recentItems": 5})
        assert short["ok"] and short["outcome"] == "timeout", short
        state = short["waitState"]
        assert (state["threadStatus"], state["latestTurnStatus"], state["continueWaiting"]) == ("active", "inProgress", True)
        assert state["activeTurnIds"] == [state["latestTurnId"]] and state["statusSource"] == "app-server"
        assert short["thread"]["id"] == tid and short["thread"]["loaded"] is True
        assert [i["clientId"] for i in short["thread"]["recentItems"] if i["type"] == "userMessage"] == [launched["messageId"]]

        # A progress notification comes only after a read that found the turn still running, so
        # releasing the model's answer then makes the wait see the turn both running and ended.
        async def release_on_progress(progress: float, total: float | None, message: str | None) -> None:
            hold.release()

        answer = await client.session.call_tool("wait_for_codex_thread", {"threadId": tid, "timeoutMs": 45000, "pollIntervalMs": 250},
                                                 read_timeout_seconds=60, progress_callback=release_on_progress)
        done = json.loads(answer.content[0].text)
        assert done["ok"] and done["outcome"] == "turn_completed", done
        assert done["finalResponse"] == "held answer" and done["turn"]["turnId"] == state["latestTurnId"]
        assert done["waitState"]["sawActiveTurn"] is True and done["waitState"]["activeTurnIds"] == [state["latestTurnId"]]
        assert done["waitState"]["threadStatus"] == "idle" and done["waitState"]["latestTurnStatus"] == "completed"
        assert [i["type"] for i in done["thread"]["recentItems"]] == ["userMessage", "agentMessage"]
        assert done["thread"]["recentItems"][-1]["text"] == "held answer"


async def test_loaded_threads_list_a_spawned_sub_agent_under_its_parent(tmp_path: Path) -> None:
    """The stub model has the parent call Codex's own spawn_agent tool: the sub-agent thread is
    loaded too, and list_loaded_codex_threads names its parent (a plain app-server has no
    sidebar, so every membership is unknown and the sub-agent counts as not shown)."""
    with ResponsesStub(default=text("done")) as stub, CodexAppServer(stub.base_url, root=tmp_path / "codex") as server:
        env = {"AGENT_LINK_ADDRESS": "test:alice", "AGENT_LINK_CODEX_SOCK": str(server.socket_path),
               "CODEX_HOME": str(server.codex_home), "AGENT_LINK_CODEX_AUTOSTART": "0",
               "AGENT_LINK_DISABLE_PLUGINS": "claude roles receipts"}
        async with agent_link_mcp(env) as client:
            stub.enqueue(function_call("spawn_agent", {"message": "count the files"}, namespace="multi_agent_v1"))
            launched = await client.call("launch_codex_thread", {"message": "Split the work", "cwd": str(server.workdir)})
            parent = launched["threadId"]
            sub_request = await asyncio.to_thread(stub.wait_for, lambda r: r.thread_id not in (None, parent), WAIT_S)
            child = sub_request.thread_id
            assert "count the files" in sub_request.user_texts()

            loaded = await client.call("list_loaded_codex_threads", {})
            assert loaded["ok"], loaded
            by_id = {e["threadId"]: e for e in loaded["data"]}
            assert set(by_id) == {parent, child}
            assert (by_id[parent]["source"], by_id[parent]["parentThreadId"]) == ("vscode", None)
            assert (by_id[child]["source"], by_id[child]["parentThreadId"]) == ("subAgent", parent)
            assert loaded["sidebarMembershipByThreadId"] == {parent: "unknown", child: "unknown"}
            assert loaded["sidebarState"]["authority"] is None and loaded["sidebarStateError"] is None
            assert "rendererSidebarModel" in loaded["sidebarMembershipSemantics"]
            registry = loaded["subagentRegistry"]
            assert [s["threadId"] for s in registry["loadedSubagents"]] == [child]
            assert registry["loadedSubagents"][0]["address"] == f"codex:{child}"
            assert registry["byParentThreadId"] == {parent: [child]}

            paged = await client.call("list_loaded_codex_threads", {"limit": 1})
            assert paged["hasMore"] is True and len(paged["data"]) == 1
            assert set(paged["sidebarMembershipByThreadId"]) == {paged["data"][0]["threadId"]}


async def test_a_search_is_supplemented_from_transcripts_the_app_server_does_not_find(
        stub: ResponsesStub, host: CodexAppServer, make_rollout: Callable[..., Path]) -> None:
    """Codex's own search (thread/list searchTerm, Codex 0.171.0) does not find a thread known
    only from its transcript file, although a plain listing shows it: list_codex_threads adds
    such transcript matches and says so."""
    server = host
    old = "01a22a93-0000-7000-8000-0000000000c1"
    env = {"AGENT_LINK_ADDRESS": "test:alice", "AGENT_LINK_CODEX_SOCK": str(server.socket_path), "CODEX_HOME": str(server.codex_home),
           "AGENT_LINK_CODEX_AUTOSTART": "0", "AGENT_LINK_DISABLE_PLUGINS": "claude roles receipts"}
    async with agent_link_mcp(env) as client:
        stub.enqueue(text("planned"))
        launched = await client.call("launch_codex_thread", {"message": "zebra crossing plan", "cwd": str(server.workdir)})
        fresh = launched["threadId"]
        await client.call("wait_for_codex_thread", {"threadId": fresh, "timeoutMs": 30000, "pollIntervalMs": 250})
        make_rollout(server.codex_home, old, cwd=str(server.workdir), messages=[("user", "zebra notes from long ago", None)])

        only_app_server = await client.call("list_codex_threads", {"query": "zebra", "useLocalFallback": False})
        assert [t["id"] for t in only_app_server["data"]] == [fresh]  # what Codex's search finds by itself
        assert only_app_server["source"] == "app-server" and only_app_server["localSearchSupplement"] is None

        merged = await client.call("list_codex_threads", {"query": "zebra"})
        assert merged["ok"] and merged["source"] == "app-server+local-jsonl-search", merged
        assert {t["id"] for t in merged["data"]} == {fresh, old}
        supplement = merged["localSearchSupplement"]
        assert (supplement["checked"], supplement["addedCount"], supplement["addedIds"]) == (True, 1, [old])
        assert supplement["scannedFiles"] >= 2
        [added] = [t for t in merged["data"] if t["id"] == old]
        assert added["localOnly"] is True and added["loaded"] is None
        first = await client.call("list_codex_threads", {"query": "zebra", "limit": 1})
        rest = await client.call("list_codex_threads", {"query": "zebra", "limit": 1, "cursor": first["nextCursor"]})
        assert {t["id"] for t in first["data"] + rest["data"]} == {fresh, old} and rest["hasMore"] is False

        plain = await client.call("list_codex_threads", {})
        assert plain["localSearchSupplement"] is None and plain["source"] == "app-server"

        # resolve lists every thread (no search term), so the app-server's own listing has it
        resolved = await client.call("resolve_codex_thread", {"query": "zebra notes"})
        assert resolved["status"] == "resolved" and resolved["best"]["id"] == old, resolved
