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

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_link_core.app import App
from agent_link_testing.codex_host import CodexAppServer
from agent_link_testing.messages_stub import MessagesStub, Reply, tool_result
from agent_link_testing.opencode_host import OpencodeServer
from agent_link_testing.responses_stub import ResponsesStub
from agent_link_testing.round_trip import (
    ANSWER,
    OPENCODE_JS_PLUGIN,
    QUESTION,
    CodexReplier,
    codex_mcp_servers,
    codex_thread,
    opencode_mcp,
    wait_for_the_reply,
)

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(300)]

WAIT_MS = 30_000
PLUGINS = "codex opencode waits"


@pytest.fixture
def responses(isolated_env: Path) -> Iterator[ResponsesStub]:
    with ResponsesStub(responder=CodexReplier(isolated_env / "agent-link.db", "Answered the opencode session.")) as server:
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
    with CodexAppServer(responses.base_url, root=tmp_path / "codex", mcp_servers=codex_mcp_servers(codex_side)) as codex:
        opencode_side = {"AGENT_LINK_STATE_DIR": state, "AGENT_LINK_HOST": "opencode", "AGENT_LINK_LOAD_PLUGINS": PLUGINS,
                         "AGENT_LINK_CODEX_SOCK": str(codex.socket_path), "AGENT_LINK_CODEX_AUTOSTART": "0",
                         "CODEX_HOME": str(codex.codex_home)}
        for name, value in opencode_side.items():
            monkeypatch.setenv(name, value)  # this process's App reads the same mailbox afterwards
        async with codex_thread(codex.socket_path, WAIT_MS) as (_, thread_id):
            codex_address = f"codex:{thread_id}"
        messages.enqueue(
            Reply.tool_use("agent-link_message_agent", {"to": codex_address, "message": QUESTION, "anticipation": "reply"}),
            wait_for_the_reply("agent-link_wait_for_agent", codex_address, 60_000),
            "Codex says the staging build listens on 8443.",
        )
        with OpencodeServer(messages.base_url, mcp=opencode_mcp(opencode_side),
                            config_extra={"plugin": [OPENCODE_JS_PLUGIN.as_uri()]}) as opencode:
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
