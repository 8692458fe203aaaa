"""`make bench`: how soon a wait in another process returns once the reply is committed.

Two waiters, each in a process of its own, each for :data:`ROUNDS` rounds:

* ``wait_for_agent {replyToMessageId}`` in an ``agent-link mcp`` server (raw JSON-RPC on its
  stdio; ``pollIntervalMs`` 1000, the default);
* ``agent-link send TARGET TEXT --wait``.

Each round the waiter is given :data:`SETTLE_S` to be waiting, then this process replies (in
process, through the API) and times from the reply's return to the waiter's answer line. The
p95 is compared with the same waiter in a state dir where wake-ups cannot be armed (a file in
place of the waiters folder), which is how every wait behaved before (polling); target: p95
<= 50 ms.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROUNDS = 20
SETTLE_S = 0.3  # the waiter is waiting by then (it is armed before its first look)
BOUND_S = 60  # a bound per answer, never a speed assertion
WAITER, REPLIER = "bench:waiter", "bench:replier"


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def _env(state: Path, address: str) -> dict[str, str]:
    return dict(os.environ, AGENT_LINK_STATE_DIR=str(state), AGENT_LINK_ADDRESS=address)


def _reply(replier: Any, message_id: str) -> None:
    asyncio.run(replier.reply(caller=replier.caller(), message_id=message_id, message="pong"))


def _latest_from_waiter(replier: Any, after: set[str]) -> str | None:
    rows = replier.store.conn.execute(
        "SELECT id FROM messages m WHERE from_addr = ? AND recipient = ?"
        " AND NOT EXISTS (SELECT 1 FROM resolutions r WHERE r.message_id = m.id)", (WAITER, REPLIER)).fetchall()
    fresh = [r["id"] for r in rows if r["id"] not in after]
    return fresh[0] if fresh else None


def mcp_rounds(state: Path) -> list[float]:
    """ms from the reply's return to ``wait_for_agent``'s answer in an MCP server process."""
    from agent_link_core.app import App
    from agent_link_core.commands.send import send_reliably

    os.environ["AGENT_LINK_STATE_DIR"] = str(state)
    sender = App.create(_env(state, WAITER))
    replier = App.create(_env(state, REPLIER))
    agent_link = str(Path(sys.executable).with_name("agent-link"))
    proc = subprocess.Popen([agent_link, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=_env(state, WAITER), text=True)
    assert proc.stdin is not None and proc.stdout is not None

    def send(obj: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(obj) + "\n")
        proc.stdin.flush()

    def answer(request_id: int) -> dict[str, Any]:
        assert proc.stdout is not None
        while True:
            got = json.loads(proc.stdout.readline())
            if got.get("id") == request_id:
                return got

    times = []
    try:
        send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        answer(0)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for n in range(1, ROUNDS + 1):
            sent = asyncio.run(send_reliably(sender, REPLIER, f"ping {n}", sender=sender.caller(), anticipation="reply"))
            send({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "wait_for_agent", "arguments": {
                "agent": REPLIER, "replyToMessageId": sent.message_id, "timeoutMs": BOUND_S * 1000, "pollIntervalMs": 1000}}})
            time.sleep(SETTLE_S)
            _reply(replier, sent.message_id)
            start = time.perf_counter()
            got = answer(n)
            times.append((time.perf_counter() - start) * 1000)
            assert '"outcome":"reply"' in json.dumps(got, separators=(",", ":")), got
    finally:
        proc.stdin.close()
        proc.wait(BOUND_S)
        sender.close()
        replier.close()
    return times


def cli_rounds(state: Path) -> list[float]:
    """ms from the reply's return to ``agent-link send --wait`` printing the outcome."""
    from agent_link_core.app import App

    replier = App.create(_env(state, REPLIER))
    agent_link = str(Path(sys.executable).with_name("agent-link"))
    times = []
    seen: set[str] = set()
    try:
        for n in range(ROUNDS):
            proc = subprocess.Popen([agent_link, "send", REPLIER, f"ping {n}", "--wait", "--timeout-ms", str(BOUND_S * 1000),
                                     "--ndjson"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=_env(state, WAITER),
                                    text=True)
            assert proc.stdout is not None
            deadline = time.monotonic() + BOUND_S
            message_id = None
            while message_id is None and time.monotonic() < deadline:
                message_id = _latest_from_waiter(replier, seen)
                time.sleep(0.01)
            assert message_id is not None, "the sender never stored its message"
            seen.add(message_id)
            time.sleep(SETTLE_S)
            _reply(replier, message_id)
            start = time.perf_counter()
            out = proc.stdout.readline()
            times.append((time.perf_counter() - start) * 1000)
            proc.communicate(timeout=BOUND_S)
            assert "reply" in out, out
    finally:
        replier.close()
    return times


def bench_waits(tmp: Path, line) -> None:  # type: ignore[no-untyped-def]
    """Print the two p95 lines (``line`` is bench/run.py's printer)."""
    for name, rounds in (("wait_for_agent", mcp_rounds), ("send --wait", cli_rounds)):
        # A state dir per waiter: both send "ping N", which the loop guard refuses as a repeat.
        woken = rounds(tmp / f"waits-{name.replace(' ', '')}")
        polled = tmp / f"waits-{name.replace(' ', '')}-polled"
        polled.mkdir()
        # A file where the waiters folder would be: no waiter can arm, every wait polls as before.
        (polled / "agent-link.db-waiters").write_text("wake-ups off")
        polling = rounds(polled)
        line(f"reply -> {name} returns, p95 of {ROUNDS}", p95(woken), "ms", "polling", p95(polling), "p95 <= 50 ms")
        print(f"  median {sorted(woken)[len(woken) // 2]:.1f} ms woken, {sorted(polling)[len(polling) // 2]:.1f} ms polling")
