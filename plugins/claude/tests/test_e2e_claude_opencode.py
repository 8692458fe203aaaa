"""End to end on both real hosts: a Claude Code session messages a real opencode session and
gets its reply back.

* Claude side: the pinned ``claude -p`` against one stub Messages API, agent-link installed as a
  plugin (conftest ``installed``); its agent-link MCP server finds the opencode server through
  ``AGENT_LINK_OPENCODE_SERVERS``, which claude passes on from its own environment.
* opencode side: the pinned ``opencode serve`` against a second stub Messages API, with
  agent-link's MCP server and its opencode plugin (``host_plugin/agent-link.js``) in its config,
  as ``agent-link install opencode`` writes them.
* Both agent-link processes share one ``AGENT_LINK_STATE_DIR`` (one mailbox).

The Claude stub model calls ``message_agent`` to ``opencode:<session id>`` (anticipation
reply); agent-link pushes the envelope into the idle opencode session (``prompt_async``); the
opencode stub model, seeing the envelope, calls ``reply_agent_link_message`` with that message
id (signed as the opencode session, proven); the Claude stub model's ``wait_for_agent``
returns the reply.
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

import anyio
import pytest

import agent_link_opencode
from agent_link_core.app import App
from agent_link_testing.claude_host import agent_link_bin
from agent_link_testing.messages_stub import MessagesStub, RecordedRequest, Reply
from agent_link_testing.opencode_host import OpencodeServer

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(300)]

SERVER_RULE = "mcp__plugin_agent-link_codex-agent-link"
RUN_TIMEOUT_S = 150.0
QUESTION = "Which port does the staging build listen on?"
ANSWER = "Port 8443, per deploy/staging.toml."
ENVELOPE_ID = re.compile(r'<agent-link-message id="([0-9A-HJKMNP-TV-Z]{26})"')
JS_PLUGIN = Path(agent_link_opencode.__file__).parent / "host_plugin" / "agent-link.js"
PLUGINS = "claude opencode"


def strings(node: Any) -> Iterator[str]:
    """Every string in a JSON value (the texts a request carries, unescaped)."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from strings(value)


def envelope_of(request: RecordedRequest, message_id: str) -> str | None:
    """The text of ``request``'s messages that holds the envelope of ``message_id``."""
    return next((t for t in strings(request.messages) if f'<agent-link-message id="{message_id}"' in t), None)


def tool(name: str) -> str:
    return f"{SERVER_RULE}__{name}"


def tool_result(request: RecordedRequest) -> dict[str, Any]:
    """The JSON object of the single agent-link tool result in a Claude stub request."""
    [block] = request.tool_results()
    content = block["content"]
    return json.loads(content if isinstance(content, str) else "".join(c.get("text", "") for c in content))


class OpencodeModel:
    """The opencode stub model's first answer: a reply through agent-link's reply tool to the
    envelope in its request, once the sender's agent-link recorded the delivery (a model takes
    a moment; at most :data:`THINK_S`)."""

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

    def __call__(self, request: RecordedRequest) -> Reply | str:
        found = next((m for m in map(ENVELOPE_ID.search, strings(request.messages)) if m), None)
        if found is None:
            return "no agent-link envelope in this request"
        self._delivery_recorded(found.group(1))
        return Reply.tool_use("agent-link_reply_agent_link_message", {"messageId": found.group(1), "message": ANSWER})


@pytest.fixture
def claude_model() -> Iterator[MessagesStub]:
    with MessagesStub() as server:
        yield server


@pytest.fixture
def opencode_model() -> Iterator[MessagesStub]:
    with MessagesStub() as server:
        yield server


async def test_claude_session_messages_an_opencode_session_and_gets_its_reply(
    installed: Any, claude_model: MessagesStub, opencode_model: MessagesStub, isolated_env: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = str(isolated_env)
    opencode_side = {"AGENT_LINK_STATE_DIR": state, "AGENT_LINK_HOST": "opencode", "AGENT_LINK_LOAD_PLUGINS": PLUGINS}
    mcp = {"agent-link": {"type": "local", "enabled": True, "command": [str(agent_link_bin()), "mcp"], "environment": opencode_side}}
    project = tmp_path / "proj"
    project.mkdir()
    opencode_model.enqueue(OpencodeModel(isolated_env / "agent-link.db"), "Answered the Claude session.")
    with OpencodeServer(opencode_model.base_url, mcp=mcp, config_extra={"plugin": [JS_PLUGIN.as_uri()]}) as opencode:
        session = opencode.request("POST", "/session", {"title": "staging questions"})
        opencode_address = f"opencode:{session['id']}"
        claude_side = {"AGENT_LINK_STATE_DIR": state, "AGENT_LINK_OPENCODE_SERVERS": str(opencode.url),
                       "AGENT_LINK_LOAD_PLUGINS": PLUGINS}
        claude = installed.host(stub=claude_model, env=claude_side)
        for name, value in {**claude_side, "CLAUDE_CONFIG_DIR": str(claude.config_dir)}.items():
            monkeypatch.setenv(name, value)  # this process's App reads the same mailbox afterwards

        def wait_for_the_reply(request: RecordedRequest) -> Reply | str:
            sent = tool_result(request)
            if not sent.get("ok"):
                return f"message_agent failed: {json.dumps(sent)[:2000]}"
            return Reply.tool_use(tool("wait_for_agent"), {"agent": opencode_address, "replyToMessageId": sent["messageId"],
                                                           "timeoutMs": 60_000})

        claude_model.enqueue(
            Reply.tool_use(tool("message_agent"), {"to": opencode_address, "message": QUESTION, "anticipation": "reply"}),
            wait_for_the_reply,
            "opencode says the staging build listens on 8443.",
        )
        done = await anyio.to_thread.run_sync(
            lambda: claude.run_p("ask the opencode session which port staging uses", cwd=project, timeout_s=RUN_TIMEOUT_S))
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
        claude_address = f"claude:{claude.session_of(done, cwd=project).session_id}"
        assert json.loads(done.stdout)["result"] == "opencode says the staging build listens on 8443.", done.stdout
        opencode.wait_for_reply(session["id"], timeout_s=60)

        # 1. Claude's message_agent stored the message and delivered it into the opencode session
        first, after_send, after_wait = claude_model.main_requests
        sent = tool_result(after_send)
        assert sent["ok"] and (sent["to"], sent["harness"]) == (opencode_address, "opencode"), sent
        mid = sent["messageId"]
        assert (sent["delivery"], sent["deliveredVia"]) == ("delivered", "opencode-prompt"), sent

    # 2. the opencode stub model saw the envelope from the Claude session, with the question
    envelope = next(e for e in map(lambda r: envelope_of(r, mid), opencode_model.main_requests) if e)
    assert f'from="{claude_address}"' in envelope and QUESTION in envelope

    # 3. Claude's wait_for_agent returned the reply, signed by the opencode session, proven
    waited = tool_result(after_wait)
    assert waited["ok"] and waited["outcome"] == "reply", waited
    assert (waited["reply"]["from"], waited["reply"]["fromVerified"]) == (opencode_address, True)
    assert ANSWER in waited["reply"]["envelope"] and ANSWER in after_wait.text()

    app = App.create()
    try:
        row = app.mailbox.get_row(mid)
        assert (row["from_addr"], row["recipient"], row["delivered_via"]) == (claude_address, opencode_address, "opencode-prompt")
        assert app.mailbox.state(row).status == "replied"
    finally:
        await app.aclose()
