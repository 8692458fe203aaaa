"""agent-link missing under an installed Claude Code plugin never stops Claude Code (issue 25),
against the REAL pinned Claude Code.

After ``agent-link install claude`` (an entry point outside the checkout, the checkout's
``.venv/bin`` off PATH, no ``AGENT_LINK_BIN``), the recorded executable is made unusable: its
virtualenv's Python removed, then the executable itself removed. Before that, the first model
request of each of 10 new sessions carries agent-link's tools. Each time ``claude -p``
answers the prompt (its hooks say nothing, its MCP server is the launcher's stand-in with no
tools) and Claude Code's MCP log has the launcher's line saying why; with agent-link back, the
tools are there again.

A missing host binary fails these tests ("run `make hosts`"); they never skip.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from agent_link_testing.claude_host import ClaudeHost
from agent_link_testing.dists import agent_link_elsewhere
from agent_link_testing.messages_stub import MessagesStub

pytestmark = [pytest.mark.realhost, pytest.mark.timeout(600)]

SERVER_RULE = "mcp__plugin_agent-link_codex-agent-link"
BOUND_S = 300.0  # a bound per command, never a speed assertion
FRESH_SESSIONS = 10


def mcp_log(home: Path) -> str:
    """What Claude Code logged of agent-link's MCP server (its stderr included)."""
    logs = sorted((home / ".cache" / "claude-cli-nodejs").glob("*/mcp-logs-*agent-link*/*.jsonl"))
    return "".join(p.read_text(errors="replace") for p in logs)


def test_claude_runs_without_agent_link_after_install(tmp_path: Path) -> None:
    agent_link = agent_link_elsewhere(tmp_path / "elsewhere")
    venv_bin = Path(sys.executable).parent.resolve()
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if Path(p).resolve() != venv_bin)
    cwd = tmp_path / "project"
    cwd.mkdir()
    with MessagesStub() as stub:
        host = ClaudeHost.create(tmp_path / "home", stub=stub, env={"PATH": path, "AGENT_LINK_BIN": None,
                                                                    "AGENT_LINK_STATE_DIR": str(tmp_path / "state")})
        env = host.environ()
        done = subprocess.run([str(agent_link), "install", "claude", "--host-bin", str(host.binary)], env=env, cwd=cwd,
                              capture_output=True, text=True, timeout=BOUND_S, check=False)
        assert done.returncode == 0, done.stderr[-4000:]

        def answer(prompt: str, reply: str) -> list[str]:
            stub.enqueue(reply)
            done = host.run_p(prompt, cwd=cwd, timeout_s=BOUND_S)
            assert done.returncode == 0, done.stderr[-4000:]
            assert reply in done.stdout, done.stdout[-2000:]
            return stub.main_requests[-1].tool_names()

        for n in range(FRESH_SESSIONS):  # healthy: every new session's first request has the tools
            assert any(SERVER_RULE in name for name in answer(f"with agent-link {n}", f"Here {n}.")), n

        python = agent_link.parent / "python"
        hidden = tmp_path / "python-away"
        python.rename(hidden)  # the venv's interpreter gone: the script is there, it cannot run
        assert not any(SERVER_RULE in name for name in answer("interpreter gone", "Still answering."))
        assert f"its interpreter {python} is missing" in mcp_log(tmp_path / "home")  # the why, in Claude Code's MCP log

        hidden.rename(python)
        script = agent_link.read_bytes()
        agent_link.unlink()  # the executable gone
        assert not any(SERVER_RULE in name for name in answer("executable gone", "Answering anyway."))
        assert "agent-link executable not found" in mcp_log(tmp_path / "home")

        agent_link.write_bytes(script)
        agent_link.chmod(0o755)
        assert any(SERVER_RULE in name for name in answer("back again", "Back."))


SLOW_S = 40  # longer than Claude Code's MCP connect timeout (30 s, "Starting connection with timeout of 30000ms")


def test_claude_answers_without_waiting_for_a_slow_agent_link(tmp_path: Path) -> None:
    """agent-link slow to start (here: 40 s before ``agent-link mcp`` even runs, longer than
    Claude Code's connect timeout) never holds ``claude -p`` up: it answers the prompt without
    agent-link's tools, and its MCP log says it gave the connection up. Measured on the pinned
    Claude Code: ``claude -p`` never waits for a plugin's MCP server to build its first request."""
    agent_link = agent_link_elsewhere(tmp_path / "elsewhere")
    slow = tmp_path / "slow-agent-link"
    slow.write_text(f'#!/bin/sh\nif [ "$1" = mcp ]; then sleep {SLOW_S}; fi\nexec "{agent_link}" "$@"\n')
    slow.chmod(0o755)
    venv_bin = Path(sys.executable).parent.resolve()
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if Path(p).resolve() != venv_bin)
    cwd = tmp_path / "project"
    cwd.mkdir()
    with MessagesStub() as stub:
        host = ClaudeHost.create(tmp_path / "home", stub=stub, env={"PATH": path, "AGENT_LINK_BIN": str(slow),
                                                                    "AGENT_LINK_STATE_DIR": str(tmp_path / "state")})
        done = subprocess.run([str(agent_link), "install", "claude", "--host-bin", str(host.binary)], env=host.environ(),
                              cwd=cwd, capture_output=True, text=True, timeout=BOUND_S, check=False)
        assert done.returncode == 0, done.stderr[-4000:]
        stub.enqueue("Answered while agent-link starts.")
        ran = host.run_p("are you there?", cwd=cwd, timeout_s=BOUND_S)
        assert ran.returncode == 0, ran.stderr[-4000:]
        assert "Answered while agent-link starts." in ran.stdout, ran.stdout[-2000:]
        assert not any(SERVER_RULE in name for name in stub.main_requests[-1].tool_names())
        log = mcp_log(tmp_path / "home")
        assert "Starting connection" in log and "Successfully connected" not in log, log[-3000:]
