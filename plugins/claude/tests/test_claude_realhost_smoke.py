"""Smoke tests: the real Claude Code CLI (pinned; AGENT_LINK_HOSTS_DIR picks the folder) against the stub Messages API.

They prove the test harness itself (``agent_link_testing.messages_stub`` and ``.claude_host``)
works with the installed binary: a plain ``-p`` turn, an MCP tool round trip through a stdio
server, and a UserPromptSubmit hook whose additionalContext reaches the model.

If the binary is missing these tests fail with "run `make hosts`" -- they never skip.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agent_link_testing.claude_host import ClaudeHost, mcp_stdio_server, mcp_tool_name, python_command, write_mcp_config
from agent_link_testing.messages_stub import MessagesStub, Reply

pytestmark = [pytest.mark.realhost, pytest.mark.timeout(120)]

RUN_TIMEOUT_S = 60.0

# A stdio MCP server using only the standard library: newline-delimited JSON-RPC 2.0 on
# stdin/stdout, one tool `echo(text)`. Each tools/call is appended to $ECHO_LOG as a JSON line.
ECHO_SERVER = textwrap.dedent(
    r'''
    import json, os, sys

    LOG = os.environ["ECHO_LOG"]
    TOOL = {
        "name": "echo",
        "description": "Echo the given text back.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    }

    def reply(msg_id, result=None, error=None):
        out = {"jsonrpc": "2.0", "id": msg_id}
        out.update({"error": error} if error else {"result": result})
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        method, msg_id = msg.get("method"), msg.get("id")
        if msg_id is None:  # notifications (initialized, cancelled, ...)
            continue
        if method == "initialize":
            reply(msg_id, {
                "protocolVersion": msg["params"].get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "echo-test", "version": "0.0.1"},
            })
        elif method == "tools/list":
            reply(msg_id, {"tools": [TOOL]})
        elif method == "tools/call":
            args = msg["params"].get("arguments") or {}
            with open(LOG, "a") as f:
                f.write(json.dumps({"name": msg["params"]["name"], "arguments": args}) + "\n")
            reply(msg_id, {"content": [{"type": "text", "text": "echo: " + str(args.get("text", ""))}]})
        elif method == "ping":
            reply(msg_id, {})
        else:
            reply(msg_id, error={"code": -32601, "message": "method not found: " + str(method)})
    '''
)

HOOK_SCRIPT = textwrap.dedent(
    """
    import json, sys
    sys.stdin.read()
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "NOTE-123"}}))
    """
)


@pytest.fixture
def stub():
    with MessagesStub() as s:
        yield s


@pytest.fixture
def host(stub: MessagesStub) -> ClaudeHost:
    # the root conftest's isolated_env made HOME a temp dir and CLAUDE_CONFIG_DIR = $HOME/.claude
    return ClaudeHost.create(Path(os.environ["HOME"]), stub=stub)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = tmp_path / "proj"
    p.mkdir()
    return p


def _assert_ok(done) -> dict:
    assert done.returncode == 0, f"rc={done.returncode}\nstdout={done.stdout}\nstderr={done.stderr}"
    return json.loads(done.stdout)


def test_plain_prompt_prints_stub_text(stub: MessagesStub, host: ClaudeHost, project: Path) -> None:
    stub.enqueue("Hello from the stub.")
    t0 = time.monotonic()
    done = host.run_p("hi", cwd=project, output_format="text", timeout_s=RUN_TIMEOUT_S)
    elapsed = time.monotonic() - t0
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Hello from the stub."
    assert elapsed < RUN_TIMEOUT_S

    [main] = stub.main_requests
    assert main.query == {"beta": ["true"]}
    assert main.body["stream"] is True
    assert main.headers["x-api-key"] == "dummy"
    assert main.session_id  # X-Claude-Code-Session-Id
    last = main.last_user_message()
    assert last is not None and any(b.get("text") == "hi" for b in last["content"])
    assert not stub.unscripted and stub.pending_script == 0
    # nothing but the stub was contacted (CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1)
    assert {r.kind for r in stub.requests} <= {"main", "preconnect"}

    # json output gives the session id; the transcript exists under the encoded cwd
    stub.enqueue("Second run.")
    done = host.run_p("again", cwd=project, timeout_s=RUN_TIMEOUT_S)
    result = _assert_ok(done)
    assert result["result"] == "Second run."
    session = host.session_of(done, cwd=project)
    assert session.session_id == stub.main_requests[-1].session_id
    assert session.transcript_path.is_file()
    assert any(line.get("type") == "assistant" for line in session.transcript())


def test_mcp_tool_round_trip(stub: MessagesStub, host: ClaudeHost, project: Path, tmp_path: Path) -> None:
    server_py = tmp_path / "echo_server.py"
    server_py.write_text(ECHO_SERVER)
    call_log = tmp_path / "echo_calls.jsonl"
    config = write_mcp_config(
        tmp_path / "mcp.json",
        {"echosrv": mcp_stdio_server(sys.executable, [str(server_py)], {"ECHO_LOG": str(call_log)})},
    )
    tool = mcp_tool_name("echosrv", "echo")
    assert tool == "mcp__echosrv__echo"
    host.allow_tools("mcp__echosrv")  # settings permissions.allow; root-safe

    stub.enqueue(Reply.tool_use(tool, {"text": "ping-42"}, id="toolu_echo_1"), "The tool said echo: ping-42.")
    done = host.run_p("call the echo tool", cwd=project, args=["--mcp-config", str(config)], timeout_s=RUN_TIMEOUT_S)
    result = _assert_ok(done)
    assert result["result"] == "The tool said echo: ping-42."
    assert result["permission_denials"] == []

    first, second = stub.wait_for_main(2, timeout_s=1)
    assert tool in first.tool_names()  # alwaysLoad: the server's tool is in the first request
    [call] = [json.loads(line) for line in call_log.read_text().splitlines()]
    assert call == {"name": "echo", "arguments": {"text": "ping-42"}}
    [tool_result] = second.tool_results()
    assert tool_result["tool_use_id"] == "toolu_echo_1"
    assert "echo: ping-42" in json.dumps(tool_result["content"])
    assert not tool_result.get("is_error")
    assert not stub.unscripted


def test_user_prompt_submit_additional_context_reaches_model(
    stub: MessagesStub, host: ClaudeHost, project: Path, tmp_path: Path
) -> None:
    hook_py = tmp_path / "hook.py"
    hook_py.write_text(HOOK_SCRIPT)
    host.add_hook("UserPromptSubmit", python_command(hook_py))

    stub.enqueue("ok")
    done = host.run_p("hello hook", cwd=project, timeout_s=RUN_TIMEOUT_S)
    _assert_ok(done)
    [main] = stub.main_requests
    # Where it lands (verified on 2.1.197): NOT in the top-level `system` prompt and not in the
    # user message holding the prompt. The request has exactly two messages:
    #   messages[0] = {"role": "user", "content": [<system-reminder currentDate text>, {"text": "hello hook"}]}
    #   messages[1] = {"role": "system", "content": "<agent listing>\n\n<skill listing>\n\n"
    #                  "UserPromptSubmit hook additional context: NOTE-123"}
    # i.e. the mid-conversation system message after the prompt, the hook context one of its
    # paragraphs. 2.1.197 sends that content as a plain string ("messages[1].content"), the hook
    # context last; 2.1.332 as one text block ("messages[1].content[0].text") that also carries
    # the environment and ends with the date.
    assert main.locate("NOTE-123") in (["messages[1].content"], ["messages[1].content[0].text"]), main.text()[:2000]
    assert "NOTE-123" not in main.system_text()
    prompt_msg, hook_msg = main.messages
    assert prompt_msg["role"] == "user" and "hello hook" in json.dumps(prompt_msg)
    assert hook_msg["role"] == "system"
    content = hook_msg["content"]
    hook_text = content if isinstance(content, str) else "".join(block["text"] for block in content)
    assert "\n\nUserPromptSubmit hook additional context: NOTE-123" in hook_text
    # the transcript records it as a hook_additional_context attachment
    session = host.session_of(done, cwd=project)
    attachments = [line["attachment"] for line in session.transcript() if line.get("type") == "attachment"]
    assert any(a.get("type") == "hook_additional_context" and "NOTE-123" in json.dumps(a) for a in attachments)
