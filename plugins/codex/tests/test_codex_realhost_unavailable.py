"""agent-link missing under an installed Codex plugin never stops Codex (issue 25), against the
REAL pinned Codex.

After ``agent-link install codex`` (an entry point outside the checkout, the checkout's
``.venv/bin`` off PATH), the executable it recorded is made unusable the two ways a person's
machine does it: the virtualenv's Python removed (a deleted or rebuilt venv), then the
executable itself removed (an uninstalled tool). Each time a ``codex exec`` (a thread started
and one turn) still succeeds and its model request carries no agent-link tools; with agent-link
back, the tools are there again. The plugin declares the server ``required`` (so its tools are
in every first turn): the launcher answers in its place with no tools, and its reason is in
Codex's log (``codex_rmcp_client`` logs an MCP server's stderr at level info; the model is not
shown the server's ``instructions``). agent-link slower than Codex's start-up timeout does not
stop a thread either: the launcher answers the opening with what the last healthy server
answered, and the server, once up, answers the tool calls and says in Codex's log that it was late.

A missing host binary fails these tests ("run `make hosts`"); they never skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from agent_link_testing.codex_host import STUB_KEY_ENV, codex_binary, write_codex_config
from agent_link_testing.dists import agent_link_elsewhere
from agent_link_testing.responses_stub import Reply, ResponsesStub, StubRequest, function_call, text

pytestmark = [pytest.mark.realhost, pytest.mark.timeout(900)]

BOUND_S = 300  # a bound per command, never a speed assertion
LOG_LEVEL = "codex_rmcp_client=info"  # where Codex logs its MCP servers' stderr


def run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=BOUND_S, check=False)
    assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-4000:])
    return done


def has_agent_link_tools(names: list[str]) -> bool:
    return any(name.endswith("list_agents") for name in names)


def host_env(tmp_path: Path) -> tuple[str, Path, dict[str, str]]:
    """The pinned Codex, a temporary HOME, and an environment without the checkout's
    ``.venv/bin`` on PATH (agent-link only where ``install`` recorded it) nor the run's
    CODEX_/AGENT_LINK_/CLAUDE_/XDG_ variables."""
    home = tmp_path / "home"
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if Path(p).resolve() != Path(venv_bin).resolve())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEX_", "AGENT_LINK_", "CLAUDE_", "XDG_"))}
    env.update(HOME=str(home), CODEX_HOME=str(home / ".codex"), PATH=path, AGENT_LINK_STATE_DIR=str(tmp_path / "state"),
               **{STUB_KEY_ENV: "stub-key"})
    return str(codex_binary()), home, env


def test_codex_runs_without_agent_link_after_install(tmp_path: Path) -> None:
    agent_link = agent_link_elsewhere(tmp_path / "elsewhere")
    codex, home, env = host_env(tmp_path)
    with ResponsesStub(default=text("answered")) as stub:
        write_codex_config(home / ".codex", stub.base_url)
        run([str(agent_link), "install", "codex", "--host-bin", codex], env, tmp_path)
        seen = 0
        logged: list[str] = []

        def turn(prompt: str, **extra: str) -> list[str]:
            """Tool names of the turn's first model request; Codex's log in ``logged``."""
            nonlocal seen
            done = run([codex, "exec", "--skip-git-repo-check", prompt], {**env, **extra}, tmp_path)
            logged[:] = [done.stderr]
            requests = stub.responses_requests()
            assert len(requests) > seen, (prompt, done.stderr[-4000:])
            first = requests[seen]
            seen = len(requests)
            assert "answered" in done.stdout, done.stdout[-2000:]
            return first.tool_names()

        names = turn("with agent-link")
        assert has_agent_link_tools(names), names

        python = agent_link.parent / "python"
        hidden = tmp_path / "python-away"
        python.rename(hidden)  # the venv's interpreter gone: the script is there, it cannot run
        names = turn("interpreter gone")
        assert not has_agent_link_tools(names), names

        hidden.rename(python)
        script = agent_link.read_bytes()
        agent_link.unlink()  # the executable gone
        names = turn("executable gone", RUST_LOG=LOG_LEVEL)
        assert not has_agent_link_tools(names), names
        # the why, in Codex's log: "MCP server stderr (sh): agent-link: agent-link executable not found ..."
        assert any("MCP server stderr" in line and "agent-link executable not found" in line
                   for line in logged[0].splitlines()), logged[0][-4000:]

        agent_link.write_bytes(script)
        agent_link.chmod(0o755)
        names = turn("back again")
        assert has_agent_link_tools(names), names
    shutil.rmtree(tmp_path / "elsewhere", ignore_errors=True)


def test_first_turn_of_ten_fresh_threads_has_agent_link_tools(tmp_path: Path) -> None:
    """With agent-link healthy, each of 10 freshly started Codex threads (``codex exec``: a new
    thread and its first turn, each with its own new ``agent-link mcp``, half of them on a state
    dir nobody has used yet) sends its first model request with agent-link's tools: the earlier
    problem of turns built before the server answered must not come back (issue 25)."""
    agent_link = agent_link_elsewhere(tmp_path / "elsewhere")
    codex, home, env = host_env(tmp_path)
    with ResponsesStub(default=text("answered")) as stub:
        write_codex_config(home / ".codex", stub.base_url)
        run([str(agent_link), "install", "codex", "--host-bin", codex], env, tmp_path)
        missing = []
        for i in range(10):
            seen = len(stub.responses_requests())
            state = {"AGENT_LINK_STATE_DIR": str(tmp_path / f"state-{i}")} if i % 2 else {}
            done = run([codex, "exec", "--skip-git-repo-check", f"thread {i}"], {**env, **state}, tmp_path)
            assert "answered" in done.stdout, (i, done.stdout[-2000:], done.stderr[-4000:])
            first = stub.responses_requests()[seen]
            if not has_agent_link_tools(first.tool_names()):
                missing.append((i, first.tool_names()))
        assert missing == [], missing
    shutil.rmtree(tmp_path / "elsewhere", ignore_errors=True)


SLOW_S = 32  # longer than the pinned Codex's start-up timeout for a required server (30 s: "timed out handshaking ... after 29.99s")


def test_codex_starts_a_thread_while_agent_link_is_slow(tmp_path: Path) -> None:
    """agent-link slow to start (32 s before ``agent-link mcp`` runs) does not stop a Codex
    thread. Before the launcher answered the opening itself, the pinned Codex failed
    ``thread/start`` with "required MCP servers failed to initialize: codex-agent-link: timed
    out handshaking with MCP server". Now, with the answers ``install`` kept for the launcher
    (the very first thread is the slow one): its first model request has agent-link's tools,
    the model's call to one of them waits for the server and gets its answer, the turn ends,
    and Codex's log says the server was late."""
    agent_link = agent_link_elsewhere(tmp_path / "elsewhere")
    slow = tmp_path / "slow-agent-link"
    slow.write_text(f'#!/bin/sh\nif [ "$1" = mcp ]; then sleep {SLOW_S}; fi\nexec "{agent_link}" "$@"\n')
    slow.chmod(0o755)
    codex, home, env = host_env(tmp_path)

    def respond(request: StubRequest) -> Reply:
        """The slow thread's model: calls agent-link's ``list_agents`` first, then answers."""
        if request.function_call_outputs():
            return text("answered")
        [name] = [n for n in request.tool_names() if n.endswith("list_agents")] or ["list_agents (missing)"]
        namespace, _, tool = name.rpartition("/")
        return function_call(tool, {}, namespace=namespace or None)

    with ResponsesStub(default=text("answered")) as stub:
        write_codex_config(home / ".codex", stub.base_url)
        run([str(agent_link), "install", "codex", "--host-bin", codex], env, tmp_path)
        seen = len(stub.responses_requests())

        stub.responder = respond
        done = run([codex, "exec", "--skip-git-repo-check", "are you there?"],
                   {**env, "AGENT_LINK_BIN": str(slow), "RUST_LOG": LOG_LEVEL}, tmp_path)
        assert "answered" in done.stdout, (done.stdout[-2000:], done.stderr[-4000:])
        requests = stub.responses_requests()[seen:]
        assert has_agent_link_tools(requests[0].tool_names()), requests[0].tool_names()
        outputs = [t for r in requests for t in r.function_call_output_texts()]
        assert any('"ok":true,"sessions"' in t for t in outputs), (outputs, done.stderr[-4000:])  # the server's own answer
        assert any("MCP server stderr" in line and "agent-link: the server started" in line
                   and "after the host opened the connection" in line for line in done.stderr.splitlines()), done.stderr[-4000:]
    shutil.rmtree(tmp_path / "elsewhere", ignore_errors=True)


def test_codex_runs_when_agent_link_crashes_at_start_and_nothing_is_kept(tmp_path: Path) -> None:
    """agent-link installed but crashing at start (its executable and interpreter are there; the
    package it imports is gone, as after a broken upgrade) with no kept answers for the thread's
    settings (any AGENT_LINK_* change, or the first start after an install): before, the pinned
    Codex failed ``thread/start`` with "required MCP servers failed to initialize:
    codex-agent-link: handshaking with MCP server failed: connection closed: initialize
    response". Now the launcher checks that agent-link starts and stands in when it does not:
    the turn runs without agent-link's tools and Codex's log says why and what to do. A kept
    answer cut short is not answered from either: the thread gets agent-link's own answers."""
    agent_link = agent_link_elsewhere(tmp_path / "elsewhere")
    codex, home, env = host_env(tmp_path)
    with ResponsesStub(default=text("answered")) as stub:
        write_codex_config(home / ".codex", stub.base_url)
        run([str(agent_link), "install", "codex", "--host-bin", codex], env, tmp_path)

        def turn(prompt: str, **extra: str) -> tuple[list[str], str]:
            seen = len(stub.responses_requests())
            done = run([codex, "exec", "--skip-git-repo-check", prompt], {**env, "RUST_LOG": LOG_LEVEL, **extra}, tmp_path)
            assert "answered" in done.stdout, (prompt, done.stdout[-2000:], done.stderr[-4000:])
            return stub.responses_requests()[seen].tool_names(), done.stderr

        kept = home / ".cache" / "agent-link" / "launcher"
        [folder] = kept.iterdir()  # what install kept for the settings Codex gives the server
        for answer in folder.iterdir():  # cut short, as by a full disk
            answer.write_text(answer.read_text()[:200])
        names, _ = turn("kept answers cut short")
        assert has_agent_link_tools(names), names

        [pth] = (tmp_path / "elsewhere").rglob("agent_link_tests_elsewhere.pth")
        pth.unlink()  # agent_link_core cannot be imported: `agent-link` crashes at start
        names, logged = turn("crashing, nothing kept", AGENT_LINK_REMINDER_LIMIT="2")  # settings with nothing kept
        assert not has_agent_link_tools(names), names
        assert any("MCP server stderr" in line and f"agent-link at {agent_link} failed to start" in line
                   and "agent-link install codex" in line for line in logged.splitlines()), logged[-4000:]
    shutil.rmtree(tmp_path / "elsewhere", ignore_errors=True)
