"""What Codex proves about a caller (``Caller.evidence``; the rule is
:mod:`agent_link_core.identity`).

``CODEX_THREAD_ID`` and a tool call's ``_meta`` only name a thread: any process can set the
variable, and any MCP client can send the ``_meta``. Codex proves the caller when a process in
the caller's lineage (the MCP server's parent for a tool call, an ancestor of the shell for a
command) runs Codex's own program and has that thread's transcript (``rollout-…-<thread
id>.jsonl``) open: Codex keeps the transcript of every thread it has loaded open while it runs
it, and only Codex's program writes a Codex process's open files.

Not proved: which of the threads one Codex process has loaded is calling (a command run in one
thread of an app-server can name another thread of the same app-server), and nothing inside a
sandbox that hides the host's processes (the check then finds no ancestor: unverified).
"""

from __future__ import annotations

import os
import re
import time

from agent_link_hostkit.procs import executable, lineage, open_paths, start_stamp

#: the native Codex program (``codex``, ``codex.exe``); the npm ``codex.js`` wrapper only starts it
PROGRAM_RE = re.compile(r"(?:^|[/\\])codex(?:\.exe)?$")
LINEAGE_DEPTH = 12
#: how long a failed check is remembered (a thread's transcript is opened on its first turn)
MISS_RETRY_S = 2.0


def is_codex_program(pid: int) -> bool:
    """True when the OS reports Codex's native program as the executable of ``pid``."""
    exe = executable(pid)
    return exe is not None and bool(PROGRAM_RE.search(exe))


def holds_transcript(pid: int, thread_id: str) -> bool:
    """True when ``pid`` has the transcript of ``thread_id`` open (``rollout-<time>-<id>.jsonl``)."""
    suffix = f"-{thread_id}.jsonl"
    return any(os.path.basename(p).startswith("rollout-") and p.endswith(suffix) for p in open_paths(pid) or ())


class Prover:
    """Finds and remembers the Codex process that proves a thread (one per harness).

    A proof found stays valid while that process runs (same pid and start stamp); a miss is
    asked again after :data:`MISS_RETRY_S` seconds.
    """

    def __init__(self) -> None:
        self._found: dict[str, tuple[int, str | None]] = {}
        self._missed: dict[str, float] = {}

    def evidence(self, thread_id: str) -> str | None:
        """The evidence for ``Caller.evidence`` that this process runs under the Codex process
        that has ``thread_id`` loaded, or None when nothing proves it."""
        cached = self._found.get(thread_id)
        if cached is not None and start_stamp(cached[0]) == cached[1] and cached[0] in lineage(os.getppid(), LINEAGE_DEPTH):
            return self._words(cached[0])
        self._found.pop(thread_id, None)
        missed = self._missed.get(thread_id)
        if missed is not None and time.monotonic() - missed < MISS_RETRY_S:
            return None
        for pid in lineage(os.getppid(), LINEAGE_DEPTH):
            if is_codex_program(pid) and holds_transcript(pid, thread_id):
                self._found[thread_id] = (pid, start_stamp(pid))
                self._missed.pop(thread_id, None)
                return self._words(pid)
        self._missed[thread_id] = time.monotonic()
        return None

    @staticmethod
    def _words(pid: int) -> str:
        return f"pid {pid}, an ancestor of this process, is the Codex process that has that thread's transcript open"
