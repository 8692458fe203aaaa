"""Run the pinned, real opencode server (``opencode serve``) hermetically for tests.

Everything opencode reads or writes goes into a private root directory (``HOME`` and the four
``XDG_*`` folders); the model is a :class:`~agent_link_testing.messages_stub.MessagesStub` on
127.0.0.1, reached through a provider built on the ``@ai-sdk/anthropic`` adapter with
``options.baseURL`` pointed at the stub. Typical use::

    with MessagesStub(["hello"]) as stub, OpencodeServer(stub.base_url) as server:
        session = server.request("POST", "/session", {"title": "t"})
        server.request("POST", f"/session/{session['id']}/prompt_async",
                       {"parts": [{"type": "text", "text": "hi"}]})

The binary comes from the host folder of the run (:func:`agent_link_testing.hosts.hosts_dir`:
``hosts/``, ``hosts/previous/`` or ``make test-latest``'s scratch folder). Ask
:func:`agent_link_testing.hosts.opencode_version` for the version under test; never name one.

Facts this module relies on (checked on opencode 1.18.33 by
``plugins/opencode/tests/test_opencode_realhost_smoke.py``):

* The npm package ``opencode-ai`` holds a launcher and a postinstall script that links the
  native program of the platform package (``opencode-linux-x64`` etc.) to
  ``opencode-ai/bin/opencode.exe``; ``node_modules/.bin/opencode`` points there.
* ``@ai-sdk/anthropic`` is bundled in the program: a provider naming it as ``npm`` works with
  nothing installed at run time. :class:`OpencodeServer` sends all outbound HTTP(S) through the
  stub (``HTTPS_PROXY``), whose ``CONNECT`` handler records and refuses every tunnel, so an
  attempt to download anything shows in ``stub.requests_of("connect")`` instead of leaving the
  machine. The one attempt seen is a background ``npm install`` of ``@opencode-ai/plugin`` into
  the config folder (``$XDG_CONFIG_HOME/opencode``, for plugins kept there); its failure is
  only logged, and ``OPENCODE_PURE=1`` does not stop it.
* ``opencode serve --port 0`` takes 4096 (opencode's default, where a person's own server
  listens and where the ``opencode`` harness looks by default) when it is free, so the launcher
  passes a free port of its own. It prints ``opencode server listening on
  http://127.0.0.1:<port>`` on stdout; it is ready when
  ``GET /global/health`` answers 200 (about 12 s on a loaded 2-core machine).
* ``OPENCODE_SERVER_PASSWORD`` turns on HTTP basic auth (user ``opencode``).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

from agent_link_testing.host_process import free_port, make_root, spawn, stop_group, wait_ready
from agent_link_testing.hosts import OPENCODE_PACKAGE, HostsMissing, hosts_dir, opencode_version

__all__ = [
    "STUB_MODEL",
    "STUB_PROVIDER",
    "OpencodeHostError",
    "OpencodeServer",
    "opencode_binary",
    "opencode_config",
]

#: The provider id and model id of the stub model in the written config.
STUB_PROVIDER = "stub"
STUB_MODEL = "stub-model"
#: The basic-auth user name opencode expects with ``OPENCODE_SERVER_PASSWORD``.
SERVER_USER = "opencode"

_LISTENING = re.compile(rb"listening on (http://[0-9.]+:\d+)")

# The switches that keep opencode from reaching out or reading the user's other tools' files.
_QUIET_ENV = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
}


class OpencodeHostError(RuntimeError):
    """The opencode server exited early, did not get ready in time, or an API call failed."""


def opencode_binary(root: Path | None = None) -> Path:
    """The opencode program of the host folder (``<root>/node_modules/.bin/opencode``).

    :param root: host folder; default :func:`agent_link_testing.hosts.hosts_dir`.
    :raises HostsMissing: opencode is not pinned in the folder's lock file or not installed.
    """
    root = hosts_dir() if root is None else root
    opencode_version(root)  # raises HostsMissing when the lock file does not pin it
    binary = root / "node_modules" / ".bin" / "opencode"
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        raise HostsMissing(f"{OPENCODE_PACKAGE} is not installed at {binary}; run `make hosts`")
    return binary


def opencode_config(base_url: str, *, mcp: Mapping[str, Any] | None = None, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``opencode.json`` for a run against a stub Anthropic Messages API.

    :param base_url: the stub's root URL (``http://127.0.0.1:PORT``, no ``/v1``).
    :param mcp: the config's ``mcp`` table (name -> ``{"type": "local", "command": [...], ...}``).
    :param extra: further top-level keys, replacing the defaults of the same name.
    :returns: a JSON-able dict with one provider ``stub`` whose model ``stub-model`` is both the
        main and the small model, autoupdate and sharing off.
    """
    config: dict[str, Any] = {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "provider": {
            STUB_PROVIDER: {
                "npm": "@ai-sdk/anthropic",
                "name": "Stub",
                "options": {"baseURL": base_url.rstrip("/") + "/v1", "apiKey": "stub-key"},
                "models": {STUB_MODEL: {"name": STUB_MODEL, "tool_call": True}},
            }
        },
        "model": f"{STUB_PROVIDER}/{STUB_MODEL}",
        "small_model": f"{STUB_PROVIDER}/{STUB_MODEL}",
    }
    if mcp:
        config["mcp"] = dict(mcp)
    config.update(extra or {})
    return config


class OpencodeServer:
    """``opencode serve`` on 127.0.0.1 against a stub model, as a context manager.

    On enter: creates a private root directory (``root`` or a fresh ``/tmp/opencode-host-*``),
    writes ``<root>/opencode.json`` (:func:`opencode_config`, named by ``OPENCODE_CONFIG``),
    starts the program in its own process group with ``HOME=<root>/home``, the ``XDG_*``
    folders under ``<root>/xdg``, cwd ``<root>/work`` (the sessions' directory), outbound HTTP(S)
    as ``outbound`` says, and stdout/stderr captured to files; then waits (bounded by
    ``startup_timeout_s`` seconds) for the listening line and ``GET /global/health`` = 200.
    On exit: SIGTERM to the group, SIGKILL after ``grace_s`` seconds, and removes the root
    directory if it created it.

    :param base_url: the stub's ``base_url`` (:attr:`MessagesStub.base_url`).
    :param mcp: the config's ``mcp`` table.
    :param config_extra: further top-level config keys.
    :param password: sets ``OPENCODE_SERVER_PASSWORD`` (basic auth; :meth:`request` sends it).
    :param outbound: ``"blackhole"`` (default) sends everything opencode sends off 127.0.0.1
        through the stub as ``HTTP(S)_PROXY``, which records and refuses it (the stub must be a
        :class:`MessagesStub`); ``"direct"`` leaves the network open.
    :param root: directory for homes, config and logs (kept afterwards); default a fresh
        temporary directory removed on stop.
    :param env: extra environment variables.
    :param extra_args: extra ``opencode serve`` arguments.
    :raises HostsMissing: opencode is not installed (run ``make hosts``).
    :raises OpencodeHostError: the process exited early or was not ready in time (the message
        carries the log tail).
    """

    def __init__(
        self,
        base_url: str,
        *,
        mcp: Mapping[str, Any] | None = None,
        config_extra: Mapping[str, Any] | None = None,
        password: str | None = None,
        outbound: Literal["blackhole", "direct"] = "blackhole",
        root: Path | None = None,
        env: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = (),
        startup_timeout_s: float = 60.0,
        grace_s: float = 3.0,
    ) -> None:
        self.base_url = base_url
        self.mcp = dict(mcp or {})
        self.config_extra = dict(config_extra or {})
        self.password = password
        if outbound not in ("blackhole", "direct"):
            raise ValueError(f"outbound must be 'blackhole' or 'direct', not {outbound!r}")
        self.outbound = outbound
        self.extra_env = dict(env or {})
        self.extra_args = list(extra_args)
        self.startup_timeout_s = startup_timeout_s
        self.grace_s = grace_s
        self.binary = opencode_binary()
        self._given_root = root
        self.root: Path | None = None
        self.url: str | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self._owns_root = False

    # paths ----------------------------------------------------------------------------------
    @property
    def home(self) -> Path:
        """The temporary ``HOME``."""
        assert self.root is not None
        return self.root / "home"

    @property
    def workdir(self) -> Path:
        """The server's cwd: the directory new sessions belong to."""
        assert self.root is not None
        return self.root / "work"

    @property
    def config_path(self) -> Path:
        """The written ``opencode.json``."""
        assert self.root is not None
        return self.root / "opencode.json"

    @property
    def pid(self) -> int:
        """Process id (also the process-group id)."""
        assert self.process is not None
        return self.process.pid

    def log_text(self) -> str:
        """Everything the server wrote to stdout and stderr so far."""
        if self.root is None:
            return ""
        parts = []
        for name in ("serve.stdout", "serve.stderr"):
            try:
                parts.append((self.root / name).read_text(errors="replace"))
            except OSError:
                pass
        return "".join(parts)

    # HTTP -----------------------------------------------------------------------------------
    def request(self, method: str, path: str, body: Any = None, *, timeout_s: float = 30.0, auth: bool = True) -> Any:
        """One call to the server's HTTP API, bypassing any proxy.

        :param method: ``"GET"``, ``"POST"``, ...
        :param path: ``/session`` etc. (query string allowed).
        :param body: JSON-able request body, or ``None`` for none.
        :param timeout_s: socket timeout in seconds.
        :param auth: send the basic-auth header when a password is set.
        :returns: the decoded JSON answer, or ``None`` for an empty one (e.g. 204).
        :raises OpencodeHostError: the server is not running or answered non-2xx (the message
            carries status and body).
        """
        if self.url is None:
            raise OpencodeHostError("the opencode server is not running")
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if auth and self.password is not None:
            token = base64.b64encode(f"{SERVER_USER}:{self.password}".encode()).decode()
            req.add_header("Authorization", f"Basic {token}")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(req, timeout=timeout_s) as answer:
                raw = answer.read()
        except urllib.error.HTTPError as exc:
            raise OpencodeHostError(f"{method} {path}: HTTP {exc.code}: {exc.read()[:500]!r}") from None
        except OSError as exc:
            raise OpencodeHostError(f"{method} {path}: {exc}") from None
        return json.loads(raw) if raw.strip() else None

    def session_messages(self, session_id: str) -> list[dict[str, Any]]:
        """``GET /session/{id}/message``: the session's messages, oldest first, each
        ``{"info": {"id", "role", "time", ...}, "parts": [{"type": "text", "text", ...}, ...]}``.

        :raises OpencodeHostError: as :meth:`request`.
        """
        return list(self.request("GET", f"/session/{session_id}/message") or [])

    def wait_for_reply(self, session_id: str, timeout_s: float = 30.0) -> list[dict[str, Any]]:
        """Poll (every 0.1 s, up to ``timeout_s`` seconds) until the session's last message is a
        completed assistant message that follows a user message, and the session is not busy.

        :returns: the session's messages at that point.
        :raises OpencodeHostError: not so within ``timeout_s`` (the message carries the roles seen).
        """
        deadline = time.monotonic() + timeout_s
        while True:
            messages = self.session_messages(session_id)
            roles = [m.get("info", {}).get("role") for m in messages]
            last = messages[-1].get("info", {}) if messages else {}
            done = "user" in roles and last.get("role") == "assistant" and "completed" in (last.get("time") or {})
            if done and (self.request("GET", "/session/status") or {}).get(session_id, {}).get("type", "idle") == "idle":
                return messages
            if time.monotonic() >= deadline:
                raise OpencodeHostError(f"session {session_id} has no completed reply within {timeout_s}s (roles {roles})")
            time.sleep(0.1)

    # lifecycle ------------------------------------------------------------------------------
    def start(self) -> OpencodeServer:
        """Write the config, spawn, and wait until the health endpoint answers 200."""
        self.root, self._owns_root = make_root(self._given_root, "opencode-host-")
        xdg = {name: self.root / "xdg" / name.split("_")[1].lower() for name in
               ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME")}
        for d in (self.home, self.workdir, *xdg.values()):
            d.mkdir(parents=True, exist_ok=True)
        config = opencode_config(self.base_url, mcp=self.mcp, extra=self.config_extra)
        self.config_path.write_text(json.dumps(config, indent=2) + "\n")
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("OPENCODE", "AGENT_LINK_", "CLAUDE_", "ANTHROPIC_", "OPENAI_", "CODEX_", "XDG_"))
            and k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
        }
        env.update({k: str(v) for k, v in xdg.items()})
        env.update(_QUIET_ENV, HOME=str(self.home), OPENCODE_CONFIG=str(self.config_path), NO_PROXY="127.0.0.1,localhost")
        if self.outbound == "blackhole":
            env.update(HTTP_PROXY=self.base_url, HTTPS_PROXY=self.base_url)
        if self.password is not None:
            env["OPENCODE_SERVER_PASSWORD"] = self.password
        env.update(self.extra_env)
        cmd = [str(self.binary), "serve", "--hostname", "127.0.0.1", "--port", str(free_port()), *self.extra_args]
        self.process = spawn(cmd, cwd=self.workdir, env=env, stdout=self.root / "serve.stdout", stderr=self.root / "serve.stderr")
        try:
            wait_ready(self.process, self._ready, timeout_s=self.startup_timeout_s, poll_s=0.1,
                       failed=lambda why: OpencodeHostError(f"opencode serve {why} (GET /global/health); log: {self.log_text()[-2000:]}"))
        except BaseException:
            self.stop()
            raise
        return self

    def _ready(self) -> bool:
        assert self.root is not None
        if self.url is None:
            try:
                found = _LISTENING.search((self.root / "serve.stdout").read_bytes())
            except OSError:
                return False
            if found is None:
                return False
            self.url = found.group(1).decode()
        try:
            self.request("GET", "/global/health", timeout_s=2.0)
        except OpencodeHostError:
            return False
        return True

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL after the grace period, remove the root it made."""
        stop_group(self.process, self.grace_s)
        self.url = None
        if self._owns_root and self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> OpencodeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
