"""What the real-host round trips share: a session of one real host asks a real Codex thread
or opencode session a question through agent-link and gets the reply back through its wait
(plugins/claude/tests/test_e2e_claude_codex.py, test_e2e_claude_opencode.py,
plugins/opencode/tests/test_opencode_realhost_e2e_codex.py).

* :data:`QUESTION`, :data:`ANSWER` and :data:`ENVELOPE_ID` (the envelope's message id);
* the agent-link MCP server as each host's config names it (:func:`codex_mcp_servers`,
  :func:`opencode_mcp`), and opencode's JS plugin (:data:`OPENCODE_JS_PLUGIN`);
* stub models that answer an envelope through ``reply_agent_link_message``
  (:class:`CodexReplier` for the Responses stub, :func:`messages_replier` for the Messages
  stub), each once the sender's agent-link has recorded the delivery (:func:`wait_until_delivered`);
* the scripted sender's second step, the wait for the reply (:func:`wait_for_the_reply`);
* a Codex thread whose agent-link MCP server is ready (:func:`codex_thread`).
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import agent_link_opencode
from agent_link_codex.appserver import AppServerClient
from agent_link_testing.claude_host import agent_link_bin
from agent_link_testing.codex_host import McpServerConfig
from agent_link_testing.messages_stub import RecordedRequest, Reply, tool_result
from agent_link_testing.responses_stub import StubRequest, mcp_tool_call, text

QUESTION = "Which port does the staging build listen on?"
ANSWER = "Port 8443, per deploy/staging.toml."
#: an agent-link envelope's opening tag; group 1 is the message id (a ULID)
ENVELOPE_ID = re.compile(r'<agent-link-message id="([0-9A-HJKMNP-TV-Z]{26})"')
#: the JS plugin ``agent-link install opencode`` copies into opencode's config
OPENCODE_JS_PLUGIN = Path(agent_link_opencode.__file__).parent / "host_plugin" / "agent-link.js"
#: how long a stub model waits for the delivery record before answering (s): a real model
#: takes a moment; answering faster than the sender's agent-link records the delivery loses
#: that record (notes/core-requests-e2e.md, item 1), and these tests are about the round trip
THINK_S = 10.0


def codex_mcp_servers(env: Mapping[str, str]) -> dict[str, McpServerConfig]:
    """Codex's ``[mcp_servers.agent-link]``: this venv's ``agent-link mcp`` with ``env``, tools approved."""
    return {"agent-link": McpServerConfig(command=str(agent_link_bin()), args=["mcp"], env=env, startup_timeout_sec=30)}


def opencode_mcp(env: Mapping[str, str]) -> dict[str, Any]:
    """opencode's ``mcp`` config entry: this venv's ``agent-link mcp`` with ``env``."""
    return {"agent-link": {"type": "local", "enabled": True, "command": [str(agent_link_bin()), "mcp"], "environment": dict(env)}}


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


def wait_until_delivered(db_path: Path | str, message_id: str, bound_s: float = THINK_S) -> None:
    """Poll the mailbox at ``db_path`` (read-only) until ``message_id`` has a ``delivered_via``,
    at most ``bound_s`` seconds; returns either way (the test's assertions say what happened)."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        try:
            with contextlib.closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=1)) as db:
                row = db.execute("SELECT delivered_via FROM messages WHERE id = ?", (message_id,)).fetchone()
            if row and row[0]:
                return
        except sqlite3.Error:
            pass
        time.sleep(0.05)


class CodexReplier:
    """The Codex stub model (a :class:`~agent_link_testing.responses_stub.ResponsesStub`
    responder): answers an agent-link envelope through agent-link's reply tool with
    :data:`ANSWER` once the delivery is recorded in ``db_path``, then ends the turn with
    ``done_text`` once it has the tool's result; None (the stub's default) for anything else."""

    def __init__(self, db_path: Path | str, done_text: str) -> None:
        self.db_path = db_path
        self.done_text = done_text

    def __call__(self, request: StubRequest) -> Any:
        last = request.last_input
        if last is not None and last.get("type") == "function_call_output":
            return text(self.done_text)
        for chunk in request.user_texts():
            found = ENVELOPE_ID.search(chunk)
            if found:
                wait_until_delivered(self.db_path, found.group(1))
                return mcp_tool_call("agent_link", "reply_agent_link_message", {"messageId": found.group(1), "message": ANSWER})
        return None


def messages_replier(db_path: Path | str, reply_tool: str) -> Callable[[RecordedRequest], Reply | str]:
    """A :class:`~agent_link_testing.messages_stub.MessagesStub` script step for the receiving
    host: calls ``reply_tool`` (the host's name for ``reply_agent_link_message``) with
    :data:`ANSWER` for the envelope in the request, once the delivery is recorded in ``db_path``."""

    def reply(request: RecordedRequest) -> Reply | str:
        found = next((m for m in map(ENVELOPE_ID.search, strings(request.messages)) if m), None)
        if found is None:
            return "no agent-link envelope in this request"
        wait_until_delivered(db_path, found.group(1))
        return Reply.tool_use(reply_tool, {"messageId": found.group(1), "message": ANSWER})

    return reply


def wait_for_the_reply(wait_tool: str, address: str, timeout_ms: int) -> Callable[[RecordedRequest], Reply | str]:
    """The sender's script step after ``message_agent``: ``wait_tool`` (the host's name for
    ``wait_for_agent``) on ``address`` for the reply to the message just sent, at most
    ``timeout_ms``; a text naming the failure when the send was not ok."""

    def step(request: RecordedRequest) -> Reply | str:
        sent = tool_result(request)
        if not sent.get("ok"):
            return f"message_agent failed: {json.dumps(sent)[:2000]}"
        return Reply.tool_use(wait_tool, {"agent": address, "replyToMessageId": sent["messageId"], "timeoutMs": timeout_ms})

    return step


@contextlib.asynccontextmanager
async def codex_thread(socket_path: Path, timeout_ms: int) -> AsyncIterator[tuple[AppServerClient, str]]:
    """A client of the app-server at ``socket_path`` (as another app, server requests refused)
    and a new thread's id, once the thread's agent-link MCP server reports ``ready``.

    :param timeout_ms: bound of each step (initialize, thread/start, the ready notification).
    :raises TimeoutError: a step did not finish in time (from the client).
    """
    async with await AppServerClient.connect_unix(socket_path, refuse_server_requests=True) as raw:
        await raw.initialize("someone-else", "0.0.1", timeout_ms=timeout_ms)
        async with raw.subscription() as startup:
            thread_id = (await raw.request("thread/start", {}, timeout_ms=timeout_ms))["thread"]["id"]
            await startup.wait_for(lambda n: n.method == "mcpServer/startupStatus/updated"
                                   and n.params.get("name") == "agent-link" and n.params.get("status") == "ready",
                                   timeout_ms=timeout_ms)
        yield raw, thread_id
