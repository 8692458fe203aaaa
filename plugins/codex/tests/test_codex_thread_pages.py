"""``list_codex_threads`` pages (issue 18, "Listings that say they are complete").

A scripted app-server holds 600 threads: a listing with ``limit: 200`` is a page that says so
(``complete: false``, ``hasMore``), its own ``nextCursor`` is accepted and walks the rest,
only the last page of all says ``hasMore: false``, and the source kinds a listing leaves out
are named. Through a real MCP client session (``agent-link mcp``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_link_testing.mcp_client import agent_link_mcp

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]
COUNT = 600
IDS = [f"01a22a93-0000-7000-8000-{n:012d}" for n in range(COUNT)]


def thread(tid: str, n: int) -> dict[str, Any]:
    return {"id": tid, "name": f"thread {n}", "cwd": "/work/proj", "status": {"type": "notLoaded"}, "source": "vscode",
            "recencyAt": 1_800_000_000 - n, "path": f"/codex/sessions/2026/11/30/rollout-x-{tid}.jsonl"}


def lister(count: int) -> Any:
    """A ``thread/list`` handler over the first ``count`` of :data:`IDS`, newest first, with
    Codex's opaque cursor."""
    def thread_list(method: str, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("archived"):
            return {"data": [], "nextCursor": None}
        start = int(params.get("cursor") or 0)
        end = min(start + params["limit"], count)
        return {"data": [thread(IDS[n], n) for n in range(start, end)], "nextCursor": str(end) if end < count else None}
    return thread_list


async def test_a_page_says_it_is_a_page_and_its_cursor_works(short_tmp: Path, mini_server: Any) -> None:
    handlers = {"thread/list": lister(COUNT), "thread/loaded/list": lambda m, p: {"data": [], "nextCursor": None}}
    async with mini_server(short_tmp / "a.sock", handlers, codex_home="/homes/a") as server:
        env = {"AGENT_LINK_ADDRESS": "test:alice", "AGENT_LINK_CODEX_AUTOSTART": "0", "AGENT_LINK_CODEX_SOCK": str(server.path),
               "AGENT_LINK_DISABLE_PLUGINS": "claude roles receipts"}
        async with agent_link_mcp(env) as client:
            seen: list[str] = []
            cursor = None
            pages = []
            while True:
                page = await client.call("list_codex_threads", {"limit": 200, **({"cursor": cursor} if cursor else {})})
                assert page["ok"] is True and page["source"] == "app-server", page
                pages.append(page)
                seen += [t["id"] for t in page["data"]]
                cursor = page["nextCursor"]
                if cursor is None:
                    break
            assert [len(p["data"]) for p in pages] == [200, 200, 200]
            assert [p["hasMore"] for p in pages] == [True, True, False]
            assert all(p["complete"] is False for p in pages)  # each is one page of a larger listing
            assert seen == IDS  # every thread once, newest first
            assert pages[0]["filteredSourceKinds"] and "exec" in pages[0]["filteredSourceKinds"]
            everything = await client.call("list_codex_threads", {"limit": 200, "includeExec": True, "includeSubagents": True,
                                                                  "cursor": "400"})
            assert everything["filteredSourceKinds"] == [] and everything["hasMore"] is False

            for bad in ("abc", "-1", "1e3", "999999"):
                error = await client.call("list_codex_threads", {"cursor": bad})
                assert error["ok"] is False and error["error"]["code"] == "invalid_arguments", error
                assert [e["path"] for e in error["error"]["details"]["errors"]] == ["cursor"]


async def test_a_listing_that_holds_everything_is_complete(short_tmp: Path, mini_server: Any) -> None:
    handlers = {"thread/list": lister(COUNT), "thread/loaded/list": lambda m, p: {"data": [], "nextCursor": None}}
    async with mini_server(short_tmp / "a.sock", handlers, codex_home="/homes/a") as server:
        env = {"AGENT_LINK_ADDRESS": "test:alice", "AGENT_LINK_CODEX_AUTOSTART": "0", "AGENT_LINK_CODEX_SOCK": str(server.path),
               "AGENT_LINK_DISABLE_PLUGINS": "claude roles receipts"}
        async with agent_link_mcp(env) as client:
            # limit 200 from offset 400 reaches the end, but a later page is not the whole listing
            tail = await client.call("list_codex_threads", {"limit": 200, "cursor": "400"})
            assert tail["hasMore"] is False and tail["complete"] is False and tail["nextCursor"] is None
            server.handlers["thread/list"] = lister(150)
            whole = await client.call("list_codex_threads", {"limit": 200})
            assert len(whole["data"]) == 150 and whole["complete"] is True and whole["hasMore"] is False
