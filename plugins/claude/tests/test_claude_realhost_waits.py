"""Waits see mail that came before them (issue 18, "Waits"), from a REAL ``claude -p``.

Bob writes to a Claude session while it does not run (no agent-link server of its is up).
When the session is resumed and its model calls ``wait_for_agent {agent: team:bob}``, the
wait returns that unread message at once (``arrivedBeforeWait``) instead of waiting for a new
one and timing out; the next wait returns the next unread one, and only then times out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent_link_core.cli import build_cli
from agent_link_testing.claude_host import mcp_tool_name, plain_server_host
from agent_link_testing.messages_stub import MessagesStub, Reply

pytestmark = [pytest.mark.realhost, pytest.mark.timeout(240)]
RUN_TIMEOUT_S = 120.0
WAIT = mcp_tool_name("agent-link", "wait_for_agent")


@pytest.fixture
def stub() -> Iterator[MessagesStub]:
    with MessagesStub() as s:
        yield s


def results(stub: MessagesStub) -> list[dict[str, Any]]:
    """Every tool result the model was sent, oldest first (each once)."""
    out: dict[str, dict[str, Any]] = {}
    for request in stub.main_requests:
        for result in request.tool_results():
            text = result["content"][0]["text"] if isinstance(result["content"], list) else result["content"]
            out.setdefault(result["tool_use_id"], json.loads(text))
    return list(out.values())


def test_a_wait_returns_mail_that_came_while_the_session_was_down(
    stub: MessagesStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_env: Path,
) -> None:
    host, config = plain_server_host(tmp_path, stub, isolated_env, AGENT_LINK_DISABLE_CLAUDE_INBOX="1")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(host.config_dir))
    cwd = tmp_path / "proj"
    cwd.mkdir()
    stub.enqueue("Ready.")
    first = host.run_p("hello", cwd=cwd, args=["--mcp-config", str(config)], timeout_s=RUN_TIMEOUT_S)
    assert first.returncode == 0, first.stderr[-2000:]
    sid = str(json.loads(first.stdout)["session_id"])

    # the session does not run: Bob's mail waits in its mailbox
    sent = []
    for body in ("sent while you were away", "and another"):
        out = CliRunner().invoke(build_cli(), ["send", f"claude:{sid}", body, "--from", "team:bob", "--json"],
                                 catch_exceptions=False)
        sent.append(json.loads(out.stdout)["messageId"])

    stub.enqueue(Reply.tool_use(WAIT, {"agent": "team:bob", "timeoutMs": 60000}),
                 Reply.tool_use(WAIT, {"agent": "team:bob", "timeoutMs": 60000}),
                 Reply.tool_use(WAIT, {"agent": "team:bob", "timeoutMs": 1000}),
                 "Read both.")
    resumed = host.run_p("anything from bob?", cwd=cwd, args=["--mcp-config", str(config), "--resume", sid],
                         timeout_s=RUN_TIMEOUT_S)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert json.loads(resumed.stdout)["session_id"] == sid
    got = results(stub)
    assert [g["ok"] for g in got] == [True, True, True], got
    assert [g["outcome"] for g in got] == ["reply", "reply", "timeout"], got
    assert [g["reply"]["id"] for g in got[:2]] == sent
    assert all(g["arrivedBeforeWait"] is True for g in got[:2])
    assert "while you were away" in got[0]["reply"]["envelope"]
