"""Real ``python -m agent_link_core`` processes, started by forking a prepared interpreter.

Most of an ``agent-link mcp`` process's CPU time is importing the MCP SDK and pydantic (the
imports alone take about 1.4 CPU-seconds on a loaded 2-core machine). A test that starts dozens
of them (the fault matrix, tests/test_fault_matrix.py) starts one :class:`Zygote` instead: an
interpreter that imported those third-party packages once (never agent-link's own modules,
which read the process's environment and parent at import) and forks, per process, a child
that takes the test's pipes, environment, working directory and ``sys.path`` (``PYTHONPATH``
as the interpreter would read it), then runs ``agent_link_core`` as ``-m`` does. Each is a
process of its own: its stdio is pipes, its exit status (``SystemExit``, a signal) is the
interpreter's, and agent-link's code, plugins included, is imported fresh in it. What differs
from a new interpreter: its parent is a supervisor forked from the zygote (not the test), and
the variables an interpreter reads only at its start (``PYTHONUNBUFFERED``, ``PYTHONHASHSEED``,
a sitecustomize on ``PYTHONPATH``...) are the zygote's: a process whose environment differs
there is started as a new interpreter (:meth:`Zygote.forks`), and so is one a test about its
parent starts itself.

A program that starts the server itself (the MCP SDK's stdio client,
:func:`agent_link_testing.mcp_client.agent_link_mcp`) runs :meth:`Zygote.command` instead: a
small stdlib-only launcher that hands its stdio to the zygote's process, passes on SIGTERM,
SIGINT and SIGHUP, and exits as that process did. :func:`shared` is the test process's zygote.

``AGENT_LINK_TEST_EXEC=1`` in the environment pytest starts with starts real ``python -m
agent_link_core`` processes instead, to check that both agree.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

#: the third-party modules every ``agent-link mcp`` process imports: imported once in the zygote
PRELOAD = ("anyio", "click", "jsonschema", "mcp_types", "mcp.server", "mcp.server.stdio", "mcp.shared.message",
           "pydantic", "sqlite3")
_HEADER = struct.Struct("!I")
#: real ``python -m agent_link_core`` processes instead of forked ones (read at import: the
#: tests' isolated environment drops ``AGENT_LINK_`` variables)
EXEC = os.environ.get("AGENT_LINK_TEST_EXEC") == "1"

LAUNCHER = """
import json, os, signal, socket, struct, sys
conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
conn.connect(sys.argv[1])
request = json.dumps({"args": sys.argv[2:], "env": dict(os.environ), "cwd": os.getcwd()}).encode()
socket.send_fds(conn, [struct.pack("!I", len(request)) + request], [0, 1, 2])
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 0)  # only the process holds the stdio pipes: its client sees their ends
os.dup2(null, 1)
lines = conn.makefile("rb")
pid = int(lines.readline())
for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(signum, lambda signum, frame: os.kill(pid, signum))
status = int(lines.readline() or b"1")
if status < 0:
    signal.signal(-status, signal.SIG_DFL)
    os.kill(os.getpid(), -status)
os._exit(status)
"""


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """One request: a length-prefixed JSON object and the three stdio descriptors."""
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    while len(data) < _HEADER.size or len(data) < _HEADER.size + _HEADER.unpack_from(data)[0]:
        more = conn.recv(1 << 16)
        if not more:
            raise EOFError("the test closed its request early")
        data += more
    return json.loads(data[_HEADER.size:]), list(fds)


def _serve(listener: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """The zygote's loop: for each request fork a supervisor that forks the process, reports
    its pid, waits for it and reports its exit status on the request's connection. Returns
    only in the forked process, with its request and descriptors. Ends (:func:`_stop`) once
    the test process that started it is gone, even if that one never closed it."""
    parent = os.getppid()
    listener.settimeout(1.0)
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            if os.getppid() != parent:
                _stop()
            continue
        conn.settimeout(None)
        request, fds = _receive(conn)
        if os.fork() == 0:  # the supervisor
            listener.close()
            pid = os.fork()
            if pid == 0:
                conn.close()
                return request, fds
            for fd in fds:
                os.close(fd)
            conn.sendall(b"%d\n" % pid)
            _, status = os.waitpid(pid, 0)
            conn.sendall(b"%d\n" % os.waitstatus_to_exitcode(status))
            os._exit(0)
        conn.close()
        for fd in fds:
            os.close(fd)
        while True:  # reap finished supervisors (their processes' CPU time counts as ours)
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break


def _become(request: dict[str, Any], fds: list[int]) -> None:
    """Turn the forked zygote into the requested process, as ``subprocess.Popen`` and the
    interpreter's start would have made it: stdio, no other inherited descriptor, the
    environment, the working directory, ``sys.path`` and ``sys.argv``."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    keep = set(range(3))
    for name in os.listdir("/proc/self/fd"):
        if int(name) not in keep:
            try:
                os.close(int(name))
            except OSError:
                pass  # the listing's own descriptor, already closed
    os.chdir(request["cwd"])
    own = _python_path(os.environ)  # the zygote's, before the request's environment replaces it
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[:] = [os.getcwd(), *_python_path(request["env"]), *(p for p in sys.path[1:] if p not in own)]
    sys.argv[:] = ["-m", *request["args"]]


def _python_path(env: Mapping[str, str]) -> list[str]:
    return [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]


def _at_start(env: Mapping[str, str]) -> dict[str, str]:
    """What of ``env`` an interpreter reads only at its start: the ``PYTHON*`` variables but
    ``PYTHONPATH``, ``AGENTLINK_TEST_UNINSTALLED`` (read by the nested runs' sitecustomize,
    agent_link_testing.plugin_suites), and ``PYTHONPATH`` too when one of its folders holds a
    sitecustomize or usercustomize module (run at the start)."""
    read = {k: v for k, v in env.items() if (k.startswith("PYTHON") and k != "PYTHONPATH") or k == "AGENTLINK_TEST_UNINSTALLED"}
    if any((Path(p) / f"{name}.py").exists() for p in _python_path(env) for name in ("sitecustomize", "usercustomize")):
        read["PYTHONPATH"] = env.get("PYTHONPATH", "")
    return read


def _stop(*_: object) -> None:
    """End the zygote once every supervisor it forked ended (their CPU time then counts as the
    zygote's, and the zygote's as the test process's)."""
    while True:
        try:
            os.wait()
        except ChildProcessError:
            os._exit(0)


def main(address: str) -> None:
    """The zygote: import :data:`PRELOAD`, listen on the Unix socket ``address`` and, in each
    forked child, run ``agent_link_core`` as ``python -m agent_link_core ARGS`` would."""
    import importlib
    import runpy

    for name in PRELOAD:
        importlib.import_module(name)
    # The preloaded objects move to the GC's permanent generation: a child's collections then
    # never touch (and so copy) the pages they share with the zygote.
    gc.freeze()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(16)
    signal.signal(signal.SIGTERM, _stop)  # the test's teardown; reset in the forked processes
    print("ready", flush=True)
    request, fds = _serve(listener)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _become(request, fds)
    importlib.invalidate_caches()
    runpy.run_module("agent_link_core", run_name="__main__", alter_sys=True)


class ForkedProcess:
    """A process a :class:`Zygote` started, with the parts of :class:`subprocess.Popen` the
    tests use: ``args``, ``pid``, ``stdin``/``stdout``/``stderr`` (the test's ends of the
    pipes, text or bytes), ``returncode``, :meth:`poll`, :meth:`wait`, :meth:`communicate`,
    :meth:`kill`, :meth:`terminate`."""

    def __init__(self, args: list[str], conn: socket.socket, stdin: IO[Any] | None, stdout: IO[Any] | None,
                 stderr: IO[Any] | None) -> None:
        self.args = args
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self._conn = conn
        self._buffer = b""
        self._lock = threading.Lock()
        self.returncode: int | None = None
        line = self._line(None)
        if not line:
            raise RuntimeError(f"the zygote did not start {args}")
        self.pid = int(line)

    def _line(self, timeout: float | None) -> bytes:
        """The next line the supervisor wrote (b"" when it closed the connection first).

        :raises TimeoutError: when none came within ``timeout`` s.
        """
        self._conn.settimeout(timeout)
        while b"\n" not in self._buffer:
            chunk = self._conn.recv(64)
            if not chunk:
                return b""
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def wait(self, timeout: float | None = None) -> int:
        """The exit status (negative: the signal that ended it), waiting up to ``timeout`` s.

        :raises subprocess.TimeoutExpired: when it has not ended by then.
        """
        with self._lock:
            if self.returncode is None:
                try:
                    line = self._line(timeout)
                except TimeoutError:
                    raise subprocess.TimeoutExpired(self.args, timeout or 0) from None
                if not line:
                    raise RuntimeError(f"the zygote lost {self.args}")
                self.returncode = int(line)
                self._conn.close()
            return self.returncode

    def poll(self) -> int | None:
        """The exit status, or None while it runs."""
        try:
            return self.wait(0.001)
        except subprocess.TimeoutExpired:
            return None

    def communicate(self, timeout: float | None = None) -> tuple[Any, Any]:
        """Read stdout and stderr to their ends and wait for the exit (``timeout`` s for all).

        :raises subprocess.TimeoutExpired: when the process has not ended by then (what was
            read so far is lost, so call :meth:`kill` and then this again without a timeout).
        """
        results: dict[str, Any] = {}

        def read(name: str, stream: IO[Any] | None) -> None:
            results[name] = stream.read() if stream is not None else None

        readers = [threading.Thread(target=read, args=(name, stream), daemon=True)
                   for name, stream in (("out", self.stdout), ("err", self.stderr)) if stream is not None and not stream.closed]
        for reader in readers:
            reader.start()
        self.wait(timeout)
        for reader in readers:
            reader.join(timeout)
            if reader.is_alive():  # a grandchild holds the pipe open
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        for stream in (self.stdout, self.stderr):
            if stream is not None:
                stream.close()
        return results.get("out"), results.get("err")

    def send_signal(self, signum: int) -> None:
        """Send ``signum`` unless the process already ended."""
        if self.poll() is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        """SIGKILL, as :meth:`subprocess.Popen.kill`."""
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        """SIGTERM, as :meth:`subprocess.Popen.terminate`."""
        self.send_signal(signal.SIGTERM)


class Zygote:
    """One prepared interpreter (:func:`main`) in a folder of the test's; :meth:`start` forks
    a process from it; :meth:`close` ends it (the processes it started should have ended)."""

    def __init__(self, folder: Path, env: Mapping[str, str]) -> None:
        self.address = str(folder / "zygote.sock")
        self.log = folder / "zygote.log"
        env = dict(env)
        self.at_start = _at_start(env)
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen([sys.executable, "-c", f"from agent_link_testing.forked_processes import main; main({self.address!r})"],
                                         env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log)
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline()
        assert ready == b"ready\n", (ready, self.log.read_text(errors="replace")[-2000:])

    def forks(self, env: Mapping[str, str]) -> bool:
        """Whether a process with the whole environment ``env`` can be forked from this
        zygote: not under :data:`EXEC`, and ``env`` agrees with the zygote's on what an
        interpreter reads only at its start (:func:`_at_start`)."""
        return not EXEC and _at_start(env) == self.at_start

    def command(self, args: Sequence[str], env: Mapping[str, str]) -> list[str]:
        """The command line of a launcher that runs ``python -m agent_link_core ARGS`` forked
        from this zygote, with the launcher's stdio, environment (the whole ``env``, passed
        to the launcher too) and working directory; the real command when it cannot be
        forked (:meth:`forks`)."""
        if not self.forks(env):
            return [sys.executable, "-m", "agent_link_core", *args]
        return [sys.executable, "-I", "-S", "-c", LAUNCHER, self.address, *args]

    def start(self, args: Sequence[str], env: Mapping[str, str], *, stdin: int | None = None, text: bool = False,
              cwd: str | os.PathLike[str] | None = None) -> ForkedProcess | subprocess.Popen[Any]:
        """``python -m agent_link_core ARGS`` with the whole environment ``env``, stdout and
        stderr piped; its stdin is the descriptor ``stdin`` (kept open here: close it) or, when
        None, a pipe the test writes (``.stdin``). ``text`` reads and writes str (UTF-8).

        A real ``subprocess.Popen`` of the same command when it cannot be forked (:meth:`forks`).
        """
        command = [sys.executable, "-m", "agent_link_core", *args]
        if not self.forks(env):
            return subprocess.Popen(command, env=dict(env), cwd=cwd, stdin=subprocess.PIPE if stdin is None else stdin,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=text)
        ours: list[IO[Any] | None] = []
        theirs: list[int] = []
        for index in range(3):
            if index == 0 and stdin is not None:
                theirs.append(stdin)
                ours.append(None)
                continue
            read_end, write_end = os.pipe()
            mine, child = (write_end, read_end) if index == 0 else (read_end, write_end)
            theirs.append(child)
            mode = ("w" if index == 0 else "r") + ("" if text else "b")
            ours.append(open(mine, mode, encoding="utf-8" if text else None))  # noqa: SIM115 (closed by communicate or the test)
        request = json.dumps({"args": list(args), "env": dict(env), "cwd": os.fspath(cwd or os.getcwd())}).encode()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(self.address)
            socket.send_fds(conn, [_HEADER.pack(len(request)) + request], theirs)
        finally:
            for index, fd in enumerate(theirs):
                if index or stdin is None:
                    os.close(fd)
        return ForkedProcess(command, conn, *ours)

    def close(self) -> None:
        """End the zygote and reap it (killed when a process it started outlives 60 s)."""
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(60)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


_shared: list[Zygote] = []


def shared() -> Zygote:
    """The test process's zygote, started at the first call (in a temporary folder, with the
    environment of that moment: the zygote only imports) and ended when the process exits."""
    if not _shared:
        import atexit
        import shutil

        folder = Path(tempfile.mkdtemp(prefix="agent-link-zygote-"))
        _shared.append(Zygote(folder, os.environ))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        atexit.register(_shared[0].close)
    return _shared[0]
