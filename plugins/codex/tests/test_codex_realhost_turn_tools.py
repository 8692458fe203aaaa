"""A turn agent-link starts offers agent-link's tools (REAL pinned Codex app-server, stub model).

Codex starts a thread's MCP servers when the thread is started or resumed and builds a turn's
tools from the servers that are ready when the turn starts. Observed here: ``thread/start``
and ``thread/resume`` report ``mcpServer/startupStatus/updated {name, status: "starting"}``
to the calling connection, usually before their own answer but sometimes after it (the
thread's listener task sends them; 4 of about 50 launch runs under load before agent-link
waited for them), and ``ready`` once the server answered (about 1-6 s for ``agent-link
mcp``); a ``turn/start`` sent right away gets a first model request without the server's
tools. So the delivering turn waits for the first report, then for ``ready``.

Both ways agent-link starts a turn on a thread whose servers are still starting are covered:
mail to an unloaded thread (resume, then turn) and ``launch_codex_thread`` with a message. The
stub model answers the envelope by calling ``reply_agent_link_message``; the first request of
the delivering turn must list agent-link's tools and the call must succeed.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_link_codex.appserver import AppServerClient
from agent_link_testing.codex_host import CodexAppServer, McpServerConfig
from agent_link_testing.mcp_client import agent_link_mcp
from agent_link_testing.responses_stub import (
    Reply,
    ResponsesStub,
    StubRequest,
    mcp_tool_call,
    text,
)

from agent_link_core.app import App
from agent_link_core.mailbox import new_message_id
from agent_link_core.model import Caller
from agent_link_waits.waits import waits_of

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(180)]

WAIT_MS = 30_000
WAIT_S = WAIT_MS / 1000
ALICE = Caller("test:alice", "config", "test")
OTHER_PLUGINS = "claude roles receipts"
REPLY_TOOL = "mcp__agent_link/reply_agent_link_message"  # Codex names server "agent-link" mcp__agent_link
ENVELOPE_ID = re.compile(r'<agent-link-message id="([0-9A-Z]{26})"')


def answer_envelopes(request: StubRequest) -> Reply | None:
    """The model: a request ending in an envelope gets a reply call naming its id."""
    last = request.last_input or {}
    if last.get("type") == "function_call_output":
        return text("replied")
    found = ENVELOPE_ID.findall("\n".join(request.user_texts()[-1:]))
    if found:
        return mcp_tool_call("agent_link", "reply_agent_link_message", {"messageId": found[-1], "message": "pong"})
    return None


@pytest.fixture
def stub() -> Iterator[ResponsesStub]:
    with ResponsesStub(responder=answer_envelopes) as server:
        yield server


def agent_link_server(state_dir: Path) -> dict[str, McpServerConfig]:
    # AGENT_LINK_TOOLS=all: a host's default lists the messaging tools only (agent_link_tools reaches the rest)
    env = {"AGENT_LINK_STATE_DIR": str(state_dir), "AGENT_LINK_HOST": "codex", "AGENT_LINK_CODEX_AUTOSTART": "0",
           "AGENT_LINK_TOOLS": "all",
           "AGENT_LINK_DISABLE_PLUGINS": OTHER_PLUGINS}
    return {"agent-link": McpServerConfig(command=sys.executable, args=["-m", "agent_link_core", "mcp"], env=env,
                                          startup_timeout_sec=60)}


def use_endpoint(monkeypatch: pytest.MonkeyPatch, host: CodexAppServer) -> dict[str, str]:
    env = {"AGENT_LINK_CODEX_SOCK": str(host.socket_path), "CODEX_HOME": str(host.codex_home), "AGENT_LINK_CODEX_AUTOSTART": "0",
           "AGENT_LINK_DISABLE_PLUGINS": OTHER_PLUGINS}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


def delivering_request(stub: ResponsesStub, message_id: str) -> StubRequest:
    """The first model request that carried the envelope of ``message_id``."""
    return stub.wait_for(lambda r: r.contains(f'<agent-link-message id="{message_id}"'), WAIT_S)


async def tool_call_items(client: AppServerClient, thread_id: str) -> list[dict[str, Any]]:
    """The thread's MCP tool-call items, once one is stored and none runs (bounded by ``WAIT_S``).

    The reply lands in agent-link while the tool call is still running; Codex stores the item
    only after the call returns, so a read right after the reply can find none yet.
    """
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while True:
        page = await client.request("thread/items/list", {"threadId": thread_id, "limit": 100}, timeout_ms=WAIT_MS)
        calls = [e["item"] for e in page["data"] if e["item"]["type"] == "mcpToolCall"]
        settled = calls and all(c.get("status") != "inProgress" for c in calls)
        if settled or asyncio.get_running_loop().time() > deadline:
            return calls
        await asyncio.sleep(0.2)


async def test_mail_to_an_unloaded_thread_arrives_in_a_turn_with_agent_link_tools(
    stub: ResponsesStub, tmp_path: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = tmp_path / "codex"
    servers = agent_link_server(isolated_env)
    with CodexAppServer(stub.base_url, root=root, mcp_servers=servers) as first:
        async with await AppServerClient.connect_unix(first.socket_path, refuse_server_requests=True) as raw:
            await raw.initialize("someone-else", "0.0.1", timeout_ms=WAIT_MS)
            async with raw.subscription() as sub:
                thread_id = (await raw.request("thread/start", {}, timeout_ms=WAIT_MS))["thread"]["id"]
                await raw.request("turn/start", {"threadId": thread_id, "input": [{"type": "text", "text": "setup"}]},
                                  timeout_ms=WAIT_MS)
                await sub.wait_for(lambda n: n.method == "turn/completed", timeout_ms=WAIT_MS)
    # a fresh app-server on the same CODEX_HOME: the thread exists but is not loaded
    with CodexAppServer(stub.base_url, root=root, mcp_servers=servers) as second:
        use_endpoint(monkeypatch, second)
        app = App.create()
        try:
            message_id = new_message_id()
            sent = await app.send(caller=ALICE, to=f"codex:{thread_id}", body="ping: please answer", anticipation="reply",
                                  message_id=message_id)
            assert sent.delivery is not None and sent.delivery.delivered, sent.delivery
            assert sent.delivery.fields["action"] == "resumed+started_turn"
            first_request = await asyncio.to_thread(delivering_request, stub, message_id)
            assert REPLY_TOOL in first_request.tool_names(), first_request.tool_names()
            assert not [w for w in sent.delivery.warnings if w["code"] == "codex_tools_not_ready"], sent.delivery.warnings
            waited = await waits_of(app).wait(caller=ALICE, agent=f"codex:{thread_id}", reply_to=message_id, timeout_ms=WAIT_MS, poll_ms=250)
            assert waited["outcome"] == "reply" and "pong" in waited["reply"]["envelope"], waited
            async with await AppServerClient.connect_unix(second.socket_path, refuse_server_requests=True) as raw:
                await raw.initialize("someone-else", "0.0.1", timeout_ms=WAIT_MS)
                [call] = await tool_call_items(raw, thread_id)
            assert (call["tool"], call["status"]) == ("reply_agent_link_message", "completed"), call
        finally:
            await app.aclose()


async def test_launch_with_a_message_starts_a_turn_with_agent_link_tools(
    stub: ResponsesStub, tmp_path: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    with CodexAppServer(stub.base_url, root=tmp_path / "codex", mcp_servers=agent_link_server(isolated_env)) as host:
        env = {"AGENT_LINK_ADDRESS": "test:alice", **use_endpoint(monkeypatch, host)}
        async with agent_link_mcp(env) as client:
            launched = await client.call("launch_codex_thread", {"message": "ping: please answer", "anticipation": "reply"})
        assert launched["ok"] and launched["delivery"] == "delivered", launched
        message_id, thread_id = launched["messageId"], launched["threadId"]
        first_request = await asyncio.to_thread(delivering_request, stub, message_id)
        assert REPLY_TOOL in first_request.tool_names(), (launched.get("warnings"), host.stderr_text()[-2000:], first_request.tool_names())
        assert not [w for w in launched.get("warnings", []) if w["code"] == "codex_tools_not_ready"], launched
        app = App.create()
        try:
            waited = await waits_of(app).wait(caller=ALICE, agent=f"codex:{thread_id}", reply_to=message_id, timeout_ms=WAIT_MS, poll_ms=250)
        finally:
            await app.aclose()
        assert waited["outcome"] == "reply" and "pong" in waited["reply"]["envelope"], waited

