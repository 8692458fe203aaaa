"""End to end on both real hosts: an opencode session messages a real Codex thread and gets its
reply back through its wait.

* opencode side: the pinned ``opencode serve`` against the stub Messages API, with agent-link's
  MCP server and its opencode plugin in its config (as ``agent-link install opencode`` writes
  them); the MCP server reaches the Codex app-server through ``AGENT_LINK_CODEX_SOCK``.
* Codex side: the pinned ``codex app-server`` against the stub Responses API, with agent-link
  configured as an MCP server in its CODEX_HOME, tools approved.
* Both agent-link processes share one ``AGENT_LINK_STATE_DIR`` (one mailbox).

The opencode stub model calls ``message_agent`` to ``codex:<thread id>`` (anticipation reply,
signed as the opencode session, proven); agent-link starts a turn in the Codex thread with the
envelope; the Codex stub model calls ``reply_agent_link_message`` with that message id; the
opencode stub model's ``wait_for_agent`` returns the reply.

If a program is missing this test fails with "run `make hosts`" -- it never skips.
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agent_link_opencode
from agent_link_codex.appserver import AppServerClient
from agent_link_core.app import App
from agent_link_testing.claude_host import agent_link_bin
from agent_link_testing.codex_host import CodexAppServer, McpServerConfig
from agent_link_testing.messages_stub import MessagesStub, RecordedRequest, Reply
from agent_link_testing.opencode_host import OpencodeServer
from agent_link_testing.responses_stub import ResponsesStub, StubRequest, mcp_tool_call, text

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(300)]

WAIT_MS = 30_000
QUESTION = "Which port does the staging build listen on?"
ANSWER = "Port 8443, per deploy/staging.toml."
ENVELOPE_ID = re.compile(r'<agent-link-message id="([0-9A-HJKMNP-TV-Z]{26})"')
JS_PLUGIN = Path(agent_link_opencode.__file__).parent / "host_plugin" / "agent-link.js"
PLUGINS = "codex opencode"


def tool_result(request: RecordedRequest) -> dict[str, Any]:
    """The JSON object of the single agent-link tool result in an opencode stub request."""
    [block] = request.tool_results()
    content = block["content"]
    return json.loads(content if isinstance(content, str) else "".join(c.get("text", "") for c in content))


class CodexModel:
    """The Codex stub model: answers an agent-link envelope through agent-link's reply tool
    once the sender's agent-link recorded the delivery (at most :data:`THINK_S`), then ends
    the turn once it has the tool's result."""

    THINK_S = 10.0

    def __init__(self, db_path: Path) -> None:
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
            return text("Answered the opencode session.")
        for chunk in request.user_texts():
            found = ENVELOPE_ID.search(chunk)
            if found:
                self._delivery_recorded(found.group(1))
                return mcp_tool_call("agent_link", "reply_agent_link_message", {"messageId": found.group(1), "message": ANSWER})
        return None


@pytest.fixture
def responses(isolated_env: Path) -> Iterator[ResponsesStub]:
    with ResponsesStub(responder=CodexModel(isolated_env / "agent-link.db")) as server:
        yield server


@pytest.fixture
def messages() -> Iterator[MessagesStub]:
    with MessagesStub() as server:
        yield server


async def test_opencode_session_messages_a_codex_thread_and_gets_its_reply(
    messages: MessagesStub, responses: ResponsesStub, isolated_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = str(isolated_env)
    codex_home = str(tmp_path / "codex" / "codex-home")
    codex_side = {"AGENT_LINK_STATE_DIR": state, "AGENT_LINK_HOST": "codex", "AGENT_LINK_CODEX_AUTOSTART": "0",
                  "AGENT_LINK_LOAD_PLUGINS": PLUGINS, "CODEX_HOME": codex_home}
    servers = {"agent-link": McpServerConfig(command=str(agent_link_bin()), args=["mcp"], env=codex_side, startup_timeout_sec=30)}
    with CodexAppServer(responses.base_url, root=tmp_path / "codex", mcp_servers=servers) as codex:
        opencode_side = {"AGENT_LINK_STATE_DIR": state, "AGENT_LINK_HOST": "opencode", "AGENT_LINK_LOAD_PLUGINS": PLUGINS,
                         "AGENT_LINK_CODEX_SOCK": str(codex.socket_path), "AGENT_LINK_CODEX_AUTOSTART": "0",
                         "CODEX_HOME": str(codex.codex_home)}
        mcp = {"agent-link": {"type": "local", "enabled": True, "command": [str(agent_link_bin()), "mcp"],
                              "environment": opencode_side}}
        for name, value in opencode_side.items():
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
            return Reply.tool_use("agent-link_wait_for_agent", {"agent": codex_address, "replyToMessageId": sent["messageId"],
                                                                "timeoutMs": 60_000})

        messages.enqueue(
            Reply.tool_use("agent-link_message_agent", {"to": codex_address, "message": QUESTION, "anticipation": "reply"}),
            wait_for_the_reply,
            "Codex says the staging build listens on 8443.",
        )
        with OpencodeServer(messages.base_url, mcp=mcp, config_extra={"plugin": [JS_PLUGIN.as_uri()]}) as opencode:
            session = opencode.request("POST", "/session", {"title": "ask codex"})
            opencode_address = f"opencode:{session['id']}"
            opencode.request("POST", f"/session/{session['id']}/prompt_async",
                             {"parts": [{"type": "text", "text": "ask the Codex thread which port staging uses"}]})
            opencode.wait_for_reply(session["id"], timeout_s=150)

    first, after_send, after_wait = messages.main_requests[:3]
    # 1. opencode's message_agent, signed as its session (proven), started a turn in the Codex thread
    sent = tool_result(after_send)
    assert sent["ok"] and (sent["to"], sent["harness"]) == (codex_address, "codex"), sent
    mid = sent["messageId"]
    assert (sent["delivery"], sent["deliveredVia"]) == ("delivered", "codex-turn"), sent
    # 2. the Codex stub model saw the envelope from the opencode session, with the question
    seen = responses.wait_for(lambda r: r.contains(f'<agent-link-message id="{mid}"'), 1)
    assert seen.thread_id == thread_id
    [envelope] = [t for t in seen.user_texts() if mid in t]
    assert f'from="{opencode_address}"' in envelope and 'fromVerified="true"' in envelope and QUESTION in envelope
    # 3. opencode's wait_for_agent returned the reply Codex sent through reply_agent_link_message
    waited = tool_result(after_wait)
    assert waited["ok"] and waited["outcome"] == "reply", waited
    assert (waited["reply"]["from"], waited["reply"]["fromVerified"]) == (codex_address, True)
    assert ANSWER in waited["reply"]["envelope"]

    app = App.create()
    try:
        row = app.mailbox.get_row(mid)
        assert (row["from_addr"], row["recipient"], row["delivered_via"]) == (opencode_address, codex_address, "codex-turn")
        assert app.mailbox.state(row).status == "replied"
    finally:
        await app.aclose()
