"""Process facts the claude harness needs: is a pid alive, when did it start, who is its parent,
what is its command line.

Claude Code writes ``procStart`` into ``<config dir>/sessions/<pid>.json`` so that a reused pid
is not mistaken for the session's process. On Linux that value is field 22 (``starttime``, clock
ticks since boot) of ``/proc/<pid>/stat``, as a decimal string; elsewhere it is the output of
``ps -o lstart= -p <pid>`` run with ``LC_ALL=C TZ=UTC`` (read from the Claude Code 2.1.197 binary
and checked against a live session on Linux). :func:`proc_start` computes the same value so the
two can be compared. Process inspection goes through psutil; on Linux the tick count is
recovered from psutil's start time (boot time + ticks / clock rate, both read by psutil from
``/proc``), so it matches the host's value exactly.
"""

from __future__ import annotations

import os
import subprocess
import sys

import psutil

PS_TIMEOUT_S = 1.0
_LINUX = sys.platform.startswith("linux")
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if _LINUX else 100


def _proc_stat_fields(pid: int) -> list[str] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name: index 0 is the state, 1 the ppid,
    19 the start time. None when the process does not exist (or this is not Linux)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    # the command name is in parentheses and may itself contain spaces or parentheses
    return text[text.rfind(")") + 2 :].split(" ")


def _ps(pid: int, field: str) -> str | None:
    try:
        done = subprocess.run(
            ["ps", "-ww", "-o", f"{field}=", "-p", str(pid)],
            capture_output=True, text=True, timeout=PS_TIMEOUT_S,
            env={**os.environ, "LC_ALL": "C", "TZ": "UTC"},
        )
    except (OSError, subprocess.SubprocessError):
        return None
    out = done.stdout.strip()
    return out if done.returncode == 0 and out else None


def proc_start(pid: int) -> str | None:
    """The start-time stamp Claude Code stores as ``procStart`` for ``pid``; None if unknown."""
    if pid <= 0:
        return None
    if _LINUX:
        try:
            started = psutil.Process(pid).create_time()
        except (psutil.Error, OSError):
            return None
        return str(round((started - psutil.boot_time()) * _CLOCK_TICKS))
    return _ps(pid, "lstart")


def pid_alive(pid: int) -> bool:
    """True when a process with this pid exists (it may belong to another user)."""
    return pid > 0 and psutil.pid_exists(pid)


def same_process(pid: int, recorded_start: object) -> bool:
    """True when ``pid`` runs and is the process whose start stamp was recorded.

    Without a recorded stamp (or when the stamp cannot be read here) only existence is checked.
    """
    if not pid_alive(pid):
        return False
    if not isinstance(recorded_start, str) or not recorded_start:
        return True
    current = proc_start(pid)
    return current is None or current == recorded_start


def parent_pid(pid: int) -> int | None:
    """The parent of ``pid``; None when unknown."""
    if _LINUX:
        fields = _proc_stat_fields(pid)
        if fields is None or len(fields) < 2:
            return None
        raw: str | None = fields[1]
    else:
        raw = _ps(pid, "ppid")
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def command_line(pid: int) -> list[str] | None:
    """The argv of ``pid``. On Linux exact (``/proc/<pid>/cmdline``); elsewhere ``ps`` output
    split on whitespace, which is good enough for finding flags. None when unknown."""
    if _LINUX:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                raw = f.read()
        except OSError:
            return None
        return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]
    text = _ps(pid, "args")
    return text.split() if text is not None else None
