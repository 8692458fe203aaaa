"""Run the pinned real Codex CLI app-server (from ``hosts/node_modules``) for real-host tests.

The host folder is the run's (:func:`agent_link_testing.hosts.hosts_dir`: ``hosts/``,
``hosts/previous/`` or ``make test-latest``'s scratch folder); ask
:func:`agent_link_testing.hosts.codex_version` for the version under test, never name one.

Facts used (docs/hosts/codex.md §1, §2, §4, §9):

- the npm package ``@openai/codex`` only holds a Node launcher; the native binary lives in the
  per-platform optional dependency, ``@openai/codex-<os>-<arch>/vendor/<target>/bin/codex``,
  next to a ``codex-package.json`` naming its version;
- ``codex app-server --listen unix://PATH`` binds the real socket under
  ``/tmp/codex-daemon-<uid>/`` and makes PATH a symlink to it; clients must connect to
  ``realpath(PATH)`` (PATH itself may exceed the AF_UNIX limit); SIGTERM removes both;
- a stub model provider needs ``model_providers.<name>`` with ``wire_api = "responses"`` and an
  ``env_key`` naming an environment variable holding any value.

Everything runs under a temporary HOME and CODEX_HOME, so the real ``~/.codex`` is never read or
written. A missing binary is an error telling to run ``make hosts`` (real-host tests must not
skip silently).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_link_testing.host_process import free_port, make_root, spawn, stop_group, wait_ready
from agent_link_testing.hosts import HostsMissing, codex_version
from agent_link_testing.hosts import hosts_dir as current_hosts_dir

__all__ = [
    "CodexAppServer",
    "CodexHostError",
    "McpServerConfig",
    "REPO_ROOT",
    "codex_binary",
    "pinned_codex_version",
    "write_codex_config",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
STUB_PROVIDER = "mock"
STUB_MODEL = "mock-model"
STUB_KEY_ENV = "MOCK_API_KEY"


def host_env(state_dir: Path) -> dict[str, str]:
    """What a test's app-server (and so its hooks) gets (``CodexAppServer(env=...)``): the test's state dir, and the
    venv's ``agent-link`` first on ``PATH``."""
    import sys

    return {"AGENT_LINK_STATE_DIR": str(state_dir), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


class CodexHostError(RuntimeError):
    """The real Codex host is missing, the wrong version, or failed to start."""


def pinned_codex_version(hosts_dir: Path | None = None) -> str:
    """The ``@openai/codex`` version pinned in the host folder's ``package-lock.json``.

    :raises CodexHostError: no lock file, or Codex is not in it.
    """
    try:
        return codex_version(hosts_dir)
    except HostsMissing as exc:
        raise CodexHostError(str(exc)) from None


def codex_binary(hosts_dir: Path | None = None) -> Path:
    """The pinned native ``codex`` binary under ``<host folder>/node_modules``.

    :raises CodexHostError: not installed, or installed at another version than pinned; the
        message says to run ``make hosts``.
    """
    hosts_dir = current_hosts_dir() if hosts_dir is None else hosts_dir
    want = pinned_codex_version(hosts_dir)
    found: list[str] = []
    for package in sorted((hosts_dir / "node_modules" / "@openai").glob("codex*/vendor/*/codex-package.json")):
        try:
            meta = json.loads(package.read_text())
        except (OSError, ValueError):
            continue
        binary = package.parent / meta.get("entrypoint", "bin/codex")
        found.append(f"{binary} ({meta.get('version')})")
        if meta.get("version") == want and binary.is_file() and os.access(binary, os.X_OK):
            return binary
    detail = f"; found {', '.join(found)}" if found else ""
    raise CodexHostError(
        f"the pinned Codex CLI {want} is not installed under {hosts_dir / 'node_modules'}{detail}. "
        "Run `make hosts` (npm ci in the host folders) to install it."
    )


@dataclass(frozen=True)
class McpServerConfig:
    """One ``[mcp_servers.<name>]`` entry of Codex's config.toml (stdio server).

    :param approval_mode: ``default_tools_approval_mode`` (``auto|prompt|writes|approve``);
        ``"approve"`` lets tools run under ``approval_policy = "never"``.
    """

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    approval_mode: str | None = "approve"
    startup_timeout_sec: float | None = None
    tool_timeout_sec: float | None = None


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def write_codex_config(
    codex_home: Path,
    base_url: str,
    *,
    mcp_servers: Mapping[str, McpServerConfig] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``<codex_home>/config.toml`` for a stub model at ``base_url``; returns its path.

    Top level: model ``mock-model`` from provider ``mock`` (key from ``MOCK_API_KEY``),
    ``approval_policy = "never"``, ``sandbox_mode = "read-only"``, ``[analytics] enabled =
    false``; ``extra`` adds further top-level keys (mappings become inline tables). Each ``mcp_servers`` entry becomes ``[mcp_servers.<name>]``.
    """
    codex_home.mkdir(parents=True, exist_ok=True)
    top: dict[str, Any] = {
        "model": STUB_MODEL,
        "model_provider": STUB_PROVIDER,
        "approval_policy": "never",
        "sandbox_mode": "read-only",
        **(extra or {}),
    }
    lines = [f"{k} = {_toml_value(v)}" for k, v in top.items()]
    # analytics off: no telemetry attempts from tests (the turn metadata header then says
    # analytics_enabled:false)
    if "analytics" not in top:
        lines += ["", "[analytics]", "enabled = false"]
    lines += [
        "",
        f"[model_providers.{STUB_PROVIDER}]",
        f'name = "{STUB_PROVIDER}"',
        f"base_url = {_toml_value(base_url)}",
        'wire_api = "responses"',
        f'env_key = "{STUB_KEY_ENV}"',
    ]
    for name, server in (mcp_servers or {}).items():
        lines += ["", f"[mcp_servers.{json.dumps(name)}]", f"command = {_toml_value(server.command)}"]
        lines.append(f"args = {_toml_value(list(server.args))}")
        if server.env:
            lines.append(f"env = {_toml_value(dict(server.env))}")
        if server.approval_mode is not None:
            lines.append(f"default_tools_approval_mode = {_toml_value(server.approval_mode)}")
        if server.startup_timeout_sec is not None:
            lines.append(f"startup_timeout_sec = {_toml_value(float(server.startup_timeout_sec))}")
        if server.tool_timeout_sec is not None:
            lines.append(f"tool_timeout_sec = {_toml_value(float(server.tool_timeout_sec))}")
    path = codex_home / "config.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


class CodexAppServer:
    """``codex app-server --listen unix://<path>`` against a stub model, as a context manager.

    On enter: creates a private root directory (``root`` or a fresh ``/tmp/codex-host-*``),
    writes ``<root>/codex-home/config.toml``, starts the binary in its own session/process group
    with ``HOME=<root>/home``, ``CODEX_HOME=<root>/codex-home``, ``MOCK_API_KEY`` set, cwd
    ``<root>/work``, ``--strict-config`` (unknown config keys are errors) and stdout/stderr
    captured to files, then waits (bounded by ``startup_timeout_s`` seconds) until
    ``realpath(socket_path)`` accepts a connection.
    On exit: SIGTERM to the group, SIGKILL after ``grace_s`` seconds, removes leftovers (socket,
    symlink, lock) and the root directory if it created it.

    ``transport="ws-token"`` listens on ``ws://127.0.0.1:<free port>`` instead, with
    ``--ws-auth capability-token --ws-token-file <root>/ws.token`` (a random hex token, 0600);
    readiness is ``GET /readyz`` answering 2xx; see :attr:`ws_url` and :attr:`ws_token`.

    :param base_url: the stub's ``base_url`` (:attr:`ResponsesStub.base_url`).
    :param mcp_servers: ``[mcp_servers.<name>]`` entries to add.
    :param config_extra: further top-level config.toml keys.
    :param root: directory for homes, logs and the socket (kept afterwards); default a fresh
        temporary directory removed on stop.
    :param socket_path: the ``--listen unix://`` path (default ``<root>/app-server.sock``; may be
        longer than the AF_UNIX limit, Codex only makes a symlink there).
    :param env: extra environment variables for the app-server.
    :param extra_args: extra ``codex app-server`` arguments.
    :raises CodexHostError: binary missing (run ``make hosts``), process exited early or not
        ready in time (message includes the stderr tail).
    """

    def __init__(
        self,
        base_url: str,
        *,
        mcp_servers: Mapping[str, McpServerConfig] | None = None,
        config_extra: Mapping[str, Any] | None = None,
        root: Path | None = None,
        socket_path: Path | None = None,
        env: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = (),
        startup_timeout_s: float = 15.0,
        grace_s: float = 3.0,
        transport: str = "unix",
        strict_config: bool = True,
    ) -> None:
        if transport not in ("unix", "ws-token"):
            raise ValueError(f"transport must be 'unix' or 'ws-token', not {transport!r}")
        self.base_url = base_url
        self.mcp_servers = dict(mcp_servers or {})
        self.config_extra = dict(config_extra or {})
        self._given_root = root
        self._given_socket = socket_path
        self.extra_env = dict(env or {})
        self.extra_args = list(extra_args)
        self.startup_timeout_s = startup_timeout_s
        self.grace_s = grace_s
        self.transport = transport
        self.strict_config = strict_config
        self.binary = codex_binary()
        self.ws_url: str | None = None
        self.ws_token: str | None = None
        self.root: Path | None = None
        self.socket_path: Path | None = None
        self.real_socket_path: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self._owns_root = False

    # paths ----------------------------------------------------------------------------------
    @property
    def codex_home(self) -> Path:
        """The temporary ``CODEX_HOME``."""
        assert self.root is not None
        return self.root / "codex-home"

    @property
    def home(self) -> Path:
        """The temporary ``HOME``."""
        assert self.root is not None
        return self.root / "home"

    @property
    def workdir(self) -> Path:
        """The app-server's cwd (threads default to it)."""
        assert self.root is not None
        return self.root / "work"

    @property
    def pid(self) -> int:
        """Process id (also the process-group id)."""
        assert self.process is not None
        return self.process.pid

    def stderr_text(self) -> str:
        """Everything the app-server wrote to stderr so far."""
        if self.root is None:
            return ""
        try:
            return (self.root / "app-server.stderr").read_text(errors="replace")
        except OSError:
            return ""

    # lifecycle ------------------------------------------------------------------------------
    def start(self) -> CodexAppServer:
        """Write the config, spawn, and wait until the socket accepts connections."""
        self.root, self._owns_root = make_root(self._given_root, "codex-host-")
        for d in (self.home, self.codex_home, self.workdir):
            d.mkdir(parents=True, exist_ok=True)
        write_codex_config(self.codex_home, self.base_url, mcp_servers=self.mcp_servers, extra=self.config_extra)
        self.socket_path = self._given_socket or self.root / "app-server.sock"
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("CODEX_", "OPENAI_", "AGENT_LINK_", "CLAUDE_", "ANTHROPIC_"))
        }
        env.update(
            HOME=str(self.home),
            CODEX_HOME=str(self.codex_home),
            **{STUB_KEY_ENV: "stub-key"},
            **self.extra_env,
        )
        cmd = [str(self.binary), "app-server"]
        if self.strict_config:
            cmd.append("--strict-config")
        if self.transport == "ws-token":
            port = free_port()
            token_file = self.root / "ws.token"
            self.ws_token = secrets.token_hex(32)
            token_file.write_text(self.ws_token)
            token_file.chmod(0o600)
            self.ws_url = f"ws://127.0.0.1:{port}/"
            cmd += ["--listen", f"ws://127.0.0.1:{port}", "--ws-auth", "capability-token", "--ws-token-file", str(token_file)]
        else:
            cmd += ["--listen", f"unix://{self.socket_path}"]
        cmd += self.extra_args
        self.process = spawn(cmd, cwd=self.workdir, env=env, stdout=self.root / "app-server.stdout",
                             stderr=self.root / "app-server.stderr")
        try:
            wait_ready(self.process, self._ready, timeout_s=self.startup_timeout_s, poll_s=0.02,
                       failed=lambda why: CodexHostError(
                           f"codex app-server {why} (accepting on {self.ws_url or self.socket_path}); "
                           f"stderr: {self.stderr_text()[-2000:]}"))
        except BaseException:
            self.stop()
            raise
        return self

    def _ready(self) -> bool:
        assert self.socket_path is not None
        if self.ws_url is not None:
            ready_url = self.ws_url.replace("ws://", "http://", 1) + "readyz"
            try:
                no_proxy = urllib.request.build_opener(urllib.request.ProxyHandler({}))
                with no_proxy.open(ready_url, timeout=1) as answer:
                    return 200 <= answer.status < 300
            except (OSError, urllib.error.URLError):
                return False
        real = os.path.realpath(self.socket_path)
        if os.path.islink(self.socket_path) or os.path.exists(real):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                probe.settimeout(1.0)
                try:
                    probe.connect(real)
                except OSError:
                    return False
                self.real_socket_path = Path(real)
                return True
        return False

    def kill(self) -> None:
        """SIGKILL the whole process group now (simulates a crash); leftovers stay until stop()."""
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait(10)

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL after the grace period, remove leftovers."""
        stop_group(self.process, self.grace_s)
        # SIGTERM makes Codex remove its socket, symlink and lock; after SIGKILL they remain
        leftovers = [self.real_socket_path, self.socket_path]
        if self.real_socket_path is not None:
            leftovers.append(self.real_socket_path.with_name(self.real_socket_path.name + ".lock"))
        for leftover in leftovers:
            if leftover is not None:
                try:
                    if leftover.is_symlink() or leftover.is_socket() or leftover.suffix == ".lock":
                        leftover.unlink()
                except OSError:
                    pass
        if self._owns_root and self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> CodexAppServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
