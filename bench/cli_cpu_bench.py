"""`make bench`: CPU that one ``agent-link send`` / ``agent-link inbox`` costs a script.

Each command runs with people's text output against a state dir holding 10,000 stored
messages, alternately with ``python -c pass`` in the same interpreter, so load from elsewhere
on the machine weighs on both alike. The figure is the median CPU time (user + system, ms)
of the child process (``os.wait4``), not wall time: a script calling ``send`` in a loop pays
that CPU each time. Target: each ratio <= 5.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

RUNS = 15
STORED = 10_000


def cpu_ms(cmd: list[str], env: dict[str, str], cwd: Path | None = None) -> float:
    """CPU time (user + system, ms) of one run of ``cmd`` (its output discarded).

    :raises RuntimeError: the command exited non-zero (its stderr is in the message).
    """
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stderr.close()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {err.decode(errors='replace')[-500:]}")
    return (usage.ru_utime + usage.ru_stime) * 1000


def interleaved_cpu(cmd: list[str], env: dict[str, str], runs: int = RUNS, busy: Path | None = None) -> tuple[float, float]:
    """Median CPU ms of ``cmd`` and of ``python -c pass``, run alternately (one warm-up pair).
    ``{i}`` in an argument becomes the run's number: each send goes to a new address with new
    words, as the loop guard and the pair rate limit refuse a burst of repeats between two
    addresses (both checks still run). ``busy``: both run there, a new file created in it before each run of ``cmd``."""
    base: list[float] = []
    mine: list[float] = []
    for _ in range(runs + 1):
        base.append(cpu_ms([sys.executable, "-c", "pass"], env, busy))
        if busy is not None:
            (busy / f"churn-{len(mine)}").write_text("")
        mine.append(cpu_ms([arg.replace("{i}", str(len(mine))) for arg in cmd], env, busy))
    return statistics.median(mine[1:]), statistics.median(base[1:])


def bench_cli_cpu(tmp: Path, fill: Callable[..., None], line: Callable[..., None]) -> None:
    """Print the send and inbox lines (``fill`` and ``line`` are bench/run.py's)."""
    root = Path(__file__).resolve().parent.parent
    # Installed packages have bytecode; editable sources may not (PYTHONDONTWRITEBYTECODE).
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "agent_link_core"), str(root / "plugins"),
                    str(root / "examples")], check=False, capture_output=True)
    state = tmp / "cli-cpu"
    fill(state, STORED)
    exe = str(Path(sys.executable).with_name("agent-link"))
    env = dict(os.environ, AGENT_LINK_STATE_DIR=str(state), AGENT_LINK_ADDRESS="bench:me")
    for key in ("CODEX_THREAD_ID", "CLAUDE_CODE_SESSION_ID", "CLAUDECODE"):
        env.pop(key, None)
    cpu_ms([exe, "send", "bench:other1", "warm-up"], env)  # creates nothing new later: the schema exists
    send_ms, base_ms = interleaved_cpu([exe, "send", "bench:other{i}", "hello from the bench {i}"], env)
    line(f"CLI send ({STORED:,} stored), CPU", send_ms, "ms", "python -c pass", base_ms, "<= 5")
    for i in range(20):
        cpu_ms([exe, "send", "bench:me", f"to read {i}", "--from", f"bench:from{i}"], env)
    inbox_ms, base_ms = interleaved_cpu([exe, "inbox", "--peek"], env)
    line(f"CLI inbox ({STORED:,} stored), CPU", inbox_ms, "ms", "python -c pass", base_ms, "<= 5")
    # python -m puts the current directory on sys.path: files coming and going there must not
    # miss the entry-point cache (agent_link_core/discovery.py), which would scan every distribution
    busy = tmp / "busy-cwd"
    busy.mkdir()
    module_ms, base_ms = interleaved_cpu([sys.executable, "-m", "agent_link_core", "inbox", "--peek"], env, busy=busy)
    line("python -m agent_link_core inbox, busy cwd, CPU", module_ms, "ms", "python -c pass", base_ms, "<= 5")
