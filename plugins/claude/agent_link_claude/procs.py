"""Process facts the claude harness needs: is a pid alive, when did it start, who is its parent,
what is its command line (through :mod:`agent_link_hostkit.procs`, which uses psutil).

Claude Code writes ``procStart`` into ``<config dir>/sessions/<pid>.json`` so that a reused pid
is not mistaken for the session's process. On Linux that value is field 22 (``starttime``, clock
ticks since boot) of ``/proc/<pid>/stat``, as a decimal string; elsewhere it is the output of
``ps -o lstart= -p <pid>`` run with ``LC_ALL=C TZ=UTC`` (see docs/hosts/claude-code.md).
:func:`agent_link_hostkit.procs.start_stamp` computes the same value so the two can be compared.
"""

from __future__ import annotations

import os
import re

from agent_link_hostkit import procs

proc_start = procs.start_stamp
pid_alive = procs.pid_alive
parent_pid = procs.parent_pid
command_line = procs.command_line
#: the names Claude Code's program runs under: the npm package's ``bin/claude.exe``, an
#: installed ``claude``, or a native install's ``<data>/claude/versions/<version>``
PROGRAM_RE = re.compile(r"(?:^|/)(?:claude(?:\.exe)?|claude/versions/[^/]+)$")
#: Claude Code run by a JavaScript runtime (releases before the native build): its entry script
SCRIPT_RE = re.compile(r"(?:^|/)@anthropic-ai/claude-code/cli\.m?js$")
RUNTIMES = frozenset({"node", "node.exe", "bun", "bun.exe"})


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


def is_claude_program(pid: int) -> bool:
    """True when ``pid`` runs Claude Code's own program, as the OS reports its executable
    (a process cannot rename that without running another program): the native binary, or a
    JavaScript runtime whose first argument is Claude Code's entry script."""
    exe = procs.executable(pid)
    if exe is None:
        return False
    exe = exe.replace(os.sep, "/")
    if PROGRAM_RE.search(exe):
        return True
    if os.path.basename(exe) in RUNTIMES:
        argv = command_line(pid) or []
        script = next((a for a in argv[1:] if not a.startswith("-")), None)
        return script is not None and bool(SCRIPT_RE.search(os.path.realpath(script).replace(os.sep, "/")))
    return False
