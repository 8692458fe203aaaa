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

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_link_core.app import App
from agent_link_testing.codex_host import CodexAppServer
from agent_link_testing.messages_stub import MessagesStub, Reply, tool_result
from agent_link_testing.responses_stub import ResponsesStub
from agent_link_testing.round_trip import ANSWER, QUESTION, CodexReplier, codex_mcp_servers, codex_thread, wait_for_the_reply

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(240)]

SERVER_RULE = "mcp__plugin_agent-link_codex-agent-link"
RUN_TIMEOUT_S = 120.0
WAIT_MS = 30_000
# both agent-link processes load the two host harnesses; the roles and receipts plugins play no part
PLUGINS_OFF = "roles receipts"


def tool(name: str) -> str:
    return f"{SERVER_RULE}__{name}"


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
    with ResponsesStub(responder=CodexReplier(isolated_env / "agent-link.db", "Answered the Claude session.")) as server:
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
    project = tmp_path / "proj"
    project.mkdir()
    with CodexAppServer(responses.base_url, root=tmp_path / "codex", mcp_servers=codex_mcp_servers(codex_side)) as codex:
        # what claude -p passes on to the plugin's MCP server and hooks: the shared mailbox and
        # the way to the Codex app-server
        claude_side = {"AGENT_LINK_STATE_DIR": state, "AGENT_LINK_CODEX_SOCK": str(codex.socket_path),
                       "AGENT_LINK_CODEX_AUTOSTART": "0", "CODEX_HOME": str(codex.codex_home),
                       "AGENT_LINK_DISABLE_PLUGINS": PLUGINS_OFF}
        claude = installed.host(stub=messages, env=claude_side)
        for name, value in {**claude_side, "CLAUDE_CONFIG_DIR": str(claude.config_dir)}.items():
            monkeypatch.setenv(name, value)  # this process's App reads the same mailbox afterwards

        async with codex_thread(codex.socket_path, WAIT_MS) as (raw, thread_id):
            codex_address = f"codex:{thread_id}"
            messages.enqueue(
                Reply.tool_use(tool("message_agent"), {"to": codex_address, "message": QUESTION, "anticipation": "reply"}),
                wait_for_the_reply(tool("wait_for_agent"), codex_address, 45_000),
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
