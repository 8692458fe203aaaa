"""The host-neutral tools' contract details, through a real MCP client session: the wait cap is
stated and reported, a client that sends a progress token gets progress notifications and the
whole wait it asked for, health's host detection and startAppServer."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agent_link_testing.host_process import freeze
from agent_link_testing.mcp_client import AgentLinkClient, agent_link_mcp

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

ONLY_CORE = {"AGENT_LINK_DISABLE_PLUGINS": "codex claude roles receipts projects approvals forks"}


async def call_with_progress(client: AgentLinkClient, name: str, args: dict[str, Any]) -> tuple[dict[str, Any], list[float]]:
    """Call a tool with a progress token (the SDK sets one when a callback is given)."""
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    result = await client.session.call_tool(name, args, read_timeout_seconds=60, progress_callback=on_progress)
    return json.loads(result.content[0].text), seen


@pytest.mark.installed_plugins("waits")
async def test_a_wait_without_progress_token_says_it_was_capped(isolated_env: Path) -> None:
    env = {**ONLY_CORE, "AGENT_LINK_ADDRESS": "test:alice", "AGENT_LINK_WAIT_CAP_MS": "1000"}
    async with agent_link_mcp(env) as alice:
        tools = await alice.tools()
        described = tools["wait_for_agent"].input_schema["properties"]["timeoutMs"]["description"]
        assert "progress token" in described and "capped" in described
        waited = await alice.call("wait_for_agent", {"agent": "test:bob", "timeoutMs": 3000, "pollIntervalMs": 250})
        assert waited["ok"] and waited["outcome"] == "timeout" and waited["timedOut"] is True
        assert (waited["capped"], waited["requestedTimeoutMs"]) == (True, 3000) and waited["waitedMs"] < 3000
        assert [w["code"] for w in waited["warnings"]] == ["wait_capped"]
        # under the cap nothing is said
        short = await alice.call("wait_for_agent", {"agent": "test:bob", "timeoutMs": 500, "pollIntervalMs": 250})
        assert "capped" not in short and "warnings" not in short


@pytest.mark.installed_plugins("waits")
async def test_a_client_with_a_progress_token_waits_the_whole_time(isolated_env: Path) -> None:
    env = {**ONLY_CORE, "AGENT_LINK_ADDRESS": "test:alice", "AGENT_LINK_WAIT_CAP_MS": "1000", "AGENT_LINK_WAIT_PROGRESS_MS": "1000"}
    async with agent_link_mcp(env) as alice:
        waited, progress = await call_with_progress(alice, "wait_for_agent", {"agent": "test:bob", "timeoutMs": 3000, "pollIntervalMs": 250})
        assert waited["ok"] and waited["outcome"] == "timeout" and "capped" not in waited and waited["waitedMs"] >= 3000
        assert len(progress) >= 2 and progress == sorted(progress)
        # message_agent's waitForReply is the same wait
        sent, progress = await call_with_progress(alice, "message_agent", {"to": "test:bob", "message": "q", "waitForReply": True,
                                                                           "timeoutMs": 2500, "pollIntervalMs": 250})
        assert sent["ok"] and sent["wait"]["outcome"] == "timeout" and sent["wait"]["waitedMs"] >= 2500 and progress


@pytest.mark.installed_plugins("waits")
async def test_a_reply_ends_a_wait_with_progress(isolated_env: Path) -> None:
    env = {**ONLY_CORE, "AGENT_LINK_WAIT_PROGRESS_MS": "1000"}
    async with agent_link_mcp({**env, "AGENT_LINK_ADDRESS": "test:alice"}) as alice, \
            agent_link_mcp({**env, "AGENT_LINK_ADDRESS": "test:bob"}) as bob:
        sent = await alice.call("message_agent", {"to": "test:bob", "message": "ping", "anticipation": "reply"})
        assert (await bob.call("reply_agent_link_message", {"messageId": sent["messageId"], "message": "pong"}))["ok"]
        waited, _ = await call_with_progress(alice, "wait_for_agent", {"agent": "test:bob", "replyToMessageId": sent["messageId"],
                                                                       "timeoutMs": 600000})
        assert waited["outcome"] == "reply" and "pong" in waited["reply"]["envelope"]


@pytest.mark.installed_plugins("waits")
async def test_the_inbox_counts_mail_a_running_wait_holds(isolated_env: Path) -> None:
    """Through real MCP sessions: while Alice's wait for Bob's reply runs in one server, her
    inbox read through another leaves the reply to it (heldByActiveWait) and does not mark it
    delivered. A wait wakes on the reply's commit, so the waiting server is stopped (SIGSTOP)
    while the reply is written and read, and let go after."""
    import os
    import signal
    import sqlite3

    env = {**ONLY_CORE}
    async with agent_link_mcp({**env, "AGENT_LINK_ADDRESS": "test:alice"}) as alice, \
            agent_link_mcp({**env, "AGENT_LINK_ADDRESS": "test:alice"}) as reader, \
            agent_link_mcp({**env, "AGENT_LINK_ADDRESS": "test:bob"}) as bob:
        tools = await reader.tools()
        assert "heldByActiveWait" in tools["read_agent_link_inbox"].output_schema["properties"]
        assert (await reader.call("read_agent_link_inbox"))["heldByActiveWait"] == 0
        sent = await alice.call("message_agent", {"to": "test:bob", "message": "ready?", "anticipation": "reply"})
        waiting = asyncio.create_task(alice.call("wait_for_agent", {"agent": "test:bob", "replyToMessageId": sent["messageId"],
                                                                    "timeoutMs": 30000}))
        db = sqlite3.connect(isolated_env / "agent-link.db")
        try:
            async with asyncio.timeout(30):  # until the wait runs (a bound for a hang)
                while not (row := db.execute("SELECT pid FROM active_waits WHERE address = 'test:alice'").fetchone()):
                    await asyncio.sleep(0.05)
        finally:
            db.close()
        try:
            freeze(pid=row[0])
            replied = await bob.call("reply_agent_link_message", {"messageId": sent["messageId"], "message": "yes"})
            peek = await reader.call("read_agent_link_inbox", {"markAsDelivered": False})
        finally:
            os.kill(row[0], signal.SIGCONT)
        assert peek["heldByActiveWait"] == 1, peek
        assert replied["messageId"] not in [m["id"] for m in peek["messages"]] and peek["remainingCount"] == 0
        got = await waiting
        assert got["outcome"] == "reply" and got["reply"]["id"] == replied["messageId"]


@pytest.mark.installed_plugins  # host detection is the harnesses' declaration
@pytest.mark.parametrize(("extra", "expected"), [
    ({"CLAUDE_PROJECT_DIR": "/work/p"}, {"host": "claude", "source": "environment", "variable": "CLAUDE_PROJECT_DIR"}),
    ({"CODEX_THREAD_ID": "01a22a93-0000-7000-8000-000000000001"}, {"host": "codex", "source": "environment", "variable": "CODEX_THREAD_ID"}),
    ({"CODEX_THREAD_ID": "01a22a93-0000-7000-8000-000000000001", "CLAUDE_PROJECT_DIR": "/work/p"},
     {"host": "claude", "source": "environment", "variable": "CLAUDE_PROJECT_DIR"}),
    ({"AGENT_LINK_HOST": "codex", "CLAUDE_PROJECT_DIR": "/work/p"}, {"host": "codex", "source": "AGENT_LINK_HOST", "variable": "AGENT_LINK_HOST"}),
    ({}, {"host": None, "source": "none", "variable": None}),
])
async def test_health_says_what_decided_the_host(isolated_env: Path, extra: dict[str, str], expected: dict[str, Any]) -> None:
    env = {"AGENT_LINK_DISABLE_PLUGINS": "roles receipts projects approvals forks", "AGENT_LINK_CODEX_AUTOSTART": "0", **extra}
    async with agent_link_mcp(env) as client:
        health = await client.call("agent_link_health", {"startAppServer": False})
        assert health["ok"], health
        assert health["hostDetection"] == expected and health["host"] == expected["host"]
        assert health["harnesses"]["codex"]["version"]["probed"] is False  # startAppServer false probes nothing
        assert {"session", "queued", "open"} <= set(health["harnesses"]["claude"]["mailbox"])
        bad = await client.call("agent_link_health", {"startAppServer": "maybe"})
        assert bad["error"]["code"] == "invalid_arguments"
