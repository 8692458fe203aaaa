"""A reply reaches a waiting Codex turn once (issue 29; REAL Codex app-server, stub model).

The stub model of a Codex thread asks Alice through agent-link's ``message_agent`` with
``waitForReply`` (agent-link is the thread's MCP server). While that tool call waits, Alice
replies from another process. The reply comes back in the wait's result and is read there;
it is never also steered into the running turn as a new message (which the model would then
answer a second time): no userMessage echoes the reply's id, and the model is asked exactly
twice (the question's tool call, then its follow-up with the tool result).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from agent_link_codex.appserver import AppServerClient
from agent_link_core.app import App
from agent_link_core.model import Caller
from agent_link_testing.codex_host import CodexAppServer, McpServerConfig
from agent_link_testing.responses_stub import ResponsesStub, mcp_tool_call, text

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(240)]

WAIT_MS = 60_000
ALICE = Caller("test:alice", "config", "test")
OTHER_PLUGINS = "claude roles receipts"


async def question_from(app: App, sender: str) -> str:
    """The id of the first message ``sender`` sent Alice (bounded poll: the turn starts first)."""
    for _ in range(WAIT_MS // 100):
        row = app.store.conn.execute("SELECT id FROM messages WHERE from_addr = ? AND recipient = ?", (sender, ALICE.address)).fetchone()
        if row is not None:
            return str(row["id"])
        await asyncio.sleep(0.1)
    raise AssertionError(f"{sender} never asked")


async def test_a_reply_returned_by_the_turns_wait_is_not_also_steered_into_it(
    stub: ResponsesStub, tmp_path: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    server_env = {"AGENT_LINK_STATE_DIR": str(isolated_env), "AGENT_LINK_HOST": "codex", "AGENT_LINK_CODEX_AUTOSTART": "0",
                  "AGENT_LINK_DISABLE_PLUGINS": OTHER_PLUGINS, "CODEX_HOME": str(tmp_path / "codex" / "codex-home")}
    servers = {"agent-link": McpServerConfig(command=sys.executable, args=["-m", "agent_link_core", "mcp"], env=server_env,
                                             startup_timeout_sec=30, tool_timeout_sec=120)}
    with CodexAppServer(stub.base_url, root=tmp_path / "codex", mcp_servers=servers) as host:
        async with await AppServerClient.connect_unix(host.socket_path, refuse_server_requests=True) as raw:
            await raw.initialize("someone-else", "0.0.1", timeout_ms=WAIT_MS)
            async with raw.subscription() as sub:
                thread_id = (await raw.request("thread/start", {}, timeout_ms=WAIT_MS))["thread"]["id"]
                await sub.wait_for(lambda n: n.method == "mcpServer/startupStatus/updated" and n.params.get("name") == "agent-link"
                                   and n.params.get("status") == "ready", timeout_ms=WAIT_MS)
            # Alice's process: it can push into the thread (the path that steered the copy before)
            for key, value in {"AGENT_LINK_CODEX_SOCK": str(host.socket_path), "CODEX_HOME": str(host.codex_home),
                               "AGENT_LINK_CODEX_AUTOSTART": "0", "AGENT_LINK_DISABLE_PLUGINS": OTHER_PLUGINS}.items():
                monkeypatch.setenv(key, value)
            stub.enqueue(mcp_tool_call("agent_link", "message_agent", {
                "to": ALICE.address, "message": "which port?", "anticipation": "reply", "waitForReply": True,
                "timeoutMs": 45_000, "pollIntervalMs": 250}), text("port noted"))
            app = App.create()
            try:
                async with raw.subscription(thread_id=thread_id) as items:
                    await raw.request("turn/start", {"threadId": thread_id, "input": [{"type": "text", "text": "ask alice"}]},
                                      timeout_ms=WAIT_MS)
                    question = await question_from(app, f"codex:{thread_id}")
                    answered = await app.reply(caller=ALICE, message_id=question, message="port 8443")
                    tool = await items.wait_for(lambda n: n.method == "item/completed" and n.params["item"]["type"] == "mcpToolCall",
                                                timeout_ms=WAIT_MS)
                    await items.wait_for(lambda n: n.method == "turn/completed", timeout_ms=WAIT_MS)
                reply_id = answered["messageId"]
                result = tool.params["item"]["result"]["structuredContent"]
                assert result["ok"] and result["wait"]["outcome"] == "reply", result
                assert result["wait"]["reply"]["id"] == reply_id and "port 8443" in result["wait"]["reply"]["envelope"]
                row = app.mailbox.stored(reply_id)
                assert row["delivered_via"] == "wait", dict(row)
                page = await raw.request("thread/items/list", {"threadId": thread_id, "limit": 100}, timeout_ms=WAIT_MS)
                echoed = [e["item"].get("clientId") for e in page["data"] if e["item"]["type"] == "userMessage"]
                assert reply_id not in echoed, echoed
                # asked twice: the tool call, then its follow-up; no request carries the reply as a message of its own
                model_requests = stub.responses_requests()
                assert len(model_requests) == 2, [r.texts() for r in model_requests]
                assert not any(reply_id in t for r in model_requests for t in r.texts()), [r.texts() for r in model_requests]
                assert any(reply_id in o for o in model_requests[1].function_call_output_texts())
                # Alice's push was left to the wait: held for it, or (the wait woke and took it
                # first) skipped as delivered; either way nothing was pushed to Codex
                assert app.store.conn.execute("SELECT 1 FROM codex_pushes WHERE message_id = ?", (reply_id,)).fetchone() is None
            finally:
                await app.aclose()
