"""Never two turns for one message (REAL Codex 0.169.0 app-server, stub model).

The thread is busy in a long MCP tool call (``agent_link_testing.slow_mcp``). A message sent
meanwhile is steered into the running turn: Codex answers ``turn/steer`` at once but shows
the input (the userMessage echoing the message id) only when the tool call ends, long after
agent-link's confirmation wait. Such a push is ``accepted``: it is never pushed again, status
says "accepted, awaiting the thread", and it becomes delivered when the echo arrives, in the
sending process (in-process send) or when status is asked later (CLI).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from agent_link_codex.appserver import AppServerClient
from agent_link_testing.codex_host import CodexAppServer, McpServerConfig
from agent_link_testing.responses_stub import ResponsesStub, mcp_tool_call, text

from agent_link_core.app import App
from agent_link_core.sending import message_summary
from agent_link_core.model import Caller

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(240)]

WAIT_MS = 60_000
ALICE = Caller("test:alice", "config", "test")
AGENT_LINK = str(Path(sys.executable).parent / "agent-link")
TOOL_SECONDS = 25  # well beyond the 10 s agent-link waits for an echo


def agent_link(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([AGENT_LINK, *args], env=dict(os.environ), capture_output=True, text=True, timeout=120, check=False)


async def client_ids(raw: AppServerClient, thread_id: str) -> list[str | None]:
    page = await raw.request("thread/items/list", {"threadId": thread_id, "limit": 100}, timeout_ms=WAIT_MS)
    return [e["item"].get("clientId") for e in page["data"] if e["item"]["type"] == "userMessage"]


async def delivered(app: App, message_id: str) -> bool:
    for _ in range(600):
        if app.mailbox.get_row(message_id)["first_delivered_at"] is not None:
            return True
        await asyncio.sleep(0.1)
    return False


async def test_a_steer_accepted_during_a_long_tool_call_is_one_turn_and_delivered_when_it_shows(
    stub: ResponsesStub, tmp_path: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    slow = {"slow": McpServerConfig(command=sys.executable, args=["-m", "agent_link_testing.slow_mcp"], startup_timeout_sec=60,
                                    tool_timeout_sec=300)}
    with CodexAppServer(stub.base_url, root=tmp_path / "codex", mcp_servers=slow) as host:
        for key, value in {"AGENT_LINK_CODEX_SOCK": str(host.socket_path), "CODEX_HOME": str(host.codex_home),
                           "AGENT_LINK_CODEX_AUTOSTART": "0", "AGENT_LINK_DISABLE_PLUGINS": "claude roles receipts",
                           "AGENT_LINK_ADDRESS": ALICE.address}.items():
            monkeypatch.setenv(key, value)
        async with await AppServerClient.connect_unix(host.socket_path, refuse_server_requests=True) as raw:
            await raw.initialize("someone-else", "0.0.1", timeout_ms=WAIT_MS)
            async with raw.subscription() as sub:
                thread_id = (await raw.request("thread/start", {}, timeout_ms=WAIT_MS))["thread"]["id"]
                await sub.wait_for(lambda n: n.method == "mcpServer/startupStatus/updated" and n.params.get("name") == "slow"
                                   and n.params.get("status") != "starting", timeout_ms=WAIT_MS)
            stub.enqueue(mcp_tool_call("slow", "sleep", {"seconds": TOOL_SECONDS}), text("long task done"))
            app = App.create()
            try:
                async with raw.subscription(thread_id=thread_id) as items:
                    await raw.request("turn/start", {"threadId": thread_id, "input": [{"type": "text", "text": "long task"}]},
                                      timeout_ms=WAIT_MS)
                    await items.wait_for(lambda n: n.method == "item/started" and n.params["item"]["type"] == "mcpToolCall",
                                         timeout_ms=WAIT_MS)
                    # the thread is inside the tool call: one send in-process, one through the CLI
                    sent, cli = await asyncio.gather(
                        app.send(caller=ALICE, to=f"codex:{thread_id}", body="in-process: please answer", anticipation="reply"),
                        asyncio.to_thread(agent_link, "send", f"codex:{thread_id}", "from the CLI", "--json"),
                    )
                    message_id = sent.message["id"]
                    assert sent.delivery is not None and sent.delivery.accepted and not sent.delivery.delivered, sent.delivery
                    summary = message_summary(app, sent)
                    assert (summary["delivery"], summary["deliveryNote"]) == ("accepted", "accepted, awaiting the thread"), summary
                    assert [w["code"] for w in summary["warnings"]] == ["codex_push_accepted"]
                    status = app.status(ALICE, message_id)
                    assert (status["delivery"], status["deliveryNote"]) == ("accepted", "accepted, awaiting the thread")
                    assert cli.returncode == 0, cli.stderr
                    cli_result = json.loads(cli.stdout)
                    assert cli_result["outcome"] == "accepted", cli_result
                    cli_id = cli_result["messageId"]
                    shown = await asyncio.to_thread(agent_link, "status", cli_id)
                    assert shown.returncode == 0 and "accepted, awaiting the thread" in shown.stdout, shown.stdout + shown.stderr
                    # the background pass never pushes an accepted message again
                    assert (await app.harnesses["codex"].background_pass(app, stale_after_ms=0))["pushed"] == 0
                    await items.wait_for(lambda n: n.method == "turn/completed", timeout_ms=WAIT_MS)
                # the CLI's message: its status, asked later, finds the echo (not stuck at queued or accepted)
                shown = await asyncio.to_thread(agent_link, "status", cli_id, "--json")
                assert shown.returncode == 0, shown.stderr
                assert json.loads(shown.stdout)["delivery"] == "delivered", shown.stdout
                # the echo came after the tool call: delivered then, in this process
                assert await delivered(app, message_id)
                assert app.status(ALICE, message_id)["delivery"] == "delivered"
                # the idle thread is offered nothing again
                assert (await app.harnesses["codex"].background_pass(app, stale_after_ms=0))["pushed"] == 0
                ids = await client_ids(raw, thread_id)
                assert ids.count(message_id) == 1 and ids.count(cli_id) == 1, ids
            finally:
                await app.aclose()


async def test_a_steer_accepted_before_the_model_reply_streams_is_one_turn(
    stub: ResponsesStub, tmp_path: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Observed: when the in-flight model request has not started streaming, Codex answers the
    # steer at once but waits for that reply before it takes the steered input in.
    with CodexAppServer(stub.base_url, root=tmp_path / "codex") as host:
        for key, value in {"AGENT_LINK_CODEX_SOCK": str(host.socket_path), "CODEX_HOME": str(host.codex_home),
                           "AGENT_LINK_CODEX_AUTOSTART": "0", "AGENT_LINK_DISABLE_PLUGINS": "claude roles receipts"}.items():
            monkeypatch.setenv(key, value)
        async with await AppServerClient.connect_unix(host.socket_path, refuse_server_requests=True) as raw:
            await raw.initialize("someone-else", "0.0.1", timeout_ms=WAIT_MS)
            thread_id = (await raw.request("thread/start", {}, timeout_ms=WAIT_MS))["thread"]["id"]
            hold = stub.hold(timeout_s=120)
            stub.enqueue(text("slow answer", hold=hold))
            app = App.create()
            try:
                async with raw.subscription(thread_id=thread_id) as items:
                    await raw.request("turn/start", {"threadId": thread_id, "input": [{"type": "text", "text": "think"}]},
                                      timeout_ms=WAIT_MS)
                    assert await asyncio.to_thread(hold.wait_arrived, WAIT_MS / 1000)
                    sent = await app.send(caller=ALICE, to=f"codex:{thread_id}", body="while you think", anticipation="reply")
                    message_id = sent.message["id"]
                    assert sent.delivery is not None and sent.delivery.accepted, sent.delivery
                    assert app.status(ALICE, message_id)["delivery"] == "accepted"
                    assert (await app.harnesses["codex"].background_pass(app, stale_after_ms=0))["pushed"] == 0
                    hold.release()
                    await items.wait_for(lambda n: n.method == "turn/completed", timeout_ms=WAIT_MS)
                assert await delivered(app, message_id)
                assert (await app.harnesses["codex"].background_pass(app, stale_after_ms=0))["pushed"] == 0
                assert (await client_ids(raw, thread_id)).count(message_id) == 1
            finally:
                await app.aclose()
