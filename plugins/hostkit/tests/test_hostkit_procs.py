"""agent_link_hostkit.procs: process facts of this process, a child, a finished child and a
Unix socket's peer."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from agent_link_hostkit import procs


def finished_pid() -> int:
    """The pid of a child that has exited and been reaped (so nothing runs under it)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_facts_of_this_process() -> None:
    me = os.getpid()
    assert procs.pid_alive(me)
    assert procs.parent_pid(me) == os.getppid()
    assert procs.command_line(me) and os.path.basename(procs.command_line(me)[0]).startswith("python")
    assert os.path.samefile(procs.executable(me), os.path.realpath(sys.executable))
    stamp = procs.start_stamp(me)
    assert stamp and procs.start_stamp(me) == stamp
    chain = procs.lineage()
    assert chain[0] == me and chain[1] == os.getppid() and 1 not in chain
    assert procs.lineage(me, depth=1) == [me]


def test_an_open_file_is_seen_and_its_holder_found(tmp_path: Path) -> None:
    path = tmp_path / "held"
    path.write_text("x")
    with open(path):
        assert os.path.realpath(path) in procs.open_paths(os.getpid())
        assert os.getpid() in procs.file_holders(str(path), exclude=set())
        assert os.getpid() not in procs.file_holders(str(path), exclude={os.getpid()})


def test_a_gone_or_invalid_pid_has_no_facts() -> None:
    for pid in (finished_pid(), 0, -5):
        assert procs.pid_alive(pid) is False
        assert procs.parent_pid(pid) is None
        assert procs.command_line(pid) is None
        assert procs.executable(pid) is None
        assert procs.start_stamp(pid) is None
        assert procs.open_paths(pid) is None


def test_a_zombie_is_not_alive() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped yet
        assert procs.pid_alive(child.pid) is False
    finally:
        child.wait()


def test_a_socket_peer_is_this_process() -> None:
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        assert procs.socket_peer_pid(left) == os.getpid()
