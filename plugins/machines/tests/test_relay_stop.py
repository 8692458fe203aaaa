"""A relay told to stop (SIGTERM, Ctrl-C, idle) stops even when code it awaits swallows the
cancellation: nats-py and Python 3.11's ``asyncio.wait_for`` drop one that lands as their
awaited result arrives (about 1 stop in 40 ran on for good in a stress run), so the stop
cancels again until the relay ends, and a relay that still runs after ``STOP_S`` exits."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from agent_link_machines.common import cancel_until_done



async def swallows(cancellations: int) -> None:
    """Sleep on through ``cancellations`` cancellations, as the swallowing code does."""
    for _ in range(cancellations):
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            pass
    await asyncio.sleep(60)


def test_a_stop_cancels_again_until_the_task_ends() -> None:
    async def main() -> asyncio.Task[None]:
        task = asyncio.create_task(swallows(3))
        await asyncio.sleep(0)
        cancel_until_done(task, every_s=0.01)
        await asyncio.wait({task}, timeout=10)
        return task

    task = asyncio.run(main())
    assert task.cancelled()


# the CLI's relay command with a relay that never ends however often it is cancelled
STUBBORN = """
import asyncio, sys
from agent_link_machines import autostart, relay

marker = sys.argv[1]

async def run(self):  # awaited once the signal handlers are in place: say so
    open(marker, "w").close()
    while True:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            pass

relay.Relay.run = run
autostart.STOP_S = 0.5
from agent_link_core.entry import main
sys.argv = ["agent-link", "machines", "run"]
main()
"""


def test_a_relay_that_cannot_stop_exits_after_its_bound(tmp_path: Path) -> None:
    home = tmp_path / "home"
    base = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_LINK_")}
    env = {**base, "HOME": str(home), "AGENT_LINK_STATE_DIR": str(home / ".agent-link"), "AGENT_LINK_LOAD_PLUGINS": "presence waits machines",
           "AGENT_LINK_MACHINE": "ci", "AGENT_LINK_ENGINE_URL": "nats://ci:pw@127.0.0.1:4222"}  # never reached: run is replaced
    marker = tmp_path / "running"
    proc = subprocess.Popen([sys.executable, "-c", STUBBORN, str(marker)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 60
        while not marker.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < end, "the relay never ran"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, (out, err)
    assert err.strip().endswith("agent-link machines: the relay did not stop within 0.5 s of the signal; exiting now."), err

