"""Ctrl-C in the first milliseconds of any command (README: one stderr line and exit 130, never a traceback; the prompt
hook fails open: exit 0). A real process gets a real SIGINT at several early delays; once agent-link's own code runs
(``entry.main``), no traceback. What CPython prints while it starts (``site``, finding the package: before the first
line of agent-link runs) is out of its reach, and such a run is not counted."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(300)
AGENT_LINK = str(Path(sys.executable).parent / "agent-link")
#: when the SIGINT comes, in bare interpreter starts (``python -c pass`` here, now): a busy machine (CI runs 4 workers
#: on 2 cores) slows the start and agent-link's code alike, so fixed delays could all land in CPython's own start
FACTORS = (0.3, 0.6, 1.0, 1.3, 1.6, 2.0, 2.5, 3.0, 4.0, 5.0)
#: a frame inside a function of agent-link's code (not the body of a module being imported as the process starts)
OUR_FRAME = re.compile(r'File ".*agent_link_core/[^"]+", line \d+, in (?!<module>)')


def bare_start_s() -> float:
    """The fastest of three ``python -c pass`` runs, in seconds."""
    times = []
    for _ in range(3):
        started = time.monotonic()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.monotonic() - started)
    return min(times)


def interrupted_runs(command: list[str], rounds: int = 2) -> list[tuple[int, str]]:
    """``(exit status, stderr)`` of ``command`` (its stdin an open, empty pipe) sent SIGINT after each of :data:`FACTORS`
    bare starts (measured again each round)."""
    runs = []
    for delay in (bare_start_s() * factor for _ in range(rounds) for factor in FACTORS):
        # a terminal's Ctrl-C: SIGINT as a shell's foreground job gets it (a background job, as under nohup ... &, would
        # inherit it ignored, and Python then never raises KeyboardInterrupt)
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                env={**os.environ, "AGENT_LINK_ADDRESS": "test:carol"},
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        runs.append((proc.returncode, err.decode("utf-8", "replace")))
    return runs


@pytest.mark.parametrize("command, stopped", [
    ([AGENT_LINK, "inbox"], 130),
    ([AGENT_LINK, "send", "test:bob", "hi"], 130),
    ([sys.executable, "-m", "agent_link_core", "inbox"], 130),
    ([AGENT_LINK, "hook", "claude", "UserPromptSubmit"], 0),
    ([AGENT_LINK, "mcp"], 130),
], ids=["inbox", "send", "python-m", "hook", "mcp"])
def test_an_early_ctrl_c_prints_one_line_and_no_traceback(command: list[str], stopped: int) -> None:
    said = 0
    for status, err in interrupted_runs(command):
        assert not OUR_FRAME.search(err), err
        if "stopped by Ctrl-C" in err:
            said += 1
            # one line for the Ctrl-C, the last (what the command said before it stays)
            assert status == stopped and err.count("Ctrl-C") == 1 and "Ctrl-C" in err.strip().splitlines()[-1], (status, err)
    assert said, "no run was stopped while agent-link's code ran: the test did not test it"


@pytest.mark.parametrize("command", ["show", "plugins"], ids=["fast-path", "click"])
def test_a_ctrl_c_as_a_command_ends_never_kills_it_by_the_signal(command: str) -> None:
    """SIGINT after the command printed its first line, again and again until it exits (the tester's Ctrl-C just after
    ``agent-link wait`` printed the reply): exit 0 and nothing on stderr, or 130 and one line; never death by SIGINT
    (Python's shutdown gives SIGINT its default action back) nor click's blank line and ``Abort``."""
    from agent_link_testing.cli_runner import seed

    env = {**os.environ, "AGENT_LINK_ADDRESS": "test:bob"}
    args = [AGENT_LINK, "show", seed(to="test:bob")] if command == "show" else [AGENT_LINK, "plugins"]
    outcomes = []
    for _ in range(15):
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        assert proc.stdout is not None and proc.stdout.readline()
        while proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            time.sleep(0.0005)
        _, err = proc.communicate(timeout=60)
        said = err.decode("utf-8", "replace")
        outcomes.append(proc.returncode)
        assert (proc.returncode, said) == (0, "") or (proc.returncode == 130 and said.count("\n") == 1
                                                      and said.startswith("agent-link") and "stopped by Ctrl-C" in said), (proc.returncode, said)
    assert outcomes
