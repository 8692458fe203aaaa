"""Listings that say they are complete (issue 18), against a REAL Codex app-server.

A thread started by ``codex exec`` (a real run against the stub model, in the app-server's
``CODEX_HOME``) is listed by ``list_agents`` and ``agent-link sessions`` like any other
thread, and a listing that holds every thread says ``complete``; ``--source exec`` says how
many it left out; ``list_codex_threads`` leaves exec runs out by default and names that kind
in ``filteredSourceKinds``. Through a real MCP client session and the real CLI.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_link_codex.appserver import AppServerClient
from agent_link_testing.codex_host import STUB_KEY_ENV, CodexAppServer, codex_binary
from agent_link_testing.mcp_client import agent_link_mcp, server_env
from agent_link_testing.responses_stub import ResponsesStub, text

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(300)]
WAIT_MS = 30_000


@pytest.fixture
def stub() -> Iterator[ResponsesStub]:
    with ResponsesStub(default=text("ok")) as server:
        yield server


async def test_an_exec_thread_is_listed_and_a_whole_listing_says_complete(stub: ResponsesStub, tmp_path: Path) -> None:
    with CodexAppServer(stub.base_url, root=tmp_path / "codex") as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEX_", "AGENT_LINK_", "CLAUDE_"))}
        env.update(HOME=str(server.home), CODEX_HOME=str(server.codex_home), **{STUB_KEY_ENV: "stub-key"})
        ran = await asyncio.to_thread(subprocess.run, [str(codex_binary()), "exec", "--skip-git-repo-check", "an exec run"],
                                      env=env, cwd=server.workdir, capture_output=True, text=True, timeout=240)
        assert ran.returncode == 0, ran.stderr[-3000:]
        raw = await AppServerClient.connect_unix(server.socket_path, refuse_server_requests=True)
        try:
            await raw.initialize("someone-else", "0.0.1", timeout_ms=WAIT_MS)
            started = await raw.request("thread/start", {}, timeout_ms=WAIT_MS)
            interactive = str(started["thread"]["id"])
            async with raw.subscription(thread_id=interactive) as sub:
                await raw.request("turn/start", {"threadId": interactive, "input": [{"type": "text", "text": "hi",
                                                                                     "text_elements": []}]}, timeout_ms=WAIT_MS)
                await sub.wait_for(lambda n: n.method == "turn/completed", timeout_ms=WAIT_MS)
        finally:
            await raw.close()

        agent_env = {"AGENT_LINK_ADDRESS": "test:alice", "AGENT_LINK_CODEX_AUTOSTART": "0",
                     "AGENT_LINK_CODEX_SOCK": str(server.socket_path), "AGENT_LINK_DISABLE_PLUGINS": "claude roles receipts",
                     "CODEX_HOME": str(server.codex_home)}
        async with agent_link_mcp(agent_env) as client:
            listed = await client.call("list_agents", {"harness": "codex"})
            assert listed["ok"] is True, listed
            sources = {s["id"]: s.get("source") for s in listed["sessions"]}
            [exec_thread] = [tid for tid, source in sources.items() if source == "exec"]
            assert interactive in sources and len(sources) == 2, sources
            assert listed["complete"] is True and listed["hasMore"] is False and listed["nextCursor"] is None
            paged = await client.call("list_agents", {"harness": "codex", "limit": 1})
            assert paged["complete"] is False and paged["hasMore"] is True
            rest = await client.call("list_agents", {"harness": "codex", "limit": 1, "cursor": paged["nextCursor"]})
            assert rest["hasMore"] is False and {paged["sessions"][0]["id"], rest["sessions"][0]["id"]} == set(sources)

            threads = await client.call("list_codex_threads", {})
            assert exec_thread not in {t["id"] for t in threads["data"]} and "exec" in threads["filteredSourceKinds"]
            everything = await client.call("list_codex_threads", {"includeExec": True})
            assert exec_thread in {t["id"] for t in everything["data"]} and "exec" not in everything["filteredSourceKinds"]

        done = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "agent_link_core", "sessions", "--harness", "codex",
                                                        "--source", "exec", "--json"],
                                       env=server_env(agent_env), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        only = json.loads(done.stdout)
        assert [s["id"] for s in only["sessions"]] == [exec_thread]
        assert only["filteredOut"] == {"archived": 0, "source": 1} and only["complete"] is True
