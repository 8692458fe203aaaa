"""``list_loaded_codex_threads`` and ``get_codex_sidebar_state`` against a scripted app-server
that answers ``desktop/sidebar/state/read`` (as only the Codex desktop app's own app-server
does), through a real MCP client session (``agent-link mcp``).

The sidebar answer's shape (``authority``, ``sections[].key``, ``itemKeys`` of
``local:<threadId>``) is the one the original Agent Link read; no desktop app was at hand to
confirm it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_link_testing.mcp_client import agent_link_mcp

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]
PARENT = "01a22a93-0000-7000-8000-0000000000a1"
SHOWN_SUB = "01a22a93-0000-7000-8000-0000000000b1"
HIDDEN_SUB = "01a22a93-0000-7000-8000-0000000000b2"
BACKGROUND = "01a22a93-0000-7000-8000-0000000000c1"
THREADS = {
    PARENT: {"source": "vscode"},
    SHOWN_SUB: {"source": {"subAgent": {"thread_spawn": {"parent_thread_id": PARENT, "depth": 1}}}, "parentThreadId": PARENT,
                "agentNickname": "Ada", "agentRole": "explorer"},
    HIDDEN_SUB: {"source": {"subAgent": {"thread_spawn": {"parent_thread_id": PARENT, "depth": 1}}}, "parentThreadId": PARENT,
                 "agentNickname": "Bo", "agentRole": None},
    BACKGROUND: {"source": "vscode"},
}
SIDEBAR = {"authority": "rendererSidebarModel",
           "sections": [{"key": "recent", "itemKeys": [f"local:{PARENT}", f"local:{SHOWN_SUB}"]},
                        {"key": "background-threads", "itemKeys": [f"local:{BACKGROUND}"]}]}


def handlers(sidebar: Any) -> dict[str, Any]:
    def read(method: str, params: dict[str, Any]) -> dict[str, Any]:
        tid = params["threadId"]
        return {"thread": {"id": tid, "status": {"type": "idle"}, "cwd": "/work", **THREADS[tid]}}

    return {"thread/loaded/list": lambda m, p: {"data": sorted(THREADS), "nextCursor": None}, "thread/read": read,
            "desktop/sidebar/state/read": sidebar}


def env(path: Path) -> dict[str, str]:
    return {"AGENT_LINK_ADDRESS": "test:alice", "AGENT_LINK_CODEX_AUTOSTART": "0", "AGENT_LINK_CODEX_SOCK": str(path),
            "AGENT_LINK_DISABLE_PLUGINS": "claude roles receipts"}


async def test_a_desktop_sidebar_decides_membership_and_the_sub_agent_registry(short_tmp: Path, mini_server: Any) -> None:
    async with mini_server(short_tmp / "d.sock", handlers(lambda m, p: SIDEBAR)) as server, agent_link_mcp(env(server.path)) as client:
        loaded = await client.call("list_loaded_codex_threads", {})
        assert loaded["ok"] and loaded["sidebarState"] == SIDEBAR and loaded["sidebarStateError"] is None, loaded
        assert loaded["sidebarMembershipByThreadId"] == {PARENT: "in_sidebar_model", SHOWN_SUB: "in_sidebar_model",
                                                         HIDDEN_SUB: "background_only", BACKGROUND: "background_only"}
        by_id = {e["threadId"]: e for e in loaded["data"]}
        assert (by_id[HIDDEN_SUB]["source"], by_id[HIDDEN_SUB]["agentNickname"]) == ("subAgent", "Bo")
        registry = loaded["subagentRegistry"]
        assert registry["loadedSubagents"] == [{"threadId": HIDDEN_SUB, "address": f"codex:{HIDDEN_SUB}", "parentThreadId": PARENT,
                                                "agentNickname": "Bo", "agentRole": None, "sidebarMembership": "background_only"}]
        assert registry["byParentThreadId"] == {PARENT: [HIDDEN_SUB]}
        state = await client.call("get_codex_sidebar_state", {})
        assert state["ok"] and state["sidebarState"] == SIDEBAR and state["endpoint"] == loaded["endpoints"][0]


async def test_a_failing_sidebar_read_is_reported_not_fatal_to_the_listing(short_tmp: Path, mini_server: Any, mini_error: Any) -> None:
    def broken(method: str, params: dict[str, Any]) -> Any:
        raise mini_error("sidebar renderer not ready", code=-32000)

    async with mini_server(short_tmp / "e.sock", handlers(broken)) as server, agent_link_mcp(env(server.path)) as client:
        loaded = await client.call("list_loaded_codex_threads", {})
        assert loaded["ok"] and loaded["sidebarState"] is None, loaded
        assert loaded["sidebarStateError"]["code"] == "upstream_error" and "not ready" in loaded["sidebarStateError"]["message"]
        assert set(loaded["sidebarMembershipByThreadId"].values()) == {"unknown"}
        assert [s["threadId"] for s in loaded["subagentRegistry"]["loadedSubagents"]] == [SHOWN_SUB, HIDDEN_SUB]
        # the tool that only reads the sidebar fails with the same error
        failed = await client.call("get_codex_sidebar_state", {})
        assert failed["ok"] is False and failed["error"]["code"] == "upstream_error"
