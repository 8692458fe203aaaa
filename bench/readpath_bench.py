"""The read path through real ``agent-link mcp`` servers, called by bench/run.py (`make bench`).

* an inbox read (``read_agent_link_inbox {"markAsDelivered": false, "limit": 30}``) returning
  30 messages against the same read returning 1, each from its own server, called alternately;
  target ratio <= 3 (a read is linear in what it returns, with a fixed part per call);
* send and read through two servers sharing a state dir: team:alice sends
  (``message_agent``), team:bob reads (``read_agent_link_inbox {"markAsDelivered": false}``,
  so the inbox grows each round up to the default limit of 20), :data:`ROUNDS` rounds. Their
  medians are printed beside a bare ``tools/call`` of ``agent_link_health`` on the same
  servers in the same rounds; targets send p50 <= 3 ms and read p50 <= 8 ms;
* the CPU time (user + system) the sending server spends per send, over :data:`CPU_CALLS`
  sends in a row, beside the same for as many bare health calls: it leaves out the time spent
  waiting for a core (a busy machine still inflates it), and it bounds how many sends one core
  can carry.

The servers run with ``AGENT_LINK_READ_BYTES`` large enough for 30 messages, so the first
line measures reads of 30 whole messages, not the output budget's cut.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROUNDS = 30
CPU_CALLS = 200
READS = 61
REVISION = "2025-06-18"


class Server:
    """One ``agent-link mcp`` process spoken to with raw JSON-RPC lines over its stdio."""

    def __init__(self, env: dict[str, str]) -> None:
        exe = str(Path(sys.executable).with_name("agent-link"))
        self.proc = subprocess.Popen([exe, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env)
        self.next_id = 0
        self.request("initialize", {"protocolVersion": REVISION, "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "1"}})
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.request("tools/list", {})

    def _send(self, obj: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(obj) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request; its response (notifications in between are skipped)."""
        assert self.proc.stdout is not None
        self.next_id += 1
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            raw = self.proc.stdout.readline()
            if not raw:
                raise RuntimeError(f"agent-link mcp ended during {method}")
            answer = json.loads(raw)
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer["result"]

    def tool(self, name: str, arguments: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        """Call tool ``name``: ``(wall ms, structured result)``."""
        start = time.perf_counter()
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        elapsed = (time.perf_counter() - start) * 1000
        if result.get("isError"):
            raise RuntimeError(f"{name}: {result['content'][0]['text'][:300]}")
        return elapsed, result.get("structuredContent") or json.loads(result["content"][0]["text"])

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(60)


def _env(tmp: Path, state: str, address: str) -> dict[str, str]:
    return dict(os.environ, HOME=str(tmp), AGENT_LINK_STATE_DIR=str(tmp / state), XDG_CACHE_HOME=str(tmp / "cache"),
                AGENT_LINK_ADDRESS=address, AGENT_LINK_READ_BYTES="400000")


def _median_pair(a: list[float], b: list[float]) -> tuple[float, float]:
    return statistics.median(a[1:]), statistics.median(b[1:])  # the first call of each warms up


def bench_inbox_sizes(tmp: Path, line: Any) -> None:
    """The read of 30 messages against the read of 1 (see the module docstring)."""
    sender = Server(_env(tmp, "sizes", "team:alice"))
    for i in range(30):
        sender.tool("message_agent", {"to": "team:bob30", "message": f"note {i}: " + "words " * 20})
    sender.tool("message_agent", {"to": "team:bob1", "message": "note 0: " + "words " * 20})
    sender.close()
    many, one = Server(_env(tmp, "sizes", "team:bob30")), Server(_env(tmp, "sizes", "team:bob1"))
    args = {"markAsDelivered": False, "limit": 30}
    times_many: list[float] = []
    times_one: list[float] = []
    for _ in range(READS):
        for server, sink, expected in ((many, times_many, 30), (one, times_one, 1)):
            elapsed, result = server.tool("read_agent_link_inbox", args)
            if len(result["messages"]) != expected:
                raise RuntimeError(f"the read returned {len(result['messages'])} messages, not {expected}")
            sink.append(elapsed)
    many.close()
    one.close()
    many_ms, one_ms = _median_pair(times_many, times_one)
    line("MCP inbox read returning 30 messages", many_ms, "ms", "returning 1", one_ms, "<= 3")


def bench_send_read(tmp: Path, line: Any) -> None:
    """Send and read p50 through two servers beside a bare health call (module docstring)."""
    alice, bob = Server(_env(tmp, "pair", "team:alice")), Server(_env(tmp, "pair", "team:bob"))
    sends: list[float] = []
    reads: list[float] = []
    health: list[float] = []
    for i in range(ROUNDS + 1):
        health.append(alice.tool("agent_link_health", {})[0])
        sends.append(alice.tool("message_agent", {"to": "team:bob", "message": f"round {i}"})[0])
        health.append(bob.tool("agent_link_health", {})[0])
        reads.append(bob.tool("read_agent_link_inbox", {"markAsDelivered": False})[0])
    send_cpu_ms = _cpu_ms(alice, "message_agent", lambda i: {"to": "team:bob", "message": f"batch {i}"})
    health_cpu_ms = _cpu_ms(alice, "agent_link_health", lambda i: {})
    alice.close()
    bob.close()
    health_ms = statistics.median(health[2:])
    send_ms, read_ms = statistics.median(sends[1:]), statistics.median(reads[1:])
    line("MCP send p50 (team:alice -> team:bob)", send_ms, "ms", "health call", health_ms, "send p50 <= 3 ms")
    line("MCP inbox read p50 (team:bob, <= 20 msgs)", read_ms, "ms", "health call", health_ms, "read p50 <= 8 ms")
    line("MCP send, server CPU per call", send_cpu_ms, "ms", "health call", health_cpu_ms, "lower is better")


def _cpu_ms(server: Server, tool: str, arguments: Any) -> float:
    """The CPU time (ms, user + system) ``server``'s process spends per call of ``tool`` over
    :data:`CPU_CALLS` calls in a row (``arguments(i)`` for the i-th)."""
    import psutil

    process = psutil.Process(server.proc.pid)
    before = process.cpu_times()
    for i in range(CPU_CALLS):
        server.tool(tool, arguments(i))
    after = process.cpu_times()
    return (after.user + after.system - before.user - before.system) * 1000 / CPU_CALLS


def bench_readpath(tmp: Path, line: Any) -> None:
    """Print this module's lines (``line`` is bench/run.py's printer)."""
    bench_inbox_sizes(tmp, line)
    bench_send_read(tmp, line)
