"""The test kit's forked ``agent-link`` processes (agent_link_testing.forked_processes) end as
new interpreters of the same command do: the same output and exit status for a command, and,
through the launcher the MCP tests use, the same status when the client closes the server's
stdin."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from agent_link_testing.forked_processes import Zygote, shared

REAL = [sys.executable, "-m", "agent_link_core"]
ULID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")
INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "forked", "version": "1"}}}).encode() + b"\n"


@pytest.fixture
def zygote() -> Zygote:
    return shared()


@pytest.mark.parametrize("args", [["--no-such-option"], ["send", "test:bob", "hi", "--from", "test:alice"], ["health", "--json"]],
                         ids=["usage-error", "send", "health"])
def test_a_forked_command_prints_and_exits_as_a_new_interpreter(zygote: Zygote, args: list[str]) -> None:
    env = dict(os.environ)
    forked = zygote.start(args, env, text=True)
    out, err = forked.communicate(timeout=120)
    real = subprocess.run([*REAL, *args], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert forked.returncode == real.returncode, (err, real.stderr)
    if args[0] == "health":  # the same report (its timings and the process's own pid aside)
        assert json.loads(out).keys() == json.loads(real.stdout).keys()
    else:  # the same lines, each new message's id aside
        assert (ULID.sub("ID", out), ULID.sub("ID", err)) == (ULID.sub("ID", real.stdout), ULID.sub("ID", real.stderr))


def test_a_launched_server_ends_as_a_new_interpreter_does_when_its_stdin_closes(zygote: Zygote) -> None:
    statuses = []
    assert zygote.forks(dict(os.environ))
    for command in (zygote.command(["mcp"], os.environ), [*REAL, "mcp"]):
        server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert server.stdin is not None and server.stdout is not None
        try:
            server.stdin.write(INIT)
            server.stdin.flush()
            assert json.loads(server.stdout.readline())["id"] == 1  # serving
            server.stdin.close()
            statuses.append(server.wait(timeout=60))
            assert server.stdout.read() == b""  # nothing after the answer; the pipe ends with the server
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
            server.stdout.close()
    assert statuses == [0, 0]
