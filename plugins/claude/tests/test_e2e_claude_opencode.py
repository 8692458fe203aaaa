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

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_link_core.app import App
from agent_link_testing.messages_stub import MessagesStub, RecordedRequest, Reply, tool_result
from agent_link_testing.opencode_host import OpencodeServer
from agent_link_testing.round_trip import (
    ANSWER,
    OPENCODE_JS_PLUGIN,
    QUESTION,
    messages_replier,
    opencode_mcp,
    strings,
    wait_for_the_reply,
)

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(300)]

SERVER_RULE = "mcp__plugin_agent-link_codex-agent-link"
RUN_TIMEOUT_S = 150.0
PLUGINS = "claude opencode waits"


def envelope_of(request: RecordedRequest, message_id: str) -> str | None:
    """The text of ``request``'s messages that holds the envelope of ``message_id``."""
    return next((t for t in strings(request.messages) if f'<agent-link-message id="{message_id}"' in t), None)


def tool(name: str) -> str:
    return f"{SERVER_RULE}__{name}"


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
    project = tmp_path / "proj"
    project.mkdir()
    opencode_model.enqueue(messages_replier(isolated_env / "agent-link.db", "agent-link_reply_agent_link_message"),
                           "Answered the Claude session.")
    with OpencodeServer(opencode_model.base_url, mcp=opencode_mcp(opencode_side),
                        config_extra={"plugin": [OPENCODE_JS_PLUGIN.as_uri()]}) as opencode:
        session = opencode.request("POST", "/session", {"title": "staging questions"})
        opencode_address = f"opencode:{session['id']}"
        claude_side = {"AGENT_LINK_STATE_DIR": state, "AGENT_LINK_OPENCODE_SERVERS": str(opencode.url),
                       "AGENT_LINK_LOAD_PLUGINS": PLUGINS}
        claude = installed.host(stub=claude_model, env=claude_side)
        for name, value in {**claude_side, "CLAUDE_CONFIG_DIR": str(claude.config_dir)}.items():
            monkeypatch.setenv(name, value)  # this process's App reads the same mailbox afterwards

        claude_model.enqueue(
            Reply.tool_use(tool("message_agent"), {"to": opencode_address, "message": QUESTION, "anticipation": "reply"}),
            wait_for_the_reply(tool("wait_for_agent"), opencode_address, 60_000),
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
