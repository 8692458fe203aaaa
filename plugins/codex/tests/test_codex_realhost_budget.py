"""What a Codex thread is given fits what Codex shows the model (REAL Codex 0.169.0, stub model).

Measured: an MCP tool's output reaches the model as ``Wall time: …\nOutput:\n`` plus the
result's structuredContent as JSON with indent 2; above about 12,000 characters Codex keeps the
head and the tail and cuts the middle ("…N tokens truncated…"), so the model never sees the
messages in between. The inbox therefore returns only what fits (the codex harness's output
budget) and says what is left; the stub model reads until nothing is. A turn's input, by
contrast, reaches the model whole, even the largest envelope agent-link renders.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from agent_link_codex.appserver import AppServerClient
from agent_link_testing.codex_host import CodexAppServer, McpServerConfig
from agent_link_testing.responses_stub import (
    Reply,
    ResponsesStub,
    StubRequest,
    mcp_tool_call,
    text,
)

from agent_link_core.app import App
from agent_link_core.mailbox import new_message_id
from agent_link_core.records import OutgoingMessage
from agent_link_core.model import Caller

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(180)]

WAIT_MS = 30_000
WAIT_S = WAIT_MS / 1000
ALICE = Caller("test:alice", "config", "test")
OTHER_PLUGINS = "claude roles receipts"


def agent_link_server(state_dir: Path) -> dict[str, McpServerConfig]:
    env = {"AGENT_LINK_STATE_DIR": str(state_dir), "AGENT_LINK_HOST": "codex", "AGENT_LINK_CODEX_AUTOSTART": "0",
           "AGENT_LINK_DISABLE_PLUGINS": OTHER_PLUGINS}
    return {"agent-link": McpServerConfig(command=sys.executable, args=["-m", "agent_link_core", "mcp"], env=env,
                                          startup_timeout_sec=60)}


def use_endpoint(monkeypatch: pytest.MonkeyPatch, host: CodexAppServer) -> None:
    for key, value in {"AGENT_LINK_CODEX_SOCK": str(host.socket_path), "CODEX_HOME": str(host.codex_home),
                       "AGENT_LINK_CODEX_AUTOSTART": "0", "AGENT_LINK_DISABLE_PLUGINS": OTHER_PLUGINS}.items():
        monkeypatch.setenv(key, value)


async def ready_thread(raw: AppServerClient) -> str:
    """A new thread whose MCP servers are up."""
    async with raw.subscription() as sub:
        thread_id = str((await raw.request("thread/start", {}, timeout_ms=WAIT_MS))["thread"]["id"])
        await sub.wait_for(lambda n: n.method == "mcpServer/startupStatus/updated" and n.params.get("status") == "ready",
                           timeout_ms=WAIT_MS)
    return thread_id


def inbox_reader(request: StubRequest) -> Reply | None:
    """The model: reads its inbox, again while `more` says something is left, then answers."""
    last = request.last_input or {}
    if last.get("type") == "function_call_output":
        shown = request.function_call_output_texts()[-1]
        result = json.loads(shown.split("Output:\n", 1)[1])
        if result.get("more"):
            page = result.get("page") or {}
            args = {"messageId": page["messageId"], "offset": page["nextOffset"]} if page.get("nextOffset") else {}
            return mcp_tool_call("agent_link", "read_agent_link_inbox", args)
        return text("all read")
    if any("read your inbox" in t for t in request.user_texts()[-1:]):
        return mcp_tool_call("agent_link", "read_agent_link_inbox", {})
    return None


async def test_eight_messages_of_1500_bytes_are_read_whole_across_reads_in_codex(
    tmp_path: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    with ResponsesStub(responder=inbox_reader) as stub, \
            CodexAppServer(stub.base_url, root=tmp_path / "codex", mcp_servers=agent_link_server(isolated_env)) as host:
        use_endpoint(monkeypatch, host)
        app = App.create()
        try:
            async with await AppServerClient.connect_unix(host.socket_path, refuse_server_requests=True) as raw:
                await raw.initialize("someone-else", "0.0.1", timeout_ms=WAIT_MS)
                thread_id = await ready_thread(raw)
                bodies = {}
                for n in range(8):
                    body = f"message {n}: " + "".join(f"line {n}.{i} of a longer report\n" for i in range(48))[:1500]
                    row, _ = app.mailbox.store_message(OutgoingMessage(new_message_id(), ALICE, f"codex:{thread_id}",
                                                                       f"codex:{thread_id}", body, "fyi", None, None))
                    bodies[row["id"]] = body
                async with raw.subscription(thread_id=thread_id) as sub:
                    await raw.request("turn/start", {"threadId": thread_id, "input": [{"type": "text", "text": "read your inbox"}]},
                                      timeout_ms=WAIT_MS)
                    await sub.wait_for(lambda n: n.method == "turn/completed", timeout_ms=WAIT_MS * 2)
        finally:
            await app.aclose()
        outputs = [r.function_call_output_texts()[-1] for r in stub.responses_requests()
                   if (r.last_input or {}).get("type") == "function_call_output"]
        assert len(outputs) >= 3, len(outputs)  # 8 x 1.5 KB do not fit one Codex tool output
        marked: list[str] = []
        for shown in outputs:
            assert "truncated" not in shown, shown[:300]  # nothing the model got was cut
            result = json.loads(shown.split("Output:\n", 1)[1])
            for message_id in result["markedDelivered"]:
                assert bodies[message_id].splitlines()[-1] in result["renderedBlock"]
            marked += result["markedDelivered"]
        assert sorted(marked) == sorted(bodies)  # each marked once, all of them in the end



async def test_a_turn_carries_the_largest_envelope_whole(
    tmp_path: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Pushes have no Codex budget: a turn's input reaches the model whole (measured far beyond
    # the largest envelope); here a 64 KiB body full of markup, which escaping makes about 128 KiB.
    with ResponsesStub() as stub, CodexAppServer(stub.base_url, root=tmp_path / "codex") as host:
        use_endpoint(monkeypatch, host)
        app = App.create()
        try:
            async with await AppServerClient.connect_unix(host.socket_path, refuse_server_requests=True) as raw:
                await raw.initialize("someone-else", "0.0.1", timeout_ms=WAIT_MS)
                thread_id = str((await raw.request("thread/start", {}, timeout_ms=WAIT_MS))["thread"]["id"])
                body = "".join(f"<p>{i:06d} & x</p>\n" for i in range(4_000))[: 64 * 1024]
                sent = await app.send(caller=ALICE, to=f"codex:{thread_id}", body=body, anticipation="fyi")
            assert sent.delivery is not None and sent.delivery.delivered, sent.delivery
            envelope = app.mailbox.envelope(app.mailbox.get_row(sent.message["id"]))
            assert len(envelope) > 120_000
            request = stub.wait_for(lambda r: r.contains(sent.message["id"]), WAIT_S)
            assert envelope in request.user_texts()
        finally:
            await app.aclose()
