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

from agent_link_core.app import App
from agent_link_testing.mcp_client import agent_link_mcp
from agent_link_testing.tool_app import call_tool

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


async def test_a_listing_that_holds_everything_is_complete(short_tmp: Path, mini_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same tool as the test above, in this process (that test pages through a real server)."""
    handlers = {"thread/list": lister(COUNT), "thread/loaded/list": lambda m, p: {"data": [], "nextCursor": None}}
    async with mini_server(short_tmp / "a.sock", handlers, codex_home="/homes/a") as server:
        env = {"AGENT_LINK_ADDRESS": "test:alice", "AGENT_LINK_CODEX_AUTOSTART": "0", "AGENT_LINK_CODEX_SOCK": str(server.path),
               "AGENT_LINK_DISABLE_PLUGINS": "claude roles receipts"}
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        app = App.create()
        try:
            # limit 200 from offset 400 reaches the end, but a later page is not the whole listing
            tail = await call_tool(app, "list_codex_threads", limit=200, cursor="400")
            assert tail["hasMore"] is False and tail["complete"] is False and tail["nextCursor"] is None
            server.handlers["thread/list"] = lister(150)
            whole = await call_tool(app, "list_codex_threads", limit=200)
            assert len(whole["data"]) == 150 and whole["complete"] is True and whole["hasMore"] is False
        finally:
            await app.aclose()


def mixed_lister(count: int) -> Any:
    """:func:`lister` where every tenth thread was started by ``codex exec``."""
    inner = lister(count)

    def thread_list(method: str, params: dict[str, Any]) -> dict[str, Any]:
        page = inner(method, params)
        for t in page["data"]:
            if IDS.index(t["id"]) % 10 == 0:
                t["source"] = "exec"
        return page
    return thread_list


async def test_list_agents_and_the_sessions_command_page_with_working_cursors(short_tmp: Path, mini_server: Any) -> None:
    import asyncio
    import json
    import subprocess
    import sys

    handlers = {"thread/list": mixed_lister(COUNT), "thread/loaded/list": lambda m, p: {"data": [], "nextCursor": None}}
    async with mini_server(short_tmp / "a.sock", handlers, codex_home="/homes/a") as server:
        env = {"AGENT_LINK_ADDRESS": "test:alice", "AGENT_LINK_CODEX_AUTOSTART": "0", "AGENT_LINK_CODEX_SOCK": str(server.path),
               "AGENT_LINK_DISABLE_PLUGINS": "claude roles receipts"}
        async with agent_link_mcp(env) as client:
            pages, cursor = [], None
            while True:
                page = await client.call("list_agents", {"harness": "codex", "limit": 200, **({"cursor": cursor} if cursor else {})})
                assert page["ok"] is True, page
                pages.append(page)
                cursor = page["nextCursor"]
                if cursor is None:
                    break
            assert [len(p["sessions"]) for p in pages] == [200, 200, 200]
            assert [p["hasMore"] for p in pages] == [True, True, False]
            assert all(p["complete"] is False for p in pages)  # each is one page of a larger listing
            # every thread once, newest first, codex exec runs included
            assert [s["id"] for p in pages for s in p["sessions"]] == IDS
            assert pages[0]["filters"] == {"harness": "codex", "loaded": None, "surface": None, "includeArchived": False}
            assert pages[0]["filteredOut"] == {"archived": 0}
            # Codex answers in whole thread/list pages; the harness keeps to the depth it was asked for
            problems = (await client.call("agent_link_health"))["plugins"]["problems"]
            assert not [p for p in problems if p["plugin"] == "codex"], problems

            # a filter that leaves everything out still pages on through what the source holds
            running, cursor = [], None
            while True:
                page = await client.call("list_agents", {"harness": "codex", "loaded": True, "limit": 5,
                                                         **({"cursor": cursor} if cursor else {})})
                assert page["sessions"] == [] and page["complete"] is False, page
                running.append(page)
                cursor = page["nextCursor"]
                if cursor is None:
                    break
            assert running[-1]["hasMore"] is False and all(p["hasMore"] for p in running[:-1])
            assert sum(p["filteredOut"]["loaded"] for p in running) == COUNT

            for bad in ("abc", "400", pages[0]["nextCursor"][:-3], "e30"):
                error = await client.call("list_agents", {"cursor": bad})
                assert error["ok"] is False and error["error"]["code"] == "invalid_arguments", error
                assert [e["path"] for e in error["error"]["details"]["errors"]] == ["cursor"]

            server.handlers["thread/list"] = mixed_lister(150)
            whole = await client.call("list_agents", {"harness": "codex", "limit": 200})
            assert len(whole["sessions"]) == 150 and whole["complete"] is True and whole["hasMore"] is False
            none_running = await client.call("list_agents", {"harness": "codex", "loaded": True})
            assert none_running["sessions"] == [] and none_running["complete"] is True  # every session considered
            assert none_running["filteredOut"] == {"archived": 0, "loaded": 150}
            server.handlers["thread/list"] = mixed_lister(COUNT)

        # the CLI pages the same way, and prints how to get the next page
        async def sessions(*args: str) -> subprocess.CompletedProcess[str]:
            from agent_link_testing.mcp_client import server_env

            # in a thread: the scripted app-server answers on this test's event loop
            return await asyncio.to_thread(
                subprocess.run, [sys.executable, "-m", "agent_link_core", "sessions", "--harness", "codex", *args],
                env=server_env(env), capture_output=True, text=True, timeout=120)

        seen, cursor = [], None
        while True:
            done = await sessions("--limit", "250", "--json", *(("--cursor", cursor) if cursor else ()))
            assert done.returncode == 0, done.stderr
            page = json.loads(done.stdout)
            assert page["complete"] is False
            seen += [s["id"] for s in page["sessions"]]
            cursor = page["nextCursor"]
            if cursor is None:
                break
        assert seen == IDS
        human = await sessions("--limit", "100")
        assert human.returncode == 0 and "more: --cursor " in human.stdout, human.stdout[-500:]
        # a page looks limit + 1 sessions deep: the exec runs among the rest follow on the next page
        exec_runs, left_out, cursor = [], 0, None
        while True:
            done = await sessions("--limit", "500", "--source", "exec", "--json", *(("--cursor", cursor) if cursor else ()))
            assert done.returncode == 0 and "failed" not in done.stderr, done.stderr  # no plugin fault reported
            page = json.loads(done.stdout)
            exec_runs += [s["id"] for s in page["sessions"]]
            left_out += page["filteredOut"]["source"]
            cursor = page["nextCursor"]
            if cursor is None:
                break
        assert exec_runs == IDS[::10] and left_out == COUNT - COUNT // 10
        refused = await sessions("--cursor", "nonsense")
        assert refused.returncode != 0 and "cursor" in refused.stderr and "Traceback" not in refused.stderr, refused.stderr


async def test_the_transcript_fallback_lists_exec_runs_and_sub_agents_too(
    isolated_env: Path, make_rollout: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without an app-server the listing comes from the rollout files: it leaves no source
    kind out, so it may say complete."""
    import os

    from agent_link_core.app import App

    home = Path(os.environ["CODEX_HOME"])
    kinds = {IDS[0]: "vscode", IDS[1]: "exec", IDS[2]: "subAgent"}
    for tid, kind in kinds.items():
        make_rollout(home, tid, source=kind)
    monkeypatch.setenv("AGENT_LINK_CODEX_AUTOSTART", "0")
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "claude roles receipts")
    app = App.create()
    try:
        listed = await app.list_agents(harness="codex")
    finally:
        app.close()
    assert listed["providers"]["codex"]["source"] == "local-jsonl-fallback"
    assert {s["id"] for s in listed["sessions"]} == set(kinds) and listed["complete"] is True
