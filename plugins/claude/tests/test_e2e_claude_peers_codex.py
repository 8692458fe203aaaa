"""End to end on both real hosts, through Claude Code's own messaging tools: a Claude session's
``SendMessage`` to a published Codex thread reaches that thread, and the thread's reply comes
back into the Claude session through the session's inbox socket.

* Codex side: the pinned ``codex app-server`` against the stub Responses API, agent-link as its
  MCP server; its stub model answers an agent-link envelope with ``reply_agent_link_message``.
* Claude side: a plain ``claude -p`` stream session (no agent-link plugin, no ``--channels``)
  against the stub Messages API; its stub model loads ``SendMessage`` and sends to the Codex
  thread by the name agent-link published.
* In between: this test's :class:`PeerPublisher` (what ``agent-link claude-peers`` runs), one
  shared mailbox.

On a release without inbox sockets (the previous pin) there is no ``SendMessage`` to other
sessions; the test then checks that a published record is still cleaned up and stops there.
"""

from __future__ import annotations

import json
import os
import queue
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from agent_link_claude.peers import PeerPublisher, forward
from agent_link_core.app import App
from agent_link_testing.claude_host import ClaudeHost
from agent_link_testing.codex_host import CodexAppServer
from agent_link_testing.hosts import claude_version, version_at_least
from agent_link_testing.messages_stub import MessagesStub, Reply
from agent_link_testing.responses_stub import ResponsesStub
from agent_link_testing.round_trip import ANSWER, QUESTION, CodexReplier, codex_mcp_servers, codex_thread

pytestmark = [pytest.mark.realhost, pytest.mark.timeout(300)]

RUN_TIMEOUT_S = 120.0
WAIT_MS = 30_000
PLUGINS_OFF = "roles receipts"
PEER_NAME = "staging-codex"


@pytest.fixture
def responses(isolated_env: Path) -> Iterator[ResponsesStub]:
    with ResponsesStub(responder=CodexReplier(isolated_env / "agent-link.db", "Answered the Claude session.")) as server:
        yield server


@pytest.fixture
def messages() -> Iterator[MessagesStub]:
    with MessagesStub() as server:
        yield server


def test_send_message_to_a_published_codex_thread_and_its_reply_comes_back(
    messages: MessagesStub, responses: ResponsesStub, isolated_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = str(isolated_env)
    claude = ClaudeHost.create(tmp_path / "claude-home", stub=messages)
    cfg = str(claude.config_dir)
    codex_side = {"AGENT_LINK_STATE_DIR": state, "AGENT_LINK_HOST": "codex", "AGENT_LINK_CODEX_AUTOSTART": "0",
                  "AGENT_LINK_DISABLE_PLUGINS": PLUGINS_OFF, "CLAUDE_CONFIG_DIR": cfg}
    project = tmp_path / "proj"
    project.mkdir()
    with CodexAppServer(responses.base_url, root=tmp_path / "codex", mcp_servers=codex_mcp_servers(codex_side)) as codex:
        for name, value in {"AGENT_LINK_CODEX_SOCK": str(codex.socket_path), "AGENT_LINK_CODEX_AUTOSTART": "0",
                            "CODEX_HOME": str(codex.codex_home), "AGENT_LINK_DISABLE_PLUGINS": PLUGINS_OFF,
                            "CLAUDE_CONFIG_DIR": cfg, "AGENT_LINK_CLAUDE_INBOX_WAIT_MS": "60000"}.items():
            monkeypatch.setenv(name, value)

        async def start_thread() -> str:
            async with codex_thread(codex.socket_path, WAIT_MS) as (_, thread_id):
                return str(thread_id)

        codex_address = f"codex:{anyio.run(start_thread)}"
        app = App.create()
        received: queue.Queue[tuple[str, str, str]] = queue.Queue()
        publisher = PeerPublisher(cfg, lambda target, sid, body: received.put((target, sid, body)))
        try:
            publisher.publish(codex_address, PEER_NAME, str(project))
            [record] = [json.loads(p.read_text()) for p in claude.sessions_dir.glob("*.json")]
            assert record["name"] == PEER_NAME
            if not version_at_least(claude_version(), "2.1.224"):
                publisher.close()
                assert list(claude.sessions_dir.glob("*")) == []  # the record and key file are gone
                return
            messages.enqueue(
                Reply.tool_use("ListAgents", {}),
                Reply.tool_use("ToolSearch", {"query": "select:SendMessage"}),
                Reply.tool_use("SendMessage", {"to": PEER_NAME, "message": QUESTION}),
                "Asked the Codex thread.",
                "Codex says the staging build listens on 8443.",
            )
            with claude.start_stream(cwd=project) as stream:
                stream.send("ask the staging Codex thread which port it uses")
                stream.wait_results(1, RUN_TIMEOUT_S)
                listed = messages.main_requests[1].tool_results()[0]["content"]
                assert PEER_NAME in json.dumps(listed)
                target, sid, body = received.get(timeout=60)
                assert (target, body) == (codex_address, QUESTION)
                assert sid == stream.events[0]["session_id"]  # the kernel's word for who sent it
                sent = forward(app, target, sid, body)
                assert sent["delivered"] and sent["from"] == f"claude:{sid}", sent
                # the thread answers through agent-link; its reply reaches the session as a new turn
                results = stream.wait_results(2, RUN_TIMEOUT_S)
                assert results[1]["result"] == "Codex says the staging build listens on 8443."
            seen = messages.main_requests[-1]
            assert seen.locate(ANSWER) and seen.locate(f'from="{codex_address}"')
            row = app.mailbox.get_row(sent["messageId"])
            assert (row["from_addr"], row["recipient"], row["delivered_via"]) == (f"claude:{sid}", codex_address, "codex-turn")
            # the kernel-reported sender is the real Claude Code process of that session: proved
            assert app.mailbox.to_view(row)["fromVerified"] is True
            assert app.mailbox.state(row).status == "replied"
            # the Codex side's agent-link records the delivery once it sees the transcript line,
            # which the model's request may overtake: give it a generous bound, then check
            deadline = time.monotonic() + 60
            while True:
                [reply] = app.store.conn.execute("SELECT * FROM messages WHERE reply_to = ?", (sent["messageId"],)).fetchall()
                if reply["delivered_via"] is not None or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert (reply["from_addr"], reply["delivered_via"]) == (codex_address, "claude-inbox")
        finally:
            publisher.close()
            app.close()
    assert not [p for p in claude.sessions_dir.glob("*.json") if json.loads(p.read_text()).get("name") == PEER_NAME]
    assert os.path.isdir(cfg)
