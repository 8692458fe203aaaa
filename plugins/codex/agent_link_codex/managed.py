"""The private ("managed") Codex app-server agent-link starts when no other one is reachable.

Lifecycle (docs/behaviour.md §16.2, adapted to Codex 0.169.0):

* started only when autostart is on and no endpoint was named explicitly, in its own
  session/process group, with the managed directory (``AGENT_LINK_MANAGED_DIR``, default
  ``<state>/managed-app-servers``, a real 0700 directory owned by the user) as its cwd;
* listens on ``<dir>/<owner pid>.sock`` (Codex turns that path into a symlink to its real
  socket under ``/tmp/codex-daemon-<uid>/<sha256 of the path>``) or, with transport
  ``ws-token``, on a free loopback port guarded by a random capability token (0600 file);
* recorded in ``<dir>/<child pid>.json`` (0600) so a later agent-link can reap it if its owner
  died without stopping it;
* a failed start is remembered for :data:`FAILURE_TTL_S` seconds so every tool call does not
  pay for another doomed spawn;
* stopped with SIGTERM to the group, then SIGKILL after a grace period; the record, socket,
  token, stderr log and any daemon leftovers (the real socket and its ``.lock``) are removed.

Process facts come from psutil (:mod:`agent_link_hostkit.procs`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_link_hostkit import procs
from agent_link_core.errors import AgentLinkError
from agent_link_core.store import ensure_private_dir, now_ms

from agent_link_codex.endpoints import Endpoint, socket_endpoint, url_endpoint

log = logging.getLogger(__name__)

FAILURE_TTL_S = 60.0
STOP_GRACE_S = 1.5
REAP_GRACE_S = 2.0
READY_POLL_S = 0.1
#: Variables a private app-server must not inherit (role administration stays with the user).
DROPPED_ENV = ("AGENT_LINK_ROLE_ADMIN", "AGENT_LINK_ROLE_ENFORCEMENT")

# managed dir -> (monotonic time of the failure, reason, detail)
_FAILED_STARTS: dict[str, tuple[float, str, str]] = {}


class ManagedError(Exception):
    """A private app-server could not be had.

    :ivar reason: ``autostart-disabled``, ``startup-failure-cached``,
        ``codex-binary-not-found``, ``spawn-failed``, ``app-server-exited-during-startup``,
        ``readiness-timeout``, ``state-dir-unsafe``.
    :ivar detail: a human-readable cause (stderr tail, path, ...).
    :ivar searched: where the codex binary was looked for.
    """

    def __init__(self, reason: str, detail: str = "", searched: list[str] | None = None) -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
        self.searched = searched or []


@dataclass(frozen=True)
class Launcher:
    """How to run an app-server: ``argv`` + ``["--listen", ...]``.

    :param path: the program found. :param source: the setting or place it came from.
    """

    argv: tuple[str, ...]
    path: str
    source: str


def find_codex(values: Mapping[str, Any], env: Mapping[str, str]) -> Launcher:
    """Find the program to run (``AGENT_LINK_CODEX_APP_SERVER_BIN``, else a codex binary).

    Codex binary order: ``AGENT_LINK_CODEX_BIN`` (aliases ``CODEX_BIN`` ...), the CLI bundled
    in ChatGPT.app, then Codex.app (``/Applications`` and ``~/Applications``), ``PATH``,
    ``~/.local/bin``, ``/opt/homebrew/bin``, ``/usr/local/bin``.

    :raises ManagedError: ``codex-binary-not-found`` with the places searched.
    """
    path_var = env.get("PATH", os.defpath)
    home = env.get("HOME") or os.path.expanduser("~")
    searched: list[str] = []

    def usable(candidate: str) -> str | None:
        searched.append(candidate)
        found = shutil.which(candidate, path=path_var) if os.sep not in candidate else candidate
        if found and os.path.isfile(found) and os.access(found, os.X_OK):
            return os.path.abspath(found)
        return None

    app_server = values.get("AGENT_LINK_CODEX_APP_SERVER_BIN")
    if app_server:
        found = usable(os.path.expanduser(app_server))
        if found:
            return Launcher((found,), found, "AGENT_LINK_CODEX_APP_SERVER_BIN")
        raise ManagedError("codex-binary-not-found", f"{app_server} is not an executable program", searched)
    chosen = values.get("AGENT_LINK_CODEX_BIN")
    if chosen:
        found = usable(os.path.expanduser(chosen))
        if found:
            return Launcher((found, "app-server"), found, "AGENT_LINK_CODEX_BIN")
        raise ManagedError("codex-binary-not-found", f"{chosen} is not an executable program", searched)
    candidates: list[str] = []
    if sys.platform == "darwin":
        for root in ("/Applications", os.path.join(home, "Applications")):
            candidates += [f"{root}/ChatGPT.app/Contents/Resources/codex", f"{root}/Codex.app/Contents/Resources/codex"]
    candidates += ["codex", f"{home}/.local/bin/codex", "/opt/homebrew/bin/codex", "/usr/local/bin/codex"]
    for candidate in candidates:
        found = usable(candidate)
        if found:
            return Launcher((found, "app-server"), found, "PATH" if candidate == "codex" else candidate)
    raise ManagedError("codex-binary-not-found", "no codex program found", searched)


# process facts (psutil, through agent_link_hostkit.procs) -----------------------------------------
def process_start(pid: int) -> str | None:
    """An opaque start-time token of ``pid`` (defeats pid reuse), or None when unknown."""
    return procs.start_stamp(pid)


def process_command(pid: int) -> str | None:
    """The command line of ``pid`` (arguments joined by spaces), or None."""
    argv = procs.command_line(pid)
    if argv is None:
        return None
    return " ".join(argv).strip() or None


def pid_alive(pid: int, start: str | None = None) -> bool:
    """Whether ``pid`` runs (and, when ``start`` is given, is the same process)."""
    if not procs.pid_alive(pid):
        return False
    return start is None or process_start(pid) in (None, start)


def daemon_leftovers(listen_path: str) -> list[Path]:
    """Codex's real socket and lock for ``--listen unix://<listen_path>``.

    Codex binds ``/tmp/codex-daemon-<uid>/<sha256 hex of the path string>``; a SIGKILLed
    server leaves it and its ``.lock`` behind.
    """
    if not hasattr(os, "getuid"):
        return []
    real = Path(f"/tmp/codex-daemon-{os.getuid()}") / hashlib.sha256(listen_path.encode()).hexdigest()
    return [real, real.with_name(real.name + ".lock")]


def check_private_dir(path: Path) -> None:
    """Create ``path`` 0700 if missing; refuse a symlink, another owner, or a shared mode.

    :raises ManagedError: ``state-dir-unsafe``.
    """
    try:
        ensure_private_dir(path)  # parents it creates are 0700 too, whatever the umask
        st = os.lstat(path)
    except AgentLinkError as exc:
        raise ManagedError("state-dir-unsafe", f"{path}: {exc.message}") from exc
    except OSError as exc:
        raise ManagedError("state-dir-unsafe", f"{path}: {exc.strerror}") from exc
    if os.path.islink(path) or not os.path.isdir(path):
        raise ManagedError("state-dir-unsafe", f"{path} is not a real directory")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise ManagedError("state-dir-unsafe", f"{path} belongs to another user")
    if st.st_mode & 0o077:
        try:
            path.chmod(0o700)
        except OSError as exc:
            raise ManagedError("state-dir-unsafe", f"{path} is shared and cannot be made private") from exc


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _unlink(paths: list[Path | None]) -> None:
    for p in paths:
        if p is not None:
            with contextlib.suppress(OSError):
                p.unlink()


# records and the reaper --------------------------------------------------------------------
@dataclass
class Record:
    """``<managed dir>/<pid>.json``: who started which app-server, listening where.

    Times are epoch ms; ``owner_start`` / ``start`` are :func:`process_start` tokens.
    """

    owner_pid: int
    owner_start: str | None
    pid: int
    pgid: int
    start: str | None
    transport: str
    listen: str
    socket_path: str | None
    token_file: str | None
    command: list[str]
    started_at: int

    def to_json(self) -> str:
        """The record as written to its file (camelCase keys)."""
        return json.dumps({
            "ownerPid": self.owner_pid, "ownerStart": self.owner_start, "pid": self.pid, "pgid": self.pgid,
            "start": self.start, "transport": self.transport, "listen": self.listen, "socketPath": self.socket_path,
            "tokenFile": self.token_file, "command": self.command, "startedAt": self.started_at,
        })

    @classmethod
    def parse(cls, text: str) -> Record:
        """:raises ValueError: not a record (JSON nested too deeply included)."""
        try:
            d = json.loads(text)
        except RecursionError:
            raise ValueError("not a managed app-server record (nested too deeply)") from None
        if not isinstance(d, dict) or not isinstance(d.get("pid"), int) or not isinstance(d.get("ownerPid"), int):
            raise ValueError("not a managed app-server record")
        return cls(d["ownerPid"], d.get("ownerStart"), d["pid"], int(d.get("pgid") or d["pid"]), d.get("start"),
                   str(d.get("transport") or "unix"), str(d.get("listen") or ""), d.get("socketPath"),
                   d.get("tokenFile"), list(d.get("command") or []), int(d.get("startedAt") or 0))

    def files(self, directory: Path) -> list[Path | None]:
        """Everything this server leaves in the managed dir (record, socket, token, stderr
        log) and under /tmp/codex-daemon-<uid>."""
        extra: list[Path | None] = [Path(self.socket_path) if self.socket_path else None,
                                    Path(self.token_file) if self.token_file else None,
                                    directory / f"{self.owner_pid}.stderr.log"]
        if self.socket_path:
            extra += daemon_leftovers(self.socket_path)
        return [directory / f"{self.pid}.json", *extra]


def reap_orphans(directory: Path) -> list[dict[str, Any]]:
    """Stop app-servers whose agent-link owner is gone; returns what was done per record.

    For each record: unreadable → deleted; owner alive → kept; server gone → files removed;
    server pid now runs something else (pid reuse) → record removed, nothing signalled;
    otherwise SIGTERM to its group, SIGKILL after :data:`REAP_GRACE_S`, files removed.
    """
    report: list[dict[str, Any]] = []
    if not directory.is_dir():
        return report
    for path in sorted(directory.glob("*.json")):
        try:
            rec = Record.parse(path.read_text())
        except (OSError, ValueError):
            _unlink([path])
            report.append({"record": path.name, "action": "deleted-invalid"})
            continue
        if pid_alive(rec.owner_pid, rec.owner_start):
            report.append({"record": path.name, "action": "kept-owner-alive"})
            continue
        if not pid_alive(rec.pid, rec.start):
            _unlink(rec.files(directory))
            report.append({"record": path.name, "action": "removed-dead"})
            continue
        command = process_command(rec.pid) or ""
        if not rec.listen or rec.listen not in command:
            _unlink([path])
            report.append({"record": path.name, "action": "removed-pid-reused"})
            continue
        _signal_group(rec.pgid, signal.SIGTERM)
        deadline = time.monotonic() + REAP_GRACE_S
        while time.monotonic() < deadline and pid_alive(rec.pid, rec.start):
            time.sleep(0.05)
        if pid_alive(rec.pid, rec.start):
            _signal_group(rec.pgid, signal.SIGKILL)
        _unlink(rec.files(directory))
        report.append({"record": path.name, "action": "stopped-orphan", "pid": rec.pid})
    return report


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


# the server ----------------------------------------------------------------------------------
@dataclass
class ManagedServer:
    """One private app-server owned by this process.

    :param directory: the managed dir.
    :param values: parsed settings (binary, transport, startup timeout).
    :param env: the environment to derive the child's from.
    """

    directory: Path
    values: Mapping[str, Any]
    env: Mapping[str, str]
    record: Record | None = None
    endpoint: Endpoint | None = None
    launcher: Launcher | None = None
    last_reap: list[dict[str, Any]] = field(default_factory=list)
    _proc: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        """Whether the server this object started is still alive."""
        return self.record is not None and pid_alive(self.record.pid, self.record.start)

    @staticmethod
    def cached_failure(directory: Path) -> tuple[str, str] | None:
        """``(reason, detail)`` of a start that failed less than a minute ago, else None."""
        entry = _FAILED_STARTS.get(str(directory))
        if entry is None or time.monotonic() - entry[0] > FAILURE_TTL_S:
            return None
        return entry[1], entry[2]

    async def start(self) -> Endpoint:
        """Start the server and wait until it accepts connections; returns its endpoint.

        :raises ManagedError: any reason of :class:`ManagedError`; every failure except
            ``startup-failure-cached`` is remembered for :data:`FAILURE_TTL_S` seconds.
        """
        cached = self.cached_failure(self.directory)
        if cached is not None:
            raise ManagedError("startup-failure-cached", f"{cached[0]}: {cached[1]}")
        try:
            return await self._start()
        except ManagedError as exc:
            _FAILED_STARTS[str(self.directory)] = (time.monotonic(), exc.reason, exc.detail)
            raise

    async def _start(self) -> Endpoint:
        if self.record is not None:  # an earlier server of ours died: clear what it left
            self.stop()
        check_private_dir(self.directory)
        self.last_reap = await asyncio.to_thread(reap_orphans, self.directory)
        self.launcher = find_codex(self.values, self.env)
        owner = os.getpid()
        transport = self.values.get("AGENT_LINK_CODEX_TRANSPORT") or "unix"
        token_file: Path | None = None
        sock: Path | None = None
        if transport == "ws-token":
            port = _free_port()
            token_file = self.directory / f"{owner}.token"
            _write_private(token_file, secrets.token_hex(32))
            listen = f"ws://127.0.0.1:{port}"
            extra = ["--ws-auth", "capability-token", "--ws-token-file", str(token_file)]
            endpoint = url_endpoint(listen + "/", "managed", str(token_file))
        else:
            sock = self.directory / f"{owner}.sock"
            _unlink([sock, *daemon_leftovers(str(sock))])
            listen = f"unix://{sock}"
            extra = []
            endpoint = socket_endpoint(str(sock), "managed")
        command = [*self.launcher.argv, "--listen", listen, *extra]
        child_env = {k: v for k, v in self.env.items() if k not in DROPPED_ENV}
        stderr_path = self.directory / f"{owner}.stderr.log"
        try:
            # 0600 like every other state file (the log can hold thread ids and paths); an
            # older, wider file is narrowed
            fd = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "ab") as stderr:
                self._proc = subprocess.Popen(
                    command, cwd=self.directory, env=child_env, stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True,
                )
        except OSError as exc:
            raise ManagedError("spawn-failed", f"{command[0]}: {exc.strerror or exc}") from exc
        pid = self._proc.pid
        self.record = Record(owner, process_start(owner), pid, pid, process_start(pid), transport, listen,
                             str(sock) if sock else None, str(token_file) if token_file else None, command, now_ms())
        _write_private(self.directory / f"{pid}.json", self.record.to_json())
        timeout_s = int(self.values.get("AGENT_LINK_CODEX_STARTUP_TIMEOUT_MS") or 15_000) / 1000
        deadline = time.monotonic() + timeout_s
        while True:
            if self._proc.poll() is not None:
                tail = _tail(stderr_path)
                self.stop()
                raise ManagedError("app-server-exited-during-startup", f"exit {self._proc.returncode}; {tail}")
            if await _ready(sock, listen):
                self.endpoint = endpoint
                return endpoint
            if time.monotonic() >= deadline:
                self.stop()
                raise ManagedError("readiness-timeout", f"not accepting connections within {int(timeout_s * 1000)} ms")
            await asyncio.sleep(READY_POLL_S)

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM the group, SIGKILL after ``grace_s`` seconds, remove the files. Idempotent."""
        rec = self.record
        if rec is None:
            return
        _signal_group(rec.pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and self._alive():
            time.sleep(0.02)
        _signal_group(rec.pgid, signal.SIGKILL)  # also takes stray group members (MCP servers)
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(5)
        _unlink(rec.files(self.directory))
        self.record = None
        self.endpoint = None

    def _alive(self) -> bool:
        if self._proc is not None:
            return self._proc.poll() is None
        return self.record is not None and pid_alive(self.record.pid, self.record.start)

    def view(self) -> dict[str, Any]:
        """Health view: pid, listen address, binary, when started (no token)."""
        rec = self.record
        return {
            "running": self.running,
            "pid": rec.pid if rec else None,
            "listen": rec.listen if rec else None,
            "transport": rec.transport if rec else self.values.get("AGENT_LINK_CODEX_TRANSPORT"),
            "startedAt": rec.started_at if rec else None,
            "binary": self.launcher.path if self.launcher else None,
            "binarySource": self.launcher.source if self.launcher else None,
            "directory": str(self.directory),
            "lastReap": self.last_reap,
        }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _ready(sock: Path | None, listen: str) -> bool:
    """One readiness probe: a connect to the socket's real path, or ``GET /readyz`` 2xx."""
    try:
        if sock is not None:
            real = os.path.realpath(sock)
            if not os.path.exists(real):
                return False
            _, writer = await asyncio.wait_for(asyncio.open_unix_connection(real), 1.0)
            writer.close()
            return True
        host, port = listen.removeprefix("ws://").split(":")
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 1.0)
        try:
            writer.write(f"GET /readyz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
            status = await asyncio.wait_for(reader.readline(), 1.0)
        finally:
            writer.close()
        parts = status.split()
        return len(parts) >= 2 and parts[1].startswith(b"2")
    except (OSError, TimeoutError, ValueError):
        return False


def _tail(path: Path, limit: int = 800) -> str:
    try:
        return path.read_bytes()[-limit:].decode(errors="replace").strip()
    except OSError:
        return ""
