"""The Claude items of the tool contract (issue 12), through the real, pinned Claude Code CLI
with agent-link installed as its plugin and the stub Messages API as the model.

* ``message_claude_session`` to a role returns the send's ``receipt`` and ``roleProcedure``
  (with the receipts and roles plugins on), and a deprecated ``allowTargetOverride`` is
  accepted with a ``deprecated_argument`` warning;
* ``list_agents`` names the roles each session holds (``roles[]``);
* ``agent_link_health`` inside Claude Code says what decided the host (the plugin manifest's
  ``AGENT_LINK_HOST``) and counts the session's mailbox;
* a plain (non-plugin) server with no host setting detects Claude from ``CLAUDE_PROJECT_DIR``;
* ``wait_for_agent`` without ``replyToMessageId`` on a Claude session that was running ends
  with ``idle`` once it stops.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_link_testing.claude_host import ClaudeHost
from agent_link_testing.mcp_client import agent_link_mcp
from agent_link_testing.messages_stub import MessagesStub, RecordedRequest, Reply, tool_result

pytestmark = [pytest.mark.realhost, pytest.mark.timeout(240)]

SERVER_RULE = "mcp__plugin_agent-link_codex-agent-link"
RUN_TIMEOUT_S = 90.0


def tool(name: str) -> str:
    return f"{SERVER_RULE}__{name}"


@pytest.fixture
def stub():
    with MessagesStub() as s:
        yield s


@pytest.fixture
def claude(installed: Any, stub: MessagesStub, monkeypatch: pytest.MonkeyPatch) -> ClaudeHost:
    # the roles and receipts plugins take part here (the suite's default leaves only claude on);
    # the environment reaches the agent-link server every claude process starts
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "codex")
    host = installed.host(stub=stub)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(host.config_dir))
    return host


def project(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.mkdir()
    return path


def new_session(claude: ClaudeHost, stub: MessagesStub, cwd: Path) -> str:
    stub.enqueue("Ready.")
    done = claude.run_p("hello", cwd=cwd, timeout_s=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    return claude.session_of(done, cwd=cwd).session_id


def test_a_send_to_a_role_returns_receipt_and_procedure_and_listings_show_roles(
    claude: ClaudeHost, stub: MessagesStub, tmp_path: Path, isolated_env: Path,
) -> None:
    proj_b, proj_a = project(tmp_path, "b"), project(tmp_path, "a")
    b = new_session(claude, stub, proj_b)
    isolated_env.mkdir(parents=True, exist_ok=True)
    (isolated_env / "roles.json").write_text(json.dumps({"version": 1, "roles": {"reviewer": {"address": f"claude:{b}"}}}))
    (isolated_env / "roles").mkdir(exist_ok=True)
    (isolated_env / "roles" / "reviewer.md").write_text("Answer review requests within the hour.")

    stub.enqueue(
        # message_claude_session is not in the host's default list: reached through agent_link_tools
        Reply.tool_use(tool("agent_link_tools"), {"name": "message_claude_session", "arguments": {
            "sessionId": "role:reviewer", "message": "Please review PR 7.", "anticipation": "reply",
            "allowTargetOverride": True, "receipt": {"purpose": "review request"}}}),
        Reply.tool_use(tool("list_agents"), {"harness": "claude"}),
        Reply.tool_use(tool("agent_link_health"), {}),
        "Done.",
    )
    done = claude.run_p("ask the reviewer", cwd=proj_a, timeout_s=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    a = claude.session_of(done, cwd=proj_a).session_id
    send_req, list_req, health_req = stub.main_requests[-3:]

    sent = tool_result(send_req)["result"]
    assert sent["ok"] and sent["target"]["address"] == f"claude:{b}" and sent["via"] == "role:reviewer", sent
    assert sent["roleProcedure"]["name"] == "reviewer" and sent["roleProcedure"]["textIncluded"] is True
    assert sent["receipt"]["record"] is True and sent["receipt"]["recorded"] is True and sent["receipt"]["id"]
    [deprecated] = [w for w in sent["warnings"] if w["code"] == "deprecated_argument"]
    assert deprecated["details"]["argument"] == "allowTargetOverride"

    listed = tool_result(list_req)
    roles = {s["address"]: s["roles"] for s in listed["sessions"]}
    assert roles[f"claude:{b}"] == ["reviewer"] and roles[f"claude:{a}"] == []

    health = tool_result(health_req)
    # the plugin's manifest names the host for its server (.claude-plugin/plugin.json env)
    assert health["hostDetection"] == {"host": "claude", "source": "AGENT_LINK_HOST", "variable": "AGENT_LINK_HOST"}
    assert health["host"] == "claude" and health["address"] == f"claude:{a}"
    mailbox = health["harnesses"]["claude"]["mailbox"]
    assert mailbox["session"] == f"claude:{a}" and (mailbox["queued"], mailbox["open"]) == (0, 0)

    # the receipt is the one listed for the send, with the purpose given and the seed's kind
    # (an auditor reads others' receipts only with the inspect-all setting and scope all)
    async def receipts() -> dict[str, Any]:
        async with agent_link_mcp({"AGENT_LINK_ADDRESS": "test:auditor", "AGENT_LINK_INSPECT_ALL": "1"}) as auditor:
            return await auditor.call("list_agent_link_receipts", {"messageId": sent["messageId"], "scope": "all"})

    [receipt] = anyio.run(receipts)["data"]
    assert receipt["id"] == sent["receipt"]["id"] and receipt["purpose"] == "review request"
    assert receipt["target"]["kind"] == "claude_session" and receipt["target"]["address"] == f"claude:{b}"


def test_a_wait_without_message_id_ends_idle_when_the_running_session_stops(
    claude: ClaudeHost, stub: MessagesStub, tmp_path: Path,
) -> None:
    cwd = project(tmp_path, "b")
    b = new_session(claude, stub, cwd)
    waiting = threading.Event()

    def answer_once_the_wait_runs(request: RecordedRequest) -> str:
        # the turn stays in flight (the session running) until the wait has looked at it
        assert waiting.wait(60), "the wait never reported progress"
        return "Finished."

    stub.enqueue(answer_once_the_wait_runs)
    result: dict[str, Any] = {}

    async def main() -> None:
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            waiting.set()

        async with agent_link_mcp({"AGENT_LINK_ADDRESS": "test:alice", "AGENT_LINK_WAIT_PROGRESS_MS": "1000"}) as alice:
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, lambda: claude.run_p("work", cwd=cwd, args=["--resume", b],
                                                                             timeout_s=RUN_TIMEOUT_S))
                # the session is running once its request reached the model
                await anyio.to_thread.run_sync(lambda: stub.wait_for(lambda reqs: stub.pending_script == 0, 60))
                answer = await alice.session.call_tool("wait_for_agent", {"agent": f"claude:{b}", "timeoutMs": 60000},
                                                       read_timeout_seconds=90, progress_callback=on_progress)
                result.update(json.loads(answer.content[0].text))

    anyio.run(main)
    assert result["ok"] and result["outcome"] == "idle" and result["timedOut"] is False, result
    assert result["target"]["address"] == f"claude:{b}" and "reply" not in result


def test_a_plain_server_without_a_host_setting_detects_claude_from_its_environment(
    stub: MessagesStub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, isolated_env: Path,
) -> None:
    """agent-link as a plain MCP server of ``claude -p`` with no AGENT_LINK_HOST: health names
    the Claude variable Claude Code put into the server's environment as what decided the host."""
    from agent_link_testing.claude_host import agent_link_bin, mcp_stdio_server, write_mcp_config

    host = ClaudeHost.create(tmp_path / "home", stub=stub, outbound="blackhole")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(host.config_dir))
    cwd = project(tmp_path, "plain")
    config = write_mcp_config(tmp_path / "mcp.json", {"agent-link": mcp_stdio_server(
        str(agent_link_bin()), ["mcp"], {"AGENT_LINK_STATE_DIR": str(isolated_env)})})
    stub.enqueue(Reply.tool_use("mcp__agent-link__agent_link_health", {}), "Healthy.")
    done = host.run_p("how is agent-link?", cwd=cwd, args=["--mcp-config", str(config), "--allowedTools", "mcp__agent-link"],
                      timeout_s=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    health = tool_result(stub.main_requests[-1])
    detection = health["hostDetection"]
    assert health["host"] == "claude" and detection["host"] == "claude" and detection["source"] == "environment", detection
    # observed with the pinned Claude Code: CLAUDE_PROJECT_DIR is the Claude variable its MCP servers get
    assert detection == {"host": "claude", "source": "environment", "variable": "CLAUDE_PROJECT_DIR"}
