"""What the real-host launchers (:mod:`agent_link_testing.codex_host`,
:mod:`agent_link_testing.opencode_host`) share: a private root folder, a free port, the host
program in its own process group with its output in files, waiting until it is ready, and
stopping the whole group."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_root(given: Path | None, prefix: str) -> tuple[Path, bool]:
    """``(root, owned)``: ``given`` (created when missing, kept afterwards) or a fresh
    temporary directory named ``<prefix>*`` that the caller removes (``owned`` True)."""
    if given is not None:
        given.mkdir(parents=True, exist_ok=True)
        return given, False
    return Path(tempfile.mkdtemp(prefix=prefix)), True


def spawn(cmd: Sequence[str], *, cwd: Path, env: Mapping[str, str], stdout: Path, stderr: Path) -> subprocess.Popen[bytes]:
    """Start ``cmd`` in a new session (its own process group), stdin closed, stdout and
    stderr written to the files named."""
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        return subprocess.Popen(list(cmd), cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                start_new_session=True)


def _thread_states(pid: int) -> list[str]:
    """The scheduler state letter of each thread of ``pid`` (``/proc/<pid>/task/*/stat``);
    empty once the process is gone."""
    states = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
        except (OSError, IndexError):
            continue
    return states


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getpgid(int(entry)) == pgid:
                    members.append(int(entry))
            except OSError:
                continue
    return members


def freeze(*, pid: int | None = None, pgid: int | None = None, timeout_s: float = 10.0) -> None:
    """SIGSTOP process ``pid`` or every process of group ``pgid`` and return once each of
    their threads is stopped (state ``T`` in ``/proc``).

    The signal alone is not enough: the kernel hands SIGSTOP to one thread, and the group
    stop begins only when that thread next runs; on a loaded machine the process's other
    threads can go on serving requests for a while (a request sent "after" the stop was
    answered). Undo with ``SIGCONT`` (:func:`os.kill` / :func:`os.killpg`).

    :raises TimeoutError: some thread still runs after ``timeout_s`` seconds.
    """
    if (pid is None) == (pgid is None):
        raise TypeError("freeze() takes exactly one of pid= and pgid=")
    if pgid is not None:
        os.killpg(pgid, signal.SIGSTOP)
    else:
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout_s
    while True:
        pids = _group_members(pgid) if pgid is not None else [pid]
        states = [state for p in pids if p is not None for state in _thread_states(p)]
        # zombie (Z) and dead (X) threads cannot run either
        if all(state in "tTZX" for state in states):
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"threads still running {timeout_s}s after SIGSTOP: {sorted(set(states))}")
        time.sleep(0.01)


def wait_ready(process: subprocess.Popen[bytes], ready: Callable[[], bool], *, timeout_s: float, poll_s: float,
               failed: Callable[[str], Exception]) -> None:
    """Poll ``ready()`` every ``poll_s`` seconds until it is True.

    :raises Exception: ``failed(reason)`` when the process exits first (reason names its exit
        code) or ``timeout_s`` seconds pass (reason names the time).
    """
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            raise failed(f"exited with {process.returncode} before it was ready")
        if ready():
            return
        if time.monotonic() >= deadline:
            raise failed(f"not ready within {timeout_s}s")
        time.sleep(poll_s)


def stop_group(process: subprocess.Popen[bytes] | None, grace_s: float) -> None:
    """SIGTERM the process group of ``process``, SIGKILL after ``grace_s`` seconds, then
    SIGKILL whatever of the group is left (e.g. an MCP server the host started) and reap."""
    if process is None:
        return
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(wait_s)
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            break
        except subprocess.TimeoutExpired:
            continue
    if process.poll() is None:
        process.wait(10)
