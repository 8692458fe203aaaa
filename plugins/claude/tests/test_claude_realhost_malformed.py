"""Malformed input never hangs a client (issue 18), against the REAL, pinned ``claude -p``.

The stub model calls ``message_agent`` with a lone UTF-16 surrogate in its arguments, as a
model once did: Claude Code passes it on to agent-link's MCP server as the JSON escape
``\\ud800``. The call must be answered (the character replaced, with a warning naming the
field), the message stored, and the run must finish instead of waiting for an answer that
never comes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_link_core.app import App
from agent_link_testing.claude_host import mcp_tool_name, plain_server_host
from agent_link_testing.messages_stub import MessagesStub, Reply

pytestmark = [pytest.mark.realhost, pytest.mark.timeout(240)]
RUN_TIMEOUT_S = 120.0


@pytest.fixture
def stub() -> Iterator[MessagesStub]:
    with MessagesStub() as s:
        yield s


def test_a_tool_call_with_a_lone_surrogate_is_answered_and_the_run_finishes(
    stub: MessagesStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_env: Path,
) -> None:
    host, config = plain_server_host(tmp_path, stub, isolated_env)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(host.config_dir))
    stub.enqueue(Reply.tool_use(mcp_tool_name("agent-link", "message_agent"),
                                {"to": "team:bob", "message": "half an emoji: \ud83d and the rest"}, id="toolu_surrogate"),
                 "Sent.")
    cwd = tmp_path / "proj"
    cwd.mkdir()
    done = host.run_p("tell bob", cwd=cwd, args=["--mcp-config", str(config)], timeout_s=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["result"] == "Sent."
    [result] = stub.main_requests[-1].tool_results()
    assert result["tool_use_id"] == "toolu_surrogate" and not result.get("is_error"), result
    text = result["content"][0]["text"] if isinstance(result["content"], list) else result["content"]
    sent = json.loads(text)
    assert sent["ok"] is True, sent
    [warning] = [w for w in sent["warnings"] if w["code"] == "lone_surrogate_replaced"]
    assert warning["details"]["paths"] == ["params.arguments.message"]
    app = App.create()
    try:
        assert app.mailbox.stored(sent["messageId"])["body"] == "half an emoji: \ufffd and the rest"
    finally:
        app.close()
