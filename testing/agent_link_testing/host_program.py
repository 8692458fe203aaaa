"""A stand-in for a host's own program, for identity tests (:mod:`agent_link_core.identity`).

Harnesses prove a caller by finding, among its ancestors, a process whose executable the OS
reports as the host's program (``claude``, ``codex``) and that holds the host's records. A
test cannot run the real host for every case, so :class:`HostProgram` copies this Python
interpreter under the host program's name and runs a small relay in it: a process whose
``/proc/<pid>/exe`` says ``.../claude`` (or ``codex``), that can hold a file open, and that runs
commands as its children. The relay imports only the standard library (the copy has no virtual
environment).

The real hosts are exercised by the real-host tests; this only stands in for "a process of
the host's program", which is exactly what these checks look at.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

RELAY = """
import json, socket, subprocess, sys
held = []
for line in sys.stdin:
    req = json.loads(line)
    if "hold" in req:
        held.append(open(req["hold"], "a"))
        print(json.dumps({"held": req["hold"]}), flush=True)
        continue
    if "connect" in req:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(req["connect"])
            sock.sendall(req["data"].encode())
        print(json.dumps({"sent": len(req["data"])}), flush=True)
        continue
    done = subprocess.run(req["argv"], env=req["env"], capture_output=True, text=True, cwd=req.get("cwd"))
    print(json.dumps({"rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr}), flush=True)
"""


LAUNCH = """
import subprocess, sys
count = int(sys.argv[1])
held = [open(p, "a") for p in sys.argv[2:2 + count]]
sys.exit(subprocess.call(sys.argv[2 + count:]))
"""


def program(folder: Path, name: str) -> Path:
    """This interpreter copied to ``folder/name`` (once)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    if not path.exists():
        shutil.copy2(interpreter(), path)
    return path


def launcher(folder: Path, name: str, hold: Sequence[Path] = ()) -> list[str]:
    """A command prefix: the rest of the command line runs as the child (stdio inherited) of a
    process of the program ``name`` that holds the files ``hold`` open, e.g. an MCP server
    started as a Codex process holding a thread's transcript would start it."""
    return [str(program(folder, name)), "-c", LAUNCH, str(len(hold)), *(str(p) for p in hold)]


def interpreter() -> str:
    """The real interpreter binary behind this (possibly virtual-environment) Python."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


class HostProgram:
    """A running relay under a host program's name.

    :param folder: where the copy is made (a test's tmp_path).
    :param name: the program's file name (``claude``, ``codex``).
    """

    def __init__(self, folder: Path, name: str) -> None:
        self.path = program(folder, name)
        self.proc = subprocess.Popen([str(self.path), "-c", RELAY], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    @property
    def pid(self) -> int:
        """The relay's pid (the host process the checks should find)."""
        return self.proc.pid

    def _ask(self, request: Mapping[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the relay {self.path} ended (exit {self.proc.poll()})")
        return dict(json.loads(line))

    def hold(self, path: Path) -> None:
        """Open ``path`` in the relay and keep it open (as Codex keeps a thread's transcript)."""
        self._ask({"hold": str(path)})

    def send(self, socket_path: str, data: str) -> None:
        """Connect to the Unix socket ``socket_path`` from the relay itself and write ``data``."""
        self._ask({"connect": socket_path, "data": data})

    def run(self, argv: Sequence[str], env: Mapping[str, str], cwd: str | None = None) -> dict[str, Any]:
        """Run ``argv`` as the relay's child: ``{rc, stdout, stderr}``."""
        return self._ask({"argv": list(argv), "env": dict(env), "cwd": cwd})

    def close(self) -> None:
        """End the relay."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> HostProgram:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
