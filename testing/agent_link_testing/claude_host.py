"""Run the pinned, real Claude Code CLI (hosts/node_modules) hermetically for tests.

Everything Claude Code reads or writes goes into a temporary HOME built by
:meth:`ClaudeHost.create`; the model is a :class:`~agent_link_testing.messages_stub.MessagesStub`
on 127.0.0.1. Typical use::

    with MessagesStub(["hello"]) as stub:
        host = ClaudeHost.create(tmp_path / "home", stub=stub)
        done = host.run_p("hi", cwd=project_dir)          # CompletedProcess, --output-format json
        session = host.session_of(done, cwd=project_dir)  # id + transcript path

The binary comes from the host folder of the run (:func:`agent_link_testing.hosts.hosts_dir`:
``hosts/``, ``hosts/previous/`` or ``make test-latest``'s scratch folder), and every claude
process gets the registry Node >= 22 first on ``PATH`` (:func:`agent_link_testing.hosts.with_host_node`).
Ask :func:`agent_link_testing.hosts.claude_version` for the version under test; never name one.

Facts this module relies on (verified on Claude Code 2.1.197 and 2.1.332 by
``plugins/claude/tests/test_claude_realhost_smoke.py``; docs/claude-code-hosts.md and
docs/hosts/claude-code.md):

* ``claude -p`` needs no login, onboarding or trust dialog; ``ANTHROPIC_BASE_URL`` +
  ``ANTHROPIC_API_KEY`` suffice.
* With ``CLAUDE_CONFIG_DIR`` set, the *global config file* is ``$CLAUDE_CONFIG_DIR/.claude.json``,
  not ``~/.claude.json``. :attr:`ClaudeHost.global_config_path` always names the file the CLI
  really uses, because we always set ``CLAUDE_CONFIG_DIR``.
* Outbound traffic: ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`` gives 0 connections but turns
  channels off. ``outbound="blackhole"`` instead points ``HTTPS_PROXY``/``HTTP_PROXY`` at the
  stub, whose ``CONNECT`` handler records and refuses every tunnel (``NO_PROXY`` keeps
  127.0.0.1 direct): nothing leaves the machine, cached feature flags are not overwritten, and
  tests can see the attempts in ``stub.requests_of("connect")``.
* Without ``ANTHROPIC_BASE_URL``, 2.1.332's ``claude plugin marketplace add`` / ``install`` look
  up the default API host and retry its DNS for about 18 s each on a machine without network;
  :meth:`ClaudeHost.run_cli` therefore points a host that has no stub at a short-lived one.
* Running as root: ``--dangerously-skip-permissions`` exits 1 ("cannot be used with root/sudo
  privileges") unless ``IS_SANDBOX=1`` (verified; pass ``env_extra={"IS_SANDBOX": "1"}`` if a
  test really needs it). Prefer approving tools with :meth:`ClaudeHost.allow_tools` (settings
  ``permissions.allow``) or ``--allowedTools``; both verified as root.
* MCP servers connect non-blocking in ``-p``; we set ``MCP_CONNECTION_NONBLOCKING=0`` and
  :func:`mcp_stdio_server` adds ``"alwaysLoad": true`` so tools are in the first request.
"""

from __future__ import annotations

import json
import os
import platform
import pwd
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping, Sequence

from agent_link_testing.claude_process import ClaudeStream, ClaudeTimeout, run_group
from agent_link_testing.hosts import CLAUDE_PACKAGE, HostsMissing, claude_version, with_host_node
from agent_link_testing.hosts import hosts_dir as current_hosts_dir
from agent_link_testing.messages_stub import MessagesStub

__all__ = [
    "CLAUDE_PLUGIN_DIR",
    "CLAUDE_PLUGIN_FILES",
    "STAGED_MARKETPLACE",
    "ClaudeHost",
    "ClaudeHostMissing",
    "ClaudeSession",
    "ClaudeStream",
    "ClaudeTimeout",
    "agent_link_bin",
    "encode_project_dir",
    "find_claude_binary",
    "mcp_stdio_server",
    "mcp_tool_name",
    "pinned_claude_version",
    "python_command",
    "run_claude_p",
    "session_of",
    "stage_plugin",
    "write_mcp_config",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
_PKG = CLAUDE_PACKAGE
_STRIP_PREFIXES = ("CLAUDE", "ANTHROPIC")  # CLAUDE covers CLAUDECODE / CLAUDE_CODE_* / CLAUDE_CONFIG_DIR
_STRIP_NAMES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "all_proxy", "no_proxy")


class ClaudeHostMissing(RuntimeError):
    """The pinned Claude Code binary is not installed (or is the wrong version): run ``make hosts``."""


# -- locating the binary ----------------------------------------------------------------------
def pinned_claude_version(hosts_dir: Path | None = None) -> str:
    """The Claude Code version pinned in the host folder's ``package-lock.json``
    (default :func:`agent_link_testing.hosts.hosts_dir`).

    Raises:
        ClaudeHostMissing: no lock file, or Claude Code is not in it.
    """
    try:
        return claude_version(hosts_dir)
    except HostsMissing as exc:
        raise ClaudeHostMissing(str(exc)) from None


def _platform_package() -> str | None:
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(machine)
    system = {"linux": "linux", "darwin": "darwin"}.get(sys.platform)
    if not arch or not system:
        return None
    musl = system == "linux" and not platform.libc_ver()[0]
    return f"{_PKG}-{system}-{arch}{'-musl' if musl else ''}"


def find_claude_binary(hosts_dir: Path | None = None) -> Path:
    """Path of the pinned native ``claude`` executable under ``<host folder>/node_modules``
    (default folder: :func:`agent_link_testing.hosts.hosts_dir`).

    Prefers ``@anthropic-ai/claude-code/bin/claude.exe`` (where npm's postinstall copies the
    native binary), then the platform package's ``claude``. Checks the installed package
    version against ``hosts/package-lock.json``.

    Raises:
        ClaudeHostMissing: not installed, postinstall did not run and no platform binary
            exists, or the installed version differs from the pin. The message says to run
            ``make hosts``. Real-host tests must let this fail, never skip.
    """
    hosts_dir = current_hosts_dir() if hosts_dir is None else hosts_dir
    want = pinned_claude_version(hosts_dir)
    pkg_dir = hosts_dir / "node_modules" / _PKG
    hint = f"run `make hosts` in {REPO_ROOT} to install the pinned Claude Code CLI {want} from {hosts_dir / 'package-lock.json'}"
    try:
        have = json.loads((pkg_dir / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError) as exc:
        raise ClaudeHostMissing(f"Claude Code is not installed at {pkg_dir} ({exc}); {hint}") from None
    if have != want:
        raise ClaudeHostMissing(f"Claude Code {have} is installed at {pkg_dir} but {want} is pinned; {hint}")
    candidates = [pkg_dir / "bin" / "claude.exe"]
    plat = _platform_package()
    if plat:
        candidates.append(hosts_dir / "node_modules" / plat / "claude")
    for path in candidates:
        # before postinstall, bin/claude.exe is a small placeholder; the native binary is ~245 MB
        if path.is_file() and os.access(path, os.X_OK) and path.stat().st_size > 1_000_000:
            return path
    raise ClaudeHostMissing(f"no native Claude Code binary among {[str(c) for c in candidates]}; {hint}")


# -- small config helpers ---------------------------------------------------------------------
def python_command(script: os.PathLike[str] | str, *args: str) -> str:
    """A shell command line running ``script`` with this interpreter (hooks run through a shell)."""
    return shlex.join([sys.executable, os.fspath(script), *args])


def mcp_tool_name(server: str, tool: str) -> str:
    """The name Claude Code gives an MCP tool: ``mcp__<server>__<tool>``, ``[^a-zA-Z0-9_-]`` → ``_``."""
    norm = lambda s: re.sub(r"[^a-zA-Z0-9_-]", "_", s)  # noqa: E731
    return f"mcp__{norm(server)}__{norm(tool)}"


def mcp_stdio_server(
    command: str,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    *,
    always_load: bool = True,
) -> dict[str, Any]:
    """One ``mcpServers`` entry for a stdio server.

    ``always_load=True`` adds ``"alwaysLoad": true`` so ``-p`` waits for the server before the
    first model request (otherwise a slow server's tools may be missing from it).
    """
    entry: dict[str, Any] = {"type": "stdio", "command": command, "args": list(args)}
    if env:
        entry["env"] = dict(env)
    if always_load:
        entry["alwaysLoad"] = True
    return entry


def write_mcp_config(path: os.PathLike[str] | str, servers: Mapping[str, Mapping[str, Any]]) -> Path:
    """Write ``{"mcpServers": servers}`` to ``path`` (a ``--mcp-config`` file or a project
    ``.mcp.json``, which ``-p`` loads without approval); returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"mcpServers": {k: dict(v) for k, v in servers.items()}}, indent=2))
    return out


def _java_hash(text: str) -> int:
    data = text.encode("utf-16-le")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] | data[i + 1] << 8)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def encode_project_dir(cwd: os.PathLike[str] | str) -> str:
    """The ``projects/<name>`` directory name Claude Code uses for ``cwd``.

    ``realpath(cwd)`` with every char outside ``[a-zA-Z0-9]`` replaced by ``-``; if longer than
    200 chars, cut to 200 and append ``-<base36(abs(java_hash(realpath)))>``.
    """
    real = os.path.realpath(os.fspath(cwd))
    name = re.sub(r"[^a-zA-Z0-9]", "-", real)
    if len(name) > 200:
        name = f"{name[:200]}-{_base36(abs(_java_hash(real)))}"
    return name


#: The agent-link Claude Code plugin folder in this checkout (the claude plugin's package data).
CLAUDE_PLUGIN_DIR = REPO_ROOT / "plugins" / "claude" / "agent_link_claude" / "host_plugin"
#: What the plugin folder holds, relative to it: the manifest, the hooks declaration and the
#: launcher that both the MCP server and the hooks run. Nothing else is read from
#: ``CLAUDE_PLUGIN_ROOT``; the launcher finds agent-link itself through ``AGENT_LINK_BIN`` (or
#: the path ``agent-link install`` writes into it, or ``PATH``).
CLAUDE_PLUGIN_FILES = (
    ".claude-plugin/plugin.json",
    "hooks/hooks.json",
    "hooks/agent-link.sh",
)
#: The marketplace manifest :func:`stage_plugin` adds (the plugin is the marketplace's root).
STAGED_MARKETPLACE = ".claude-plugin/marketplace.json"


def stage_plugin(dest: os.PathLike[str] | str, source: os.PathLike[str] | str = CLAUDE_PLUGIN_DIR,
                 files: Sequence[str] = CLAUDE_PLUGIN_FILES) -> Path:
    """Copy the plugin's ``files`` from ``source`` into ``dest`` (modes kept) and add a
    marketplace manifest listing it (``agent-link@agent-link``, source ``./``); returns
    ``dest``, a directory marketplace to install from.

    Claude processes that run the staged plugin need ``AGENT_LINK_BIN`` (see
    :func:`agent_link_bin`) or agent-link on PATH, since the copy's launcher names no executable.
    """
    out = Path(dest)
    for rel in files:
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(Path(source) / rel, target)
    market = {"name": "agent-link", "owner": {"name": "agent-link"},
              "plugins": [{"name": "agent-link", "source": "./", "description": "agent-link (staged for tests)"}]}
    (out / STAGED_MARKETPLACE).write_text(json.dumps(market, indent=2) + "\n")
    return out


def agent_link_bin() -> Path:
    """The ``agent-link`` executable of the interpreter running the tests (the venv's)."""
    return Path(sys.executable).with_name("agent-link")


# -- the host ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ClaudeSession:
    """Identity of one ``claude -p`` run.

    ``session_id`` is the session uuid; ``transcript_path`` is
    ``<config_dir>/projects/<encoded cwd>/<session_id>.jsonl`` (it may not exist if the run
    failed before the first prompt); ``result`` is the parsed ``--output-format json`` object
    (or the stream-json ``result`` line), ``None`` if stdout had none.
    """

    session_id: str
    transcript_path: Path
    result: dict[str, Any] | None = None

    def transcript(self) -> list[dict[str, Any]]:
        """The transcript's JSON lines (``[]`` if the file does not exist)."""
        if not self.transcript_path.exists():
            return []
        return [json.loads(line) for line in self.transcript_path.read_text().splitlines() if line.strip()]


@dataclass
class ClaudeHost:
    """A hermetic Claude Code installation: binary + temporary HOME + environment.

    Build with :meth:`create`. Attributes: ``binary`` (Path), ``home`` (the HOME given to
    claude), ``config_dir`` (``home/.claude``, exported as ``CLAUDE_CONFIG_DIR``), ``base_url``
    (stub URL or ``None``), ``api_key``, ``outbound`` (``"disable"`` or ``"blackhole"``, see the
    module docstring), ``env`` (extra variables for every run; a ``None`` value unsets one).
    """

    binary: Path
    home: Path
    config_dir: Path
    base_url: str | None = None
    api_key: str = "dummy"
    outbound: Literal["disable", "blackhole"] = "disable"
    env: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def create(
        cls,
        home: os.PathLike[str] | str,
        *,
        stub: Any = None,
        base_url: str | None = None,
        api_key: str = "dummy",
        outbound: Literal["disable", "blackhole"] = "disable",
        trusted_dirs: Iterable[os.PathLike[str] | str] = (),
        env: Mapping[str, str | None] | None = None,
        binary: Path | None = None,
    ) -> "ClaudeHost":
        """Create (or reuse) ``home`` as a temporary HOME for Claude Code and return the host.

        Writes ``<home>/.claude/.claude.json`` with ``hasCompletedOnboarding``, the API key
        approved, and ``hasTrustDialogAccepted`` for each of ``trusted_dirs`` (not needed by
        ``-p``, but by interactive runs). ``stub`` (a started ``MessagesStub``) supplies
        ``base_url``. ``outbound="blackhole"`` needs a stub (it is the proxy).

        Raises:
            ClaudeHostMissing: the pinned binary is not installed (``make hosts``).
            ValueError: ``home`` is the real user's home directory, or blackhole without a stub.
        """
        binary = binary or find_claude_binary()
        home_path = Path(home).resolve()
        real_home = Path(pwd.getpwuid(os.getuid()).pw_dir).resolve()
        if home_path == real_home:
            raise ValueError(f"refusing to use the real home directory {real_home} as a test HOME")
        if stub is not None:
            base_url = stub.base_url
        if outbound == "blackhole" and not base_url:
            raise ValueError('outbound="blackhole" needs a stub/base_url to act as the proxy')
        host = cls(
            binary=binary,
            home=home_path,
            config_dir=home_path / ".claude",
            base_url=base_url,
            api_key=api_key,
            outbound=outbound,
            env=dict(env or {}),
        )
        host.config_dir.mkdir(parents=True, exist_ok=True)
        host.update_global_config(
            {
                "hasCompletedOnboarding": True,
                "customApiKeyResponses": {"approved": [api_key[-20:]], "rejected": []},
            }
        )
        for d in trusted_dirs:
            host.trust_dir(d)
        return host

    # -- paths ------------------------------------------------------------------------------
    @property
    def global_config_path(self) -> Path:
        """``$CLAUDE_CONFIG_DIR/.claude.json`` -- the global config the CLI reads in our setup."""
        return self.config_dir / ".claude.json"

    @property
    def settings_path(self) -> Path:
        """User settings file ``$CLAUDE_CONFIG_DIR/settings.json`` (hooks, permissions, env)."""
        return self.config_dir / "settings.json"

    @property
    def sessions_dir(self) -> Path:
        """Live-session files ``<pid>.json`` (exist only while a claude process runs)."""
        return self.config_dir / "sessions"

    def transcript_dir(self, cwd: os.PathLike[str] | str) -> Path:
        """``$CLAUDE_CONFIG_DIR/projects/<encoded cwd>`` where sessions run in ``cwd`` are stored."""
        return self.config_dir / "projects" / encode_project_dir(cwd)

    # -- config editing ---------------------------------------------------------------------
    @staticmethod
    def _merge_json(path: Path, patch: Mapping[str, Any]) -> dict[str, Any]:
        data = json.loads(path.read_text()) if path.exists() else {}
        data.update(patch)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2))
        return data

    def update_global_config(self, patch: Mapping[str, Any]) -> dict[str, Any]:
        """Shallow-merge ``patch`` into :attr:`global_config_path`; returns the new content.

        E.g. ``{"cachedGrowthBookFeatures": {"tengu_harbor": True}}`` for channel tests
        (use ``outbound="blackhole"``: the disable variable turns channels off).
        """
        return self._merge_json(self.global_config_path, patch)

    def trust_dir(self, path: os.PathLike[str] | str) -> None:
        """Mark ``path`` (resolved) as trusted in the global config (interactive runs ask otherwise)."""
        data = json.loads(self.global_config_path.read_text()) if self.global_config_path.exists() else {}
        projects = data.setdefault("projects", {})
        projects.setdefault(os.path.realpath(os.fspath(path)), {})["hasTrustDialogAccepted"] = True
        self.global_config_path.write_text(json.dumps(data, indent=2))

    def update_settings(self, patch: Mapping[str, Any]) -> dict[str, Any]:
        """Shallow-merge ``patch`` into the user :attr:`settings_path`; returns the new content."""
        return self._merge_json(self.settings_path, patch)

    def add_hook(
        self,
        event: str,
        command: str,
        *,
        matcher: str | None = None,
        timeout_s: float | None = None,
    ) -> None:
        """Append a ``type:"command"`` hook for ``event`` (e.g. ``"UserPromptSubmit"``) to settings.

        ``command`` runs through a shell (see :func:`python_command`); ``matcher`` is for tool
        events (``"*"`` or a tool name); ``timeout_s`` is the hook's timeout in seconds.
        """
        settings = json.loads(self.settings_path.read_text()) if self.settings_path.exists() else {}
        hook: dict[str, Any] = {"type": "command", "command": command}
        if timeout_s is not None:
            hook["timeout"] = timeout_s
        group: dict[str, Any] = {"hooks": [hook]}
        if matcher is not None:
            group["matcher"] = matcher
        settings.setdefault("hooks", {}).setdefault(event, []).append(group)
        self.update_settings(settings)

    def allow_tools(self, *rules: str) -> None:
        """Add permission rules (``"mcp__srv__tool"``, or ``"mcp__srv"`` for a whole server) to
        settings ``permissions.allow`` -- the root-safe way to approve tools in ``-p``."""
        settings = json.loads(self.settings_path.read_text()) if self.settings_path.exists() else {}
        allow = settings.setdefault("permissions", {}).setdefault("allow", [])
        allow.extend(r for r in rules if r not in allow)
        self.update_settings(settings)

    # -- running ----------------------------------------------------------------------------
    def environ(self, env_extra: Mapping[str, str | None] | None = None) -> dict[str, str]:
        """The full environment for a claude process.

        Starts from ``os.environ`` minus every ``CLAUDE*`` / ``ANTHROPIC*`` / proxy variable,
        then sets HOME, CLAUDE_CONFIG_DIR, ANTHROPIC_BASE_URL/API_KEY, the outbound-traffic
        variables, ``MCP_CONNECTION_NONBLOCKING=0``, ``DISABLE_AUTOUPDATER=1``, then ``self.env``
        and ``env_extra`` (a ``None`` value removes the variable).
        """
        env = {k: v for k, v in os.environ.items() if not k.startswith(_STRIP_PREFIXES) and k not in _STRIP_NAMES}
        env.update(
            HOME=str(self.home),
            CLAUDE_CONFIG_DIR=str(self.config_dir),
            ANTHROPIC_API_KEY=self.api_key,
            MCP_CONNECTION_NONBLOCKING="0",
            DISABLE_AUTOUPDATER="1",
        )
        if self.base_url:
            env["ANTHROPIC_BASE_URL"] = self.base_url
        if self.outbound == "disable":
            env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
        else:  # every HTTPS tunnel goes to the stub's CONNECT handler, which refuses it
            assert self.base_url
            env.update(HTTPS_PROXY=self.base_url, HTTP_PROXY=self.base_url, NO_PROXY="127.0.0.1,localhost")
        with_host_node(env)
        for k, v in {**self.env, **(env_extra or {})}.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        return env

    def run_p(
        self,
        prompt: str,
        *,
        cwd: os.PathLike[str] | str,
        env_extra: Mapping[str, str | None] | None = None,
        args: Sequence[str] = (),
        timeout_s: float = 60.0,
        output_format: str | None = "json",
        input: str | None = None,  # noqa: A002 - subprocess naming
    ) -> subprocess.CompletedProcess[str]:
        """Same as :func:`run_claude_p` with ``host=self``."""
        return run_claude_p(
            prompt,
            host=self,
            cwd=cwd,
            env_extra=env_extra,
            args=args,
            timeout_s=timeout_s,
            output_format=output_format,
            input=input,
        )

    def session_of(self, completed: subprocess.CompletedProcess[str], *, cwd: os.PathLike[str] | str) -> ClaudeSession:
        """Same as :func:`session_of` with ``host=self``."""
        return session_of(completed, host=self, cwd=cwd)

    def run_cli(self, *args: str, cwd: os.PathLike[str] | str | None = None, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run ``claude <args…>`` (e.g. ``plugin list``) with this host's environment.

        ``cwd`` defaults to :attr:`home`. A host without a stub is pointed at a short-lived
        :class:`MessagesStub` for the command (see the module docstring: offline, 2.1.332
        would retry DNS for about 18 s). Raises :class:`ClaudeTimeout` like :func:`run_claude_p`.
        """
        argv = [str(self.binary), *[str(a) for a in args]]
        if self.base_url:
            return run_group(argv, cwd=cwd or self.home, env=self.environ(), timeout_s=timeout_s)
        with MessagesStub() as stub:
            env = self.environ({"ANTHROPIC_BASE_URL": stub.base_url})
            return run_group(argv, cwd=cwd or self.home, env=env, timeout_s=timeout_s)

    def install_plugin(self, marketplace: os.PathLike[str] | str, plugin: str, *, timeout_s: float = 120.0) -> None:
        """Add a marketplace (a directory holding ``.claude-plugin/marketplace.json``) and
        install ``plugin`` (``<name>@<marketplace name>``) from it at user scope, as a user
        would with ``claude plugin marketplace add`` and ``claude plugin install``.

        Note: for a directory marketplace Claude Code (2.1.197 and 2.1.332) copies the plugin's whole
        source folder into ``<config dir>/plugins/cache`` (``.gitignore`` is not applied), so
        installing from a checkout with ``.venv`` and ``hosts/node_modules`` copies about 1 GB
        (10-15 s here); :func:`stage_plugin` makes a lean marketplace to install from instead.

        Raises:
            RuntimeError: a command exited non-zero (its output is in the message).
        """
        for args in (("plugin", "marketplace", "add", os.fspath(marketplace)), ("plugin", "install", plugin)):
            done = self.run_cli(*args, timeout_s=timeout_s)
            if done.returncode != 0:
                raise RuntimeError(f"claude {' '.join(args)} failed (rc={done.returncode}): {done.stdout}{done.stderr}")

    def start_stream(
        self,
        *,
        cwd: os.PathLike[str] | str,
        args: Sequence[str] = (),
        env_extra: Mapping[str, str | None] | None = None,
    ) -> "ClaudeStream":
        """Start a long-running ``claude -p --input-format stream-json --output-format
        stream-json --verbose <args…>`` that takes user turns on stdin (see
        :class:`ClaudeStream`). Use it as a context manager so the process group is killed."""
        argv = [
            str(self.binary), "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
            *[str(a) for a in args],
        ]
        return ClaudeStream(argv, cwd=cwd, env=self.environ(env_extra))


def run_claude_p(
    prompt: str,
    *,
    host: ClaudeHost,
    cwd: os.PathLike[str] | str,
    env_extra: Mapping[str, str | None] | None = None,
    args: Sequence[str] = (),
    timeout_s: float = 60.0,
    output_format: str | None = "json",
    input: str | None = None,  # noqa: A002 - subprocess naming
) -> subprocess.CompletedProcess[str]:
    """Run ``claude -p <prompt> [--output-format F] <args…>`` in ``cwd`` and wait for it.

    Args:
        prompt: the user prompt (passed as an argument).
        host: the :class:`ClaudeHost` giving binary, HOME and environment.
        cwd: project directory (the transcript lives under its encoded realpath).
        env_extra: variables added on top of :meth:`ClaudeHost.environ` (``None`` unsets).
        args: extra CLI arguments, e.g. ``["--mcp-config", path, "--allowedTools", "mcp__s"]``.
        timeout_s: wall-clock bound in seconds for the whole run.
        output_format: ``"json"`` (default; stdout is one result object), ``"text"``,
            ``"stream-json"`` (add ``--verbose`` to ``args``), or ``None`` to pass nothing.
        input: text fed to stdin (stdin is ``/dev/null`` otherwise).

    Returns:
        ``CompletedProcess`` with ``args`` (the argv), ``returncode``, ``stdout``/``stderr`` (str).

    Raises:
        ClaudeTimeout: the run exceeded ``timeout_s``. claude runs in its own session/process
            group (with its MCP servers and hooks); the group gets SIGTERM, then SIGKILL after
            3 s. After a normal exit the group is also SIGKILLed, so no stray MCP server or
            hook process survives a test.
    """
    argv = [str(host.binary), "-p", prompt]
    if output_format:
        argv += ["--output-format", output_format]
    argv += [str(a) for a in args]
    return run_group(argv, cwd=cwd, env=host.environ(env_extra), timeout_s=timeout_s, input=input)


def session_of(
    completed: subprocess.CompletedProcess[str],
    *,
    host: ClaudeHost,
    cwd: os.PathLike[str] | str,
) -> ClaudeSession:
    """Session id and transcript path of a finished :func:`run_claude_p` run.

    Reads ``session_id`` from the ``--output-format json`` object (or the last stream-json
    line carrying one); otherwise falls back to the newest ``*.jsonl`` in
    :meth:`ClaudeHost.transcript_dir` of ``cwd``.

    Raises:
        LookupError: neither stdout nor the transcripts dir names a session.
    """
    result: dict[str, Any] | None = None
    session_id: str | None = None
    stdout = (completed.stdout or "").strip()
    try:
        parsed = json.loads(stdout) if stdout else None
        lines = [parsed] if isinstance(parsed, dict) else []
    except ValueError:
        lines = []
        for line in stdout.splitlines():
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict):
                lines.append(obj)
    for obj in lines:
        if obj.get("session_id"):
            session_id = obj["session_id"]
        if obj.get("type") == "result":
            result = obj
    tdir = host.transcript_dir(cwd)
    if session_id is None:
        files = sorted(tdir.glob("*.jsonl"), key=lambda p: p.stat().st_mtime) if tdir.is_dir() else []
        if not files:
            raise LookupError(f"no session id in claude's stdout and no transcript in {tdir}")
        session_id = files[-1].stem
    return ClaudeSession(session_id=session_id, transcript_path=tdir / f"{session_id}.jsonl", result=result)


def plain_server_host(root: Path, stub: Any, state_dir: Path, **env: str) -> tuple[ClaudeHost, Path]:
    """A Claude host (config dir under ``root``) with agent-link as a plain MCP server named
    ``agent-link`` (its tools allowed) and an ``--mcp-config`` file for it.

    :param state_dir: the server's ``AGENT_LINK_STATE_DIR``.
    :param env: more variables for the server (``AGENT_LINK_DISABLE_CHANNEL`` is set to 1).
    :returns: ``(host, mcp config path)``; set ``CLAUDE_CONFIG_DIR`` to ``host.config_dir``
        for in-process code that reads Claude's files.
    """
    host = ClaudeHost.create(root / "claude-home", stub=stub)
    server_env = {"AGENT_LINK_HOST": "claude", "AGENT_LINK_STATE_DIR": str(state_dir), "AGENT_LINK_DISABLE_CHANNEL": "1", **env}
    config = write_mcp_config(root / "mcp.json", {"agent-link": mcp_stdio_server(str(agent_link_bin()), ["mcp"], server_env)})
    host.allow_tools("mcp__agent-link")
    return host, config

