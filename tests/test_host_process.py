"""The test kit's :func:`agent_link_testing.host_process.freeze`: it returns only once every
thread of the process is stopped, so a test's "frozen" server cannot answer afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from agent_link_testing.host_process import _thread_states, freeze

# Four threads that spin on the CPU: the kind of process whose other threads went on serving
# requests after a bare SIGSTOP on a loaded machine.
SPINNERS = "import threading\nfor _ in range(4):\n    threading.Thread(target=lambda: [0 for _ in iter(int, 1)]).start()\n"


def _spinning(new_session: bool) -> subprocess.Popen[bytes]:
    process = subprocess.Popen([sys.executable, "-c", SPINNERS], start_new_session=new_session)
    deadline = time.monotonic() + 10
    while len(_thread_states(process.pid)) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    return process


@pytest.mark.parametrize("by", ["pid", "pgid"])
def test_freeze_returns_with_every_thread_stopped(by: str) -> None:
    process = _spinning(new_session=by == "pgid")
    try:
        freeze(**{by: process.pid})
        states = _thread_states(process.pid)
        assert len(states) == 5 and set(states) == {"T"}, states
        os.kill(process.pid, signal.SIGCONT)
        deadline = time.monotonic() + 10
        while "T" in _thread_states(process.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "T" not in _thread_states(process.pid)
    finally:
        process.kill()
        process.wait(10)


def test_freeze_takes_exactly_one_target() -> None:
    with pytest.raises(TypeError):
        freeze()
    with pytest.raises(TypeError):
        freeze(pid=1, pgid=1)
