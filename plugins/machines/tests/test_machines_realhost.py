"""A real Claude Code session on machine alpha messages a real Codex thread on machine beta
and gets its reply, through one real NATS server.

* alpha: the pinned ``claude -p`` against the stub Messages API, agent-link installed as a
  plugin from a staged directory marketplace; the codex plugin is loaded there too but
  reaches no app-server, so its harness does not know the thread: the machines plugin claims
  it (``agent_link_resolve_elsewhere``) from beta's listing, and alpha's relay carries it.
* beta: the pinned ``codex app-server`` against the stub Responses API, agent-link as its MCP
  server; beta's relay reaches that app-server (``AGENT_LINK_CODEX_SOCK``), lists the thread
  to the engine and pushes the arriving message into it as a turn, as a local send would.
* Each machine has its own HOME, state dir, mailbox and relay (agent_link_machines.testkit).

The Codex stub model answers the envelope through ``reply_agent_link_message``; the resolution
travels back, and the Claude stub model's ``wait_for_agent`` on alpha returns the reply.

The other way round: the Codex thread on beta asks a Claude Code session on alpha (a
long-running stream-json ``claude -p`` with the plugin, idle after its first turn). Beta has no
Claude harness, so the machines plugin pins the address from alpha's listing; alpha's relay,
whose Claude harness lists that session, pushes the message into it as the plugin pushes local
mail (through the session's own inbox socket: a new turn), the Claude stub model replies with
``reply_agent_link_message``, and the reply travels back to the thread's ``message_agent``
wait on beta.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_link_machines.testkit import Machine, until
from agent_link_testing.claude_host import ClaudeHost, agent_link_bin, stage_plugin
from agent_link_testing.codex_host import CodexAppServer, McpServerConfig
from agent_link_testing.hosts import claude_version, version_at_least
from agent_link_testing.messages_stub import MessagesStub, Reply, tool_result
from agent_link_testing.responses_stub import ResponsesStub, mcp_tool_call, text
from agent_link_testing.round_trip import (
    ANSWER, QUESTION, CodexReplier, codex_mcp_servers, codex_thread, messages_replier, strings, wait_for_the_reply,
)

pytestmark = [pytest.mark.machines, pytest.mark.realhost, pytest.mark.timeout(300)]

PLUGIN = "agent-link@agent-link"
SERVER_RULE = "mcp__plugin_agent-link_codex-agent-link"
RUN_TIMEOUT_S = 150.0
WAIT_MS = 30_000
#: the Claude Code release that first has a session inbox socket (plugins/claude/tests/test_claude_native_realhost.py)
INBOX_SINCE = "2.1.224"
#: every agent-link process of a machine: the engine, its name, its plugins
MACHINE_VARS = ("AGENT_LINK_STATE_DIR", "AGENT_LINK_ENGINE_URL", "AGENT_LINK_MACHINE", "AGENT_LINK_MACHINES_HEARTBEAT_MS",
                "AGENT_LINK_MACHINES_AUTOSTART", "AGENT_LINK_CODEX_AUTOSTART", "AGENT_LINK_DISABLE_PLUGINS",
                "AGENT_LINK_LOAD_PLUGINS")


def tool(name: str) -> str:
    return f"{SERVER_RULE}__{name}"


def row(m: Machine, message_id: str) -> sqlite3.Row | None:
    conn = sqlite3.connect(m.state / "agent-link.db")
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def claude_home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A Claude Code HOME with agent-link installed from a staged copy of the plugin."""
    staged = stage_plugin(tmp_path_factory.mktemp("agent-link-plugin"))
    env = {"AGENT_LINK_BIN": str(agent_link_bin())}
    home = tmp_path_factory.mktemp("claude-home")
    host = ClaudeHost.create(home, env=env)
    host.install_plugin(staged, PLUGIN)
    host.allow_tools(SERVER_RULE)
    return home, env


@pytest.fixture
def messages() -> Iterator[MessagesStub]:
    with MessagesStub() as server:
        yield server


def alpha_and_beta(machines: Callable[..., Machine]) -> tuple[Machine, Machine]:
    """alpha with the Claude and Codex plugins, beta with Codex only; relays started by the
    test, not by MCP servers."""
    alpha, beta = machines("alpha"), machines("beta")
    for m in (alpha, beta):
        m.env.update(AGENT_LINK_MACHINES_AUTOSTART="off", AGENT_LINK_CODEX_AUTOSTART="0", AGENT_LINK_DISABLE_PLUGINS="roles receipts",
                     CODEX_HOME=str(m.root / "codex-home"))
    alpha.env["AGENT_LINK_LOAD_PLUGINS"] = "presence waits claude codex machines listings"
    beta.env["AGENT_LINK_LOAD_PLUGINS"] = "presence waits codex machines listings"
    return alpha, beta


def own(m: Machine) -> dict[str, str]:
    """What every agent-link process of machine ``m`` is started with (:data:`MACHINE_VARS`)."""
    return {k: m.env[k] for k in MACHINE_VARS}


def test_a_claude_session_on_alpha_messages_a_codex_thread_on_beta_and_gets_its_reply(
    machines: Callable[..., Machine], claude_home: tuple[Path, dict[str, str]], messages: MessagesStub, tmp_path: Path,
) -> None:
    alpha, beta = alpha_and_beta(machines)
    project = tmp_path / "proj"
    project.mkdir()
    with ResponsesStub(responder=CodexReplier(beta.state / "agent-link.db", "Answered the Claude session.")) as responses:
        codex_side = {**own(beta), "AGENT_LINK_HOST": "codex", "CODEX_HOME": str(tmp_path / "codex" / "codex-home")}
        with CodexAppServer(responses.base_url, root=tmp_path / "codex", mcp_servers=codex_mcp_servers(codex_side)) as codex:
            beta.env.update(AGENT_LINK_CODEX_SOCK=str(codex.socket_path), CODEX_HOME=str(codex.codex_home))
            for m in (alpha, beta):
                m.start_relay()
            for m in (alpha, beta):
                m.wait_connected()

            async def scenario() -> tuple[Any, str, str]:
                async with codex_thread(codex.socket_path, WAIT_MS) as (raw, thread_id):
                    address = f"codex:{thread_id}"
                    # beta's relay lists the new thread to the engine; alpha's copies it
                    await anyio.to_thread.run_sync(lambda: until(
                        lambda: any(s["address"] == address for s in alpha.json("sessions", "--harness", "machines")["sessions"]),
                        60, "alpha to list the Codex thread of beta"))
                    messages.enqueue(
                        Reply.tool_use(tool("message_agent"), {"to": address, "message": QUESTION, "anticipation": "reply"}),
                        wait_for_the_reply(tool("wait_for_agent"), address, 60_000),
                        "Codex on beta says the staging build listens on 8443.",
                    )
                    claude = ClaudeHost.create(claude_home[0], stub=messages, env={**claude_home[1], **own(alpha),
                                                                                   "CODEX_HOME": alpha.env["CODEX_HOME"]})
                    done = await anyio.to_thread.run_sync(
                        lambda: claude.run_p("ask the Codex thread on beta which port staging uses", cwd=project, timeout_s=RUN_TIMEOUT_S))
                    claude_address = f"claude:{claude.session_of(done, cwd=project).session_id}"
                    return done, thread_id, claude_address

            done, thread_id, claude_address = anyio.run(scenario)
    codex_address = f"codex:{thread_id}"
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert json.loads(done.stdout)["result"] == "Codex on beta says the staging build listens on 8443.", done.stdout

    # 1. alpha stored the message for beta; its own codex harness pushed nothing
    first, after_send, after_wait = messages.main_requests
    sent = tool_result(after_send)
    assert sent["ok"] and (sent["to"], sent["harness"], sent["deliveryState"]) == (codex_address, "codex", "queued"), sent
    assert "warnings" not in sent, sent
    mid = sent["messageId"]

    # 2. beta's relay pushed it into the Codex thread as a turn; the stub model saw the envelope
    # from the Claude session, attested by alpha, and answered through agent-link's reply tool
    on_beta = row(beta, mid)
    assert on_beta is not None and (on_beta["from_addr"], on_beta["recipient"], on_beta["delivered_via"]) == (
        claude_address, codex_address, "codex-turn")
    seen = responses.wait_for(lambda r: r.contains(f'<agent-link-message id="{mid}"'), 1)
    assert seen.thread_id == thread_id
    [envelope] = [t for t in seen.user_texts() if mid in t]
    assert f'from="{claude_address}"' in envelope and 'fromVerified="true"' in envelope and '<machine from="alpha" />' in envelope
    assert QUESTION in envelope

    # 3. the reply came back to alpha, where the Claude session's wait returned it
    waited = tool_result(after_wait)
    assert waited["ok"] and waited["outcome"] == "reply", waited
    assert (waited["reply"]["from"], waited["reply"]["fromVerified"]) == (codex_address, True)
    assert ANSWER in waited["reply"]["envelope"] and ANSWER in after_wait.text()
    on_alpha = row(alpha, mid)
    assert on_alpha is not None and json.loads(on_alpha["metadata"])["machines"] == {"to": "beta"}
    status = alpha.json("status", mid, address=claude_address)
    assert status["status"] == "replied", status
    # beta reported the delivery before the resolution (one relay's outbox goes out in order)
    assert on_alpha["delivered_via"] == "machine:beta", dict(on_alpha)


def test_a_codex_thread_on_beta_messages_a_claude_session_on_alpha_and_gets_its_reply(
    machines: Callable[..., Machine], claude_home: tuple[Path, dict[str, str]], messages: MessagesStub, tmp_path: Path,
) -> None:
    if not version_at_least(claude_version(), INBOX_SINCE):
        pytest.skip(f"Claude Code before {INBOX_SINCE} has no inbox socket: such a session gets its mail through the hooks")
    alpha, beta = alpha_and_beta(machines)
    project = tmp_path / "proj"
    project.mkdir()
    claude = ClaudeHost.create(claude_home[0], stub=messages, env={**claude_home[1], **own(alpha), "CODEX_HOME": alpha.env["CODEX_HOME"]})
    # alpha's relay lists and pushes into the sessions of that Claude Code installation
    alpha.env.update(CLAUDE_CONFIG_DIR=str(claude.config_dir), AGENT_LINK_CLAUDE_INBOX_WAIT_MS="60000")
    messages.enqueue("Ready.", messages_replier(alpha.state / "agent-link.db", tool("reply_agent_link_message")),
                     "Answered the Codex thread on beta.")
    with ResponsesStub() as responses, claude.start_stream(cwd=project) as stream:
        stream.send("hello")
        session_id = str(stream.wait_results(1, RUN_TIMEOUT_S)[0]["session_id"])
        claude_address = f"claude:{session_id}"
        codex_side = {**own(beta), "AGENT_LINK_HOST": "codex", "CODEX_HOME": str(tmp_path / "codex" / "codex-home")}
        servers = {"agent-link": McpServerConfig(command=str(agent_link_bin()), args=["mcp"], env=codex_side,
                                                 startup_timeout_sec=30, tool_timeout_sec=RUN_TIMEOUT_S)}
        with CodexAppServer(responses.base_url, root=tmp_path / "codex", mcp_servers=servers) as codex:
            beta.env.update(AGENT_LINK_CODEX_SOCK=str(codex.socket_path), CODEX_HOME=str(codex.codex_home))
            for m in (alpha, beta):
                m.start_relay()
            for m in (alpha, beta):
                m.wait_connected()
            until(lambda: any(s["address"] == claude_address for s in beta.json("sessions", "--harness", "machines")["sessions"]),
                  60, "beta to list the Claude session of alpha")
            responses.enqueue(mcp_tool_call("agent_link", "message_agent", {
                "to": claude_address, "message": QUESTION, "anticipation": "reply", "waitForReply": True,
                "timeoutMs": 90_000, "pollIntervalMs": 250}), text("Claude on alpha says the staging build listens on 8443."))

            async def scenario() -> tuple[str, dict[str, Any]]:
                async with codex_thread(codex.socket_path, WAIT_MS) as (raw, thread_id), raw.subscription(thread_id=thread_id) as items:
                    await raw.request("turn/start", {"threadId": thread_id, "input": [{"type": "text", "text": "ask the Claude session"}]},
                                      timeout_ms=WAIT_MS)
                    tool_call = await items.wait_for(lambda n: n.method == "item/completed" and n.params["item"]["type"] == "mcpToolCall",
                                                     timeout_ms=int(RUN_TIMEOUT_S * 1000))
                    await items.wait_for(lambda n: n.method == "turn/completed", timeout_ms=WAIT_MS)
                    return thread_id, tool_call.params["item"]["result"]["structuredContent"]

            thread_id, result = anyio.run(scenario)
        # the pushed message made a second turn of the Claude session, which replied
        results = stream.wait_results(2, RUN_TIMEOUT_S)
    codex_address = f"codex:{thread_id}"

    # 1. beta pinned the Claude session to alpha; the thread's wait returned the reply
    assert result["ok"] and result["to"] == claude_address, result
    mid = result["messageId"]
    assert result["wait"]["outcome"] == "reply", result
    assert (result["wait"]["reply"]["from"], result["wait"]["reply"]["fromVerified"]) == (claude_address, True)
    assert ANSWER in result["wait"]["reply"]["envelope"]
    on_beta = row(beta, mid)
    assert on_beta is not None and json.loads(on_beta["metadata"])["machines"] == {"to": "alpha"}
    assert on_beta["delivered_via"] == "machine:alpha", dict(on_beta)

    # 2. alpha's relay pushed it into the Claude session through its inbox socket; the model
    # saw the envelope from the Codex thread, attested by beta, and replied through agent-link
    on_alpha = row(alpha, mid)
    assert on_alpha is not None and (on_alpha["from_addr"], on_alpha["recipient"], on_alpha["delivered_via"]) == (
        codex_address, claude_address, "claude-inbox")
    assert (results[1]["session_id"], results[1]["result"]) == (session_id, "Answered the Codex thread on beta.")
    [envelope] = [t for t in strings(messages.main_requests[1].messages) if f'<agent-link-message id="{mid}"' in t]
    assert QUESTION in envelope and f'from="{codex_address}"' in envelope and 'fromVerified="true"' in envelope
    assert '<machine from="beta" />' in envelope
    replied = tool_result(messages.main_requests[2])
    assert replied["ok"], replied
    assert alpha.json("status", mid, address=claude_address)["status"] == "replied"
