"""End to end on both real hosts: a Claude Code session messages a real Codex thread and gets
its reply back.

* Claude side: the pinned ``claude -p`` against the stub Messages API, agent-link
  installed as a plugin from a directory marketplace (conftest ``installed``). Its agent-link MCP
  server reaches the Codex app-server through ``AGENT_LINK_CODEX_SOCK``, which claude passes on
  from its own environment.
* Codex side: the pinned ``codex app-server`` against the stub Responses API, with
  agent-link configured as an MCP server in its CODEX_HOME, tools approved.
* Both agent-link processes share one ``AGENT_LINK_STATE_DIR`` (one mailbox).

The Claude stub model calls ``message_agent`` to ``codex:<thread id>`` (anticipation reply);
agent-link starts a turn in the Codex thread with the envelope; the Codex stub model, seeing the
envelope in its request, calls ``reply_agent_link_message`` with that message id; the Claude
stub model's ``wait_for_agent`` returns the reply, which the test finds in the Claude stub's
next request.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_link_codex.appserver import AppServerClient
from agent_link_core.app import App
from agent_link_testing.claude_host import agent_link_bin
from agent_link_testing.codex_host import CodexAppServer, McpServerConfig
from agent_link_testing.messages_stub import MessagesStub, RecordedRequest, Reply
from agent_link_testing.responses_stub import ResponsesStub, StubRequest, mcp_tool_call, text

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(240)]

SERVER_RULE = "mcp__plugin_agent-link_codex-agent-link"
RUN_TIMEOUT_S = 120.0
WAIT_MS = 30_000
QUESTION = "Which port does the staging build listen on?"
ANSWER = "Port 8443, per deploy/staging.toml."
ENVELOPE_ID = re.compile(r'<agent-link-message id="([0-9A-HJKMNP-TV-Z]{26})"')
# both agent-link processes load the two host harnesses; the roles and receipts plugins play no part
PLUGINS_OFF = "roles receipts"


def tool(name: str) -> str:
    return f"{SERVER_RULE}__{name}"


def tool_result(request: RecordedRequest) -> dict[str, Any]:
    """The JSON object of the single agent-link tool result in a Claude stub request."""
    [block] = request.tool_results()
    content = block["content"]
    return json.loads(content if isinstance(content, str) else "".join(c.get("text", "") for c in content))


class CodexModel:
    """The Codex stub model: answers an agent-link envelope through agent-link's reply tool,
    then ends the turn once it has the tool's result.

    Like a real model it takes a moment before answering: until the sender's agent-link has
    recorded the delivery (at most :data:`THINK_S`). Answering faster than that loses the
    delivery record (notes/core-requests-e2e.md, item 1); this test is about the round trip.
    """

    THINK_S = 10.0

    def __init__(self, db_path: str) -> None:
        self.db_path = db_path

    def _delivery_recorded(self, message_id: str) -> None:
        deadline = time.monotonic() + self.THINK_S
        while time.monotonic() < deadline:
            try:
                with contextlib.closing(sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, timeout=1)) as db:
                    row = db.execute("SELECT delivered_via FROM messages WHERE id = ?", (message_id,)).fetchone()
                if row and row[0]:
                    return
            except sqlite3.Error:
                pass
            time.sleep(0.05)

    def __call__(self, request: StubRequest) -> Any:
        last = request.last_input
        if last is not None and last.get("type") == "function_call_output":
            return text("Answered the Claude session.")
        for chunk in request.user_texts():
            found = ENVELOPE_ID.search(chunk)
            if found:
                self._delivery_recorded(found.group(1))
                return mcp_tool_call("agent_link", "reply_agent_link_message", {"messageId": found.group(1), "message": ANSWER})
        return None


def processes_with(needle: str) -> list[tuple[int, str]]:
    """Processes other than this one whose environment contains ``needle`` (pid, command line)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle.encode() not in f.read():
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                found.append((int(entry), f.read().replace(b"\0", b" ").decode(errors="replace")))
        except OSError:
            continue
    return found


@pytest.fixture
def responses(isolated_env: Path) -> Iterator[ResponsesStub]:
    with ResponsesStub(responder=CodexModel(str(isolated_env / "agent-link.db"))) as server:
        yield server


@pytest.fixture
def messages() -> Iterator[MessagesStub]:
    with MessagesStub() as server:
        yield server


async def test_claude_session_messages_a_codex_thread_and_gets_its_reply(
    installed: Any, messages: MessagesStub, responses: ResponsesStub, isolated_env: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = str(isolated_env)
    # CODEX_HOME: Codex does not pass its own to MCP servers, and agent-link proves a calling
    # thread from that home's transcripts when it reaches no app-server
    codex_side = {"AGENT_LINK_STATE_DIR": state, "AGENT_LINK_HOST": "codex", "AGENT_LINK_CODEX_AUTOSTART": "0",
                  "AGENT_LINK_DISABLE_PLUGINS": PLUGINS_OFF, "CODEX_HOME": str(tmp_path / "codex" / "codex-home")}
    servers = {"agent-link": McpServerConfig(command=str(agent_link_bin()), args=["mcp"], env=codex_side, startup_timeout_sec=30)}
    project = tmp_path / "proj"
    project.mkdir()
    with CodexAppServer(responses.base_url, root=tmp_path / "codex", mcp_servers=servers) as codex:
        # what claude -p passes on to the plugin's MCP server and hooks: the shared mailbox and
        # the way to the Codex app-server
        claude_side = {"AGENT_LINK_STATE_DIR": state, "AGENT_LINK_CODEX_SOCK": str(codex.socket_path),
                       "AGENT_LINK_CODEX_AUTOSTART": "0", "CODEX_HOME": str(codex.codex_home),
                       "AGENT_LINK_DISABLE_PLUGINS": PLUGINS_OFF}
        claude = installed.host(stub=messages, env=claude_side)
        for name, value in {**claude_side, "CLAUDE_CONFIG_DIR": str(claude.config_dir)}.items():
            monkeypatch.setenv(name, value)  # this process's App reads the same mailbox afterwards

        async with await AppServerClient.connect_unix(codex.socket_path, refuse_server_requests=True) as raw:
            await raw.initialize("someone-else", "0.0.1", timeout_ms=WAIT_MS)
            async with raw.subscription() as startup:
                thread_id = (await raw.request("thread/start", {}, timeout_ms=WAIT_MS))["thread"]["id"]
                await startup.wait_for(lambda n: n.method == "mcpServer/startupStatus/updated"
                                       and n.params.get("name") == "agent-link" and n.params.get("status") == "ready",
                                       timeout_ms=WAIT_MS)
            codex_address = f"codex:{thread_id}"

            def wait_for_the_reply(request: RecordedRequest) -> Reply | str:
                sent = tool_result(request)
                if not sent.get("ok"):
                    return f"message_agent failed: {json.dumps(sent)[:2000]}"
                return Reply.tool_use(tool("wait_for_agent"), {"agent": codex_address, "replyToMessageId": sent["messageId"],
                                                               "timeoutMs": 45_000})

            messages.enqueue(
                Reply.tool_use(tool("message_agent"), {"to": codex_address, "message": QUESTION, "anticipation": "reply"}),
                wait_for_the_reply,
                "Codex says the staging build listens on 8443.",
            )
            async with raw.subscription(thread_id=thread_id) as items:
                done = await anyio.to_thread.run_sync(
                    lambda: claude.run_p("ask the Codex thread which port staging uses", cwd=project, timeout_s=RUN_TIMEOUT_S))
                assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
                claude_address = f"claude:{claude.session_of(done, cwd=project).session_id}"
                assert json.loads(done.stdout)["result"] == "Codex says the staging build listens on 8443.", done.stdout

                # 1. Claude's message_agent stored the message and delivered it into the Codex thread as a turn
                first, after_send, after_wait = messages.main_requests
                assert tool("message_agent") in first.tool_names() and not messages.unscripted
                sent = tool_result(after_send)
                assert sent["ok"] and (sent["to"], sent["harness"]) == (codex_address, "codex"), sent
                mid = sent["messageId"]
                assert (sent["delivery"], sent["deliveredVia"], sent["action"]) == ("delivered", "codex-turn", "started_turn"), sent
                # the thread's userMessage echoed the message id: the proof of delivery
                assert (sent["evidence"]["clientId"], sent["evidence"]["threadId"]) == (mid, thread_id), sent
                called = await items.wait_for(lambda n: n.method == "item/completed" and n.params["item"]["type"] == "mcpToolCall",
                                              timeout_ms=WAIT_MS)

        # 2. the Codex stub model saw the envelope (from the Claude session, with the question) on that thread
        seen = responses.wait_for(lambda r: r.contains(f'<agent-link-message id="{mid}"'), 1)
        assert seen.thread_id == thread_id
        [envelope] = [t for t in seen.user_texts() if mid in t]
        assert f'from="{claude_address}"' in envelope and QUESTION in envelope

        # 3. ...and answered through agent-link's reply tool in the Codex thread
        item = called.params["item"]
        assert (item["server"], item["tool"], item["status"]) == ("agent-link", "reply_agent_link_message", "completed"), item
        assert item["arguments"]["messageId"] == mid
        replied = item["result"]["structuredContent"]
        assert replied["ok"] and replied["replyToMessageId"] == mid and replied["target"]["address"] == claude_address

        # 4. Claude's wait_for_agent returned the reply, and the Claude stub model got its text
        waited = tool_result(after_wait)
        assert waited["ok"] and waited["outcome"] == "reply", waited
        assert (waited["reply"]["from"], waited["reply"]["fromVerified"]) == (codex_address, True)
        assert ANSWER in waited["reply"]["envelope"]
        assert ANSWER in after_wait.text()

    # the shared mailbox tells the same story
    app = App.create()
    try:
        row = app.mailbox.get_row(mid)
        assert (row["from_addr"], row["from_source"], row["recipient"], row["delivered_via"]) == (
            claude_address, "current_session", codex_address, "codex-turn")
        assert app.mailbox.state(row).status == "replied"
        answer = app.mailbox.get_row(waited["reply"]["id"])
        assert (answer["from_addr"], answer["recipient"], answer["reply_to"], answer["delivered_via"]) == (
            codex_address, claude_address, mid, "wait")
    finally:
        await app.aclose()
    # nothing that worked on this mailbox outlived the test: app-server, MCP servers, claude, hooks
    assert processes_with(state) == []
