"""Process facts harnesses need, from psutil: is a pid alive, its parent, its command line,
its start stamp, who has a file open.

The start stamp defeats pid reuse and matches what a host may record for its own processes:
on Linux the start time in clock ticks since boot (field 22 of ``/proc/<pid>/stat``) as a
decimal string; elsewhere the ``ps -o lstart=`` text in UTC (``Mon Nov  2 15:04:05 2026``).
psutil is imported on first use: the hook fast path never pays for it.
"""

from __future__ import annotations

import os
import socket
import struct
import sys
import time

# the presence plugin's check, one copy: host plugins import it from here with the other process facts
from agent_link_presence import pid_alive as pid_alive

TYPE_CHECKING = False
if TYPE_CHECKING:
    import psutil


def _process(pid: int) -> psutil.Process | None:
    import psutil

    if pid <= 0:
        return None
    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


def start_stamp(pid: int) -> str | None:
    """The start stamp of ``pid`` (module docstring); None when it cannot be read."""
    import psutil

    proc = _process(pid)
    if proc is None:
        return None
    try:
        created = proc.create_time()
    except psutil.Error:
        return None
    if sys.platform.startswith("linux"):
        return str(round((created - psutil.boot_time()) * os.sysconf("SC_CLK_TCK")))
    return time.strftime("%a %b %e %H:%M:%S %Y", time.gmtime(created))


def parent_pid(pid: int) -> int | None:
    """The parent of ``pid``; None when unknown."""
    import psutil

    proc = _process(pid)
    try:
        return proc.ppid() if proc is not None else None
    except psutil.Error:
        return None


def command_line(pid: int) -> list[str] | None:
    """The argv of ``pid``; None when unknown."""
    import psutil

    proc = _process(pid)
    try:
        return proc.cmdline() if proc is not None else None
    except psutil.Error:
        return None


def executable(pid: int) -> str | None:
    """The absolute path of the program ``pid`` runs (symlinks resolved by the OS); None
    when unknown (gone, another user's process, a platform psutil does not cover)."""
    import psutil

    proc = _process(pid)
    try:
        return (proc.exe() or None) if proc is not None else None
    except (psutil.Error, OSError):
        return None


def lineage(pid: int | None = None, depth: int = 12) -> list[int]:
    """``pid`` (default: this process) then its ancestors, nearest first, at most ``depth``
    pids; stops before pid 1 (init adopts orphans, so it proves nothing) or an unknown parent."""
    chain: list[int] = []
    current: int | None = os.getpid() if pid is None else pid
    while current is not None and current > 1 and len(chain) < depth:
        chain.append(current)
        current = parent_pid(current)
    return chain


def open_paths(pid: int) -> set[str] | None:
    """Real paths of the regular files ``pid`` has open; None when they cannot be read here."""
    import psutil

    proc = _process(pid)
    if proc is None:
        return None
    try:
        return {os.path.realpath(f.path) for f in proc.open_files()}
    except (psutil.Error, OSError, NotImplementedError):
        return None


def socket_peer_pid(conn: socket.socket) -> int | None:
    """The pid of the process at the other end of a connected Unix socket, as the kernel
    reports it (``SO_PEERCRED`` on Linux, ``LOCAL_PEERPID`` on macOS); None elsewhere or when
    it cannot be read. The peer cannot choose what this says."""
    try:
        if hasattr(socket, "SO_PEERCRED"):
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            pid = struct.unpack("3i", creds)[0]
        elif sys.platform == "darwin":
            pid = conn.getsockopt(0, 0x002)  # SOL_LOCAL, LOCAL_PEERPID
        else:
            return None
    except OSError:
        return None
    return pid if pid > 0 else None


def file_holders(path: str, exclude: set[int]) -> list[int]:
    """Pids (other than ``exclude``) of processes that have ``path`` open; processes this
    user may not inspect are skipped."""
    import psutil

    target = os.path.realpath(path)
    holders = []
    for proc in psutil.process_iter():
        if proc.pid in exclude:
            continue
        try:
            if any(os.path.realpath(f.path) == target for f in proc.open_files()):
                holders.append(proc.pid)
        except psutil.Error:
            continue
    return holders
