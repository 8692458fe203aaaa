"""Every Codex tool through a real MCP client session against a REAL Codex app-server (the pinned
Codex CLI, stub model): launch, list, resolve, read, wait, loaded, sidebar, message, archive."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_link_testing.codex_host import CodexAppServer
from agent_link_testing.mcp_client import agent_link_mcp
from agent_link_testing.responses_stub import ResponsesStub, text

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(120)]

WAIT_S = 15.0


@pytest.fixture
def host(tmp_path: Path) -> Iterator[tuple[ResponsesStub, CodexAppServer]]:
    with ResponsesStub() as stub, CodexAppServer(stub.base_url, root=tmp_path / "codex") as server:
        yield stub, server


async def test_thread_tools_against_the_real_app_server(host: tuple[ResponsesStub, CodexAppServer]) -> None:
    stub, server = host
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

        health = await ok("agent_link_health")
        codex = health["harnesses"]["codex"]
        assert [c["source"] for c in codex["connections"]] == ["env-sock"] and codex["promptHook"]["trust"] == "not_installed"
