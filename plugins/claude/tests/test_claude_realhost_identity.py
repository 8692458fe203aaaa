"""Who signs: a sender is verified only when Claude Code proves it (issues 18 and 29,
"Identity"), against the REAL, pinned ``claude -p``.

* inside a real session, the agent-link MCP server Claude Code started signs as that session,
  ``fromVerified="true"``: its parent is the Claude Code process whose own live-session record
  names the session;
* a CLI call outside any Claude process whose ``CLAUDE_CODE_SESSION_ID`` names that same
  (real) session is stored ``fromVerified="false"`` with a ``sender_unverified`` warning
  (``not_proven``): a variable anyone can set is not proof (issue 29);
* the same call naming a session Claude Code never had is unverified too (``no_such_session``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent_link_core.app import App
from agent_link_core.cli import build_cli
from agent_link_testing.claude_host import mcp_tool_name, plain_server_host
from agent_link_testing.messages_stub import MessagesStub, Reply

pytestmark = [pytest.mark.realhost, pytest.mark.timeout(240)]
RUN_TIMEOUT_S = 120.0
GHOST = "eeeeeeee-0000-4000-8000-00000000000e"


@pytest.fixture
def stub() -> Iterator[MessagesStub]:
    with MessagesStub() as s:
        yield s


def cli_send(env: dict[str, str], body: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(build_cli(), ["send", "team:bob", body, "--json"], catch_exceptions=False)
    return dict(json.loads(result.stdout))


def stored(body: str) -> dict[str, Any]:
    app = App.create()
    try:
        row = app.store.conn.execute("SELECT id FROM messages WHERE body = ?", (body,)).fetchone()
        message = app.mailbox.stored(row["id"])
        return {**app.mailbox.to_view(message), "envelope": app.mailbox.envelope(message)}
    finally:
        app.close()


def test_only_a_process_of_the_claude_code_session_signs_verified(
    stub: MessagesStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_env: Path,
) -> None:
    host, config = plain_server_host(tmp_path, stub, isolated_env)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(host.config_dir))
    stub.enqueue(Reply.tool_use(mcp_tool_name("agent-link", "message_agent"), {"to": "team:bob", "message": "from inside"}),
                 "Sent.")
    cwd = tmp_path / "proj"
    cwd.mkdir()
    done = host.run_p("tell bob", cwd=cwd, args=["--mcp-config", str(config)], timeout_s=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-2000:]
    sid = str(json.loads(done.stdout)["session_id"])
    [result] = stub.main_requests[-1].tool_results()
    sent = json.loads(result["content"][0]["text"] if isinstance(result["content"], list) else result["content"])
    assert sent["ok"] is True and "sender_unverified" not in {w["code"] for w in sent.get("warnings", [])}, sent
    inside = stored("from inside")
    assert inside["from"] == f"claude:{sid}" and inside["fromVerified"] is True
    assert 'fromVerified="true"' in inside["envelope"]

    # a CLI call outside Claude Code: the variable names the real session, but no Claude Code
    # process of that session is above this process, so nothing proves it
    assert os.environ.get("CLAUDE_CODE_SESSION_ID") is None
    real = cli_send({"CLAUDE_CODE_SESSION_ID": sid}, "named the real session", monkeypatch)
    [warning] = [w for w in real["warnings"] if w["code"] == "sender_unverified"]
    assert real["outcome"] == "queued" and warning["details"] == {"address": f"claude:{sid}", "namedBy": "env", "reason": "not_proven"}
    assert stored("named the real session")["fromVerified"] is False

    # the same call naming a session Claude Code never had: unverified, and said so
    ghost = cli_send({"CLAUDE_CODE_SESSION_ID": GHOST}, "named a ghost", monkeypatch)
    [warning] = [w for w in ghost["warnings"] if w["code"] == "sender_unverified"]
    assert warning["details"] == {"address": f"claude:{GHOST}", "namedBy": "env", "reason": "no_such_session"}
    view = stored("named a ghost")
    assert view["from"] == f"claude:{GHOST}" and view["fromVerified"] is False
    assert 'fromVerified="false"' in view["envelope"]
