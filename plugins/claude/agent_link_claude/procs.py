"""Process facts the claude harness needs: is a pid alive, when did it start, who is its parent,
what is its command line (through :mod:`agent_link_core.procs`, which uses psutil).

Claude Code writes ``procStart`` into ``<config dir>/sessions/<pid>.json`` so that a reused pid
is not mistaken for the session's process. On Linux that value is field 22 (``starttime``, clock
ticks since boot) of ``/proc/<pid>/stat``, as a decimal string; elsewhere it is the output of
``ps -o lstart= -p <pid>`` run with ``LC_ALL=C TZ=UTC`` (see docs/hosts/claude-code.md).
:func:`agent_link_core.procs.start_stamp` computes the same value so the two can be compared.
"""

from __future__ import annotations

from agent_link_core import procs

proc_start = procs.start_stamp
pid_alive = procs.pid_alive
parent_pid = procs.parent_pid
command_line = procs.command_line


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
