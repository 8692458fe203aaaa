"""The start-up front of ``agent-link mcp``: answers the opening of an MCP connection at once.

Hosts give an MCP server little time to become ready (one goes on without a server's
tools when it has not listed them within about a second), while importing the MCP SDK, pydantic
and the plugins takes longer than that on a loaded machine. So before anything heavy is
imported, :func:`start` puts this front between the wire and the full server:

* two pipes take the place of fd 0 and fd 1, so the full server (and whichever stdio
  transport it uses) reads and writes them exactly as it would the wire;
* a reader thread copies every line from the wire to the server's stdin pipe unchanged. While
  doing so it answers ``initialize`` and a first-page ``tools/list`` itself when the answer
  cache holds them for the revision the client speaks (the cache is keyed by the installed
  distributions and the process's environment, :func:`cache_key`). The server still sees
  these requests, so its session opens exactly as it would without the front;
* a writer thread copies the server's output to the wire. The server's answers to requests
  the front answered are dropped after being compared with the front's: a difference
  replaces the cache with the server's answer (and is logged). The server's answers to
  opening requests the front could not answer are passed on and learnt: the cache is filled
  from what the full server itself said, per protocol revision, at no extra cost.

Lines the front does not answer (anything but those two requests, lines it cannot parse,
lines over :data:`MAX_PARSE_BYTES`) pass through untouched for the server's transport to
judge. Only the standard library is imported here (start-up time is the point).

Once the opening is over (a first-page ``tools/list`` went by), the front hands the wire to
the server's transport when it can take it (:mod:`agent_link_hostkit.stdio_transport`: a pipe or
a socket): :meth:`Front.take_input`, :meth:`Front.output_free`; later calls cross no thread.

Why it stays (issue 31 asks for the SDK's transport wherever no host behaviour forces
otherwise): a host goes on without an optional server's tools when they are not listed
within about a second (README.md, the host plugins' start-up notes, with the host
version it was checked on), and the SDK, pydantic and the plugins take longer than that to
import on a loaded machine. ``AGENT_LINK_MCP_FRONT=0`` turns the front off; the bench section
``mcp_start`` measures the opening against a plain SDK server (bench/mcp_start_bench.py).
It is the host kit's because a host's behaviour is its reason: the host kit declares it, with
its transport, as the start-up front (:mod:`agent_link_hostkit.front`), so ``agent-link mcp``
starts it when the host kit is installed (every host plugin depends on it); the core alone
serves without a front.

A host plugin's launcher (``hooks/agent-link.sh``) may have read and answered the opening
before it exec'ed this process (a host that fails a session whose server is slow to answer).
It hands over what it read in :data:`HANDOVER_VARIABLES`: ``AGENT_LINK_MCP_OPENED`` holds the
lines, one per line, each after ``1 `` (answered by the launcher) or ``0 `` (not answered);
``AGENT_LINK_MCP_OPENED_AT`` when (epoch seconds); ``AGENT_LINK_MCP_LAUNCHER_CACHE`` the
folder the launcher answers from. The front feeds those lines to the server first, drops the
server's answers to the ones the launcher answered, and keeps the server's opening answers in
that folder (``initialize-<revision>`` / ``tools-list-<revision>``, each the answer's
``"result":{...}`` member) for the launcher's next start.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading

from agent_link_core.json_files import read_json_object

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, BinaryIO

log = logging.getLogger(__name__)

CACHE_FORMAT = 1
MAX_PARSE_BYTES = 64 * 1024  # opening requests are small; longer lines are only forwarded
CHUNK_BYTES = 1 << 20
DRAIN_BOUND_S = 5.0  # how long exit waits for the writer thread to pass on the last output
PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion"  # the stateless revision's _meta key
END_MARK = b"\x00agent-link-front-end\n"  # written by this process only, after the server ended
HANDOVER_MARK = b"\x00agent-link-front-handover\n"  # the server writes it when it takes the wire's output
WHERE_STATE_LIVES = frozenset({"AGENT_LINK_STATE_DIR", "AGENT_LINK_MAILBOX_PATH"})  # in the key by name only
#: what a launcher hands over to the process it exec'ed (module docstring); never in the key
HANDOVER_VARIABLES = frozenset({"AGENT_LINK_MCP_OPENED", "AGENT_LINK_MCP_OPENED_AT", "AGENT_LINK_MCP_LAUNCHER_CACHE"})
LATE_S = 2  # a server up this long (s) after its launcher answered says so on stderr
#: the characters of a protocol revision the launcher reads answers for (others it hands on)
REVISION_CHARS = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-")

_current: Front | None = None


def cache_dir(env: Mapping[str, str] | None = None) -> str:
    """Folder of the answer cache: ``$XDG_CACHE_HOME/agent-link/mcp-front`` (default
    ``~/.cache/agent-link/mcp-front``)."""
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "agent-link", "mcp-front")


def cache_key(env: Mapping[str, str] | None = None) -> str:
    """A hex digest naming this process's cache entry.

    Covers what decides the server's opening answers without importing it: the interpreter,
    the agent-link version, the installed distributions (``*.dist-info`` / ``*.egg-info`` names
    on ``sys.path``, which carry name and version; agent-link's own with the time they were
    written, and the newest source time of a folder an editable install put on the path),
    the ``AGENT_LINK_*`` variables with their
    values, the settings file's size and time, and the names of all other environment
    variables (hosts are told apart by the variables they set). Where the state lives
    (:data:`WHERE_STATE_LIVES`) counts by name only: the opening answers do not depend on it,
    and a new state dir (a first session, a test, a project's own mailbox) then starts from the
    cache as fast as one used before. A change the key misses is
    caught by the comparison in the writer thread.
    """
    import hashlib

    from agent_link_core import __version__

    env = os.environ if env is None else env
    digest = hashlib.sha256()
    parts: list[str] = [str(CACHE_FORMAT), __version__, sys.executable, sys.prefix]
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        parts.append(entry)
        dists = sorted(n for n in names if n.endswith((".dist-info", ".egg-info")))
        parts.extend(dists)
        # a reinstall keeps a distribution's name and version but writes its metadata anew
        parts.extend(f"{n}:{_mtime(os.path.join(entry, n))}" for n in dists if n.startswith("agent_link"))
        if not dists:  # a source folder an editable install put on the path: its code may change
            parts.append(f"src:{_newest_source(entry or '.')}")
    for name in sorted(env):
        if name in HANDOVER_VARIABLES:
            continue
        keyed = name.startswith("AGENT_LINK_") and name not in WHERE_STATE_LIVES
        parts.append(f"{name}={env[name]}" if keyed else name)
    from agent_link_core.settings_file import settings_path

    settings = settings_path(env)
    try:
        stat = os.stat(settings)
        parts.append(f"settings:{stat.st_size}:{stat.st_mtime_ns}")
    except OSError:
        parts.append("settings:none")
    digest.update("\0".join(parts).encode("utf-8", "surrogateescape"))
    return digest.hexdigest()[:32]


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0


def _newest_source(folder: str) -> int:
    """The newest modification time (ns) of the ``.py`` files of agent-link's packages
    (``agent_link*`` folders holding ``__init__.py``) in ``folder``, walked without
    ``__pycache__``; 0 when there are none. Other packages (a project the server was started
    in) are not walked."""
    newest = 0
    stack = [os.path.join(folder, n) for n in os.listdir(folder)
             if n.startswith("agent_link") and os.path.isfile(os.path.join(folder, n, "__init__.py"))]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for item in entries:
                if item.is_dir(follow_symlinks=False) and item.name != "__pycache__":
                    stack.append(item.path)
                elif item.name.endswith(".py"):
                    newest = max(newest, item.stat().st_mtime_ns)
    return newest


def cache_path(env: Mapping[str, str] | None = None) -> str:
    """The cache file of this process (:func:`cache_dir` / :func:`cache_key`)."""
    return os.path.join(cache_dir(env), cache_key(env) + ".json")


def load_answers(path: str) -> dict[str, Any] | None:
    """The cached answers in ``path`` (``{cache key: response}``), or None when absent or
    unreadable."""
    data = read_json_object(path)
    if data is None or data.get("format") != CACHE_FORMAT or not isinstance(data.get("answers"), dict):
        return None
    return data["answers"]


def store_answers(path: str, answers: Mapping[str, Any]) -> None:
    """Write ``answers`` to ``path`` atomically (a temporary file renamed into place).

    :raises OSError: the folder cannot be made or written.
    """
    from agent_link_core.errors import AgentLinkError
    from agent_link_core.store import ensure_private_dir  # written after the answers went out: off the fast path

    try:
        ensure_private_dir(os.path.dirname(path))  # private like every file agent-link makes, whatever the umask
    except AgentLinkError as exc:
        raise OSError(exc.message) from exc
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump({"format": CACHE_FORMAT, "answers": answers}, handle, ensure_ascii=False)
    os.replace(tmp, path)


class Front:
    """One connection's front (module docstring).

    :param wire_in: a binary reader of the client's lines.
    :param wire_out: a binary writer to the client.
    :param server_in: fd the server reads its stdin from (the front writes to it).
    :param server_out: a binary reader of what the server writes.
    :param cache_file: where the answers live; :param answers: what it held at start.
    :param opened: the lines a launcher read before this process, each with whether the
        launcher answered it (:func:`opened_lines`); :param launcher_cache: the folder the
        launcher answers from, or None.
    """

    def __init__(self, wire_in: BinaryIO, wire_out: BinaryIO, server_in: int, server_out: BinaryIO,
                 cache_file: str, answers: dict[str, Any] | None,
                 opened: list[tuple[bool, bytes]] | None = None, launcher_cache: str | None = None) -> None:
        self.wire_in, self.wire_out, self.server_in, self.server_out = wire_in, wire_out, server_in, server_out
        self.cache_file = cache_file
        self.answers = answers
        self.opened = opened or []
        self.launcher_cache = launcher_cache
        self.launcher_given: dict[str, tuple[str, dict[str, Any] | None]] = {}  # request id -> (key, launcher's answer)
        self.revision: str | None = None
        self.given: dict[str, tuple[str, dict[str, Any]]] = {}  # request id (JSON) -> (key, answer given)
        self.wanted: dict[str, str] = {}  # request id (JSON) -> cache key the server's answer fills
        self.learning = True
        self.answered = 0
        self.mismatches: list[str] = []
        self.listed = False  # a first-page tools/list went by: the opening is over
        self.taker = False  # the server's transport can read and write the wire itself
        self.handed_in: bytes | None = None  # once the wire's input is the transport's: what was read of it already
        self.handed_out = threading.Event()  # the writer thread stopped at HANDOVER_MARK
        self.passed = 0  # the server's lines the writer thread is done with (written to the wire, or dropped)
        self._lock = threading.Lock()
        self._drained = threading.Event()

    def learn(self, key: str, answer: dict[str, Any], *, fresh: bool = False) -> None:
        """Keep the server's ``answer`` under ``key`` for later starts; ``fresh`` drops every
        other entry first (they came from a server that answered differently)."""
        if not self.learning:
            return
        known = {} if fresh else (load_answers(self.cache_file) or {})
        known[key] = answer
        try:
            store_answers(self.cache_file, known)
        except OSError as exc:
            log.warning("agent-link: could not write the MCP start-up cache %s: %s", self.cache_file, exc)

    # -- the two threads ---------------------------------------------------------------------

    def keep_for_launcher(self, key: str, answer: dict[str, Any]) -> str | None:
        """Keep the server's opening ``answer`` (``key`` as in the cache) in the launcher's
        folder, when there is one and it holds something else (atomically, private).

        :returns: None when the folder holds the server's answer now, else why not (a few words)."""
        name = key.replace("/", "-")
        revision = name.removeprefix("initialize-").removeprefix("tools-list-")
        if not self.learning:
            return "this server is not serving normally, so its answers are not kept"
        if (not self.launcher_cache or "result" not in answer or revision == name
                or not revision or not set(revision) <= REVISION_CHARS):
            return "the server's answer is not one the launcher answers with"
        path = os.path.join(self.launcher_cache, name)
        text = json.dumps(answer, ensure_ascii=True, separators=(",", ":"))[1:-1]
        try:
            with open(path, encoding="utf-8") as handle:
                if handle.read() == text:
                    return None
        except OSError:
            pass
        from agent_link_core.errors import AgentLinkError
        from agent_link_core.store import ensure_private_dir

        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            ensure_private_dir(self.launcher_cache)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(tmp, path)
        except (OSError, AgentLinkError) as exc:
            log.warning("agent-link: could not keep the launcher's MCP answers in %s: %s", self.launcher_cache, exc)
            return f"could not write {path}"
        return None

    def launcher_answer(self, key: str) -> dict[str, Any] | None:
        """What the launcher answered for ``key`` (its file read again), or None."""
        if not self.launcher_cache:
            return None
        try:
            with open(os.path.join(self.launcher_cache, key.replace("/", "-")), encoding="utf-8") as handle:
                answer = json.loads("{" + handle.read() + "}")
        except (OSError, ValueError):
            return None
        return answer if isinstance(answer, dict) else None

    def pump_in(self) -> None:
        """Copy the wire's lines to the server, answering what the cache holds; the lines a
        launcher handed over go first."""
        try:
            for answered, line in self.opened:
                opening = self._opening(line) if answered else None
                if opening is not None:
                    request_id, key = opening
                    self.launcher_given[request_id] = (key, self.launcher_answer(key))
                elif not answered and len(line) <= MAX_PARSE_BYTES:
                    self._answer(line)
                _write_all(self.server_in, line)
            read = getattr(self.wire_in, "read1", self.wire_in.read)  # what is there, up to CHUNK_BYTES
            pending = b""  # read from the wire, not passed on yet (the start of a line)
            partial = False  # what was passed on last ended inside a line
            while not self._hand_over(pending):
                chunk = read(CHUNK_BYTES)
                if not chunk:
                    _write_all(self.server_in, pending)
                    return
                pending += chunk
                start = 0
                while (end := pending.find(b"\n", start)) >= 0:
                    line = pending[start:end + 1]
                    start = end + 1
                    if not partial and len(line) <= MAX_PARSE_BYTES:
                        self._answer(line)
                    partial = False
                    _write_all(self.server_in, line)
                    if self._hand_over(pending[start:]):
                        return
                pending = pending[start:]
                if len(pending) >= CHUNK_BYTES:  # a long line goes on in pieces, never parsed
                    _write_all(self.server_in, pending)
                    pending, partial = b"", True
        except OSError as exc:  # the server is gone: nothing left to feed
            log.debug("front reader stopped: %s", exc)
        finally:
            try:
                os.close(self.server_in)
            except OSError:
                pass

    def pump_out(self) -> None:
        """Copy the server's lines to the wire, dropping its answers the front already gave."""
        try:
            while True:
                line = self.server_out.readline()
                if not line or line == END_MARK:
                    return
                if line == HANDOVER_MARK:  # the server's transport writes to the wire itself from here
                    self.handed_out.set()
                    return
                if not (self.given or self.wanted or self.launcher_given) or self._pass_on(line):
                    with self._lock:
                        self.wire_out.write(line)
                        self.wire_out.flush()
                self.passed += 1
        except (OSError, ValueError) as exc:  # the client is gone
            log.debug("front writer stopped: %s", exc)
        finally:
            self._drained.set()

    # -- handing the wire over -----------------------------------------------------------------

    def _hand_over(self, rest: bytes) -> bool:
        """Stop copying the wire's input once the opening is over and the server's transport
        takes the wire (:meth:`take_input`); ``rest``: bytes read after the last line passed on."""
        if not (self.listed and self.taker):
            return False
        self.handed_in = rest
        return True

    def take_input(self) -> tuple[int, bytes] | None:
        """At the end of the server's input pipe: ``(the wire's fd, bytes read of it and not
        passed on)`` when the front handed the wire over, else None (the input ended)."""
        return None if self.handed_in is None else (self.wire_in.fileno(), self.handed_in)

    def output_free(self) -> bool:
        """Whether the server's writer may hand its output over (write :data:`HANDOVER_MARK`, wait
        for :attr:`handed_out`, then write to :attr:`wire_out`): the input was handed over and
        every answer to an opening request went through the writer thread."""
        return self.handed_in is not None and not (self.given or self.wanted or self.launcher_given)

    def drained(self) -> bool:
        """Whether the writer thread stopped (at :data:`END_MARK`, :data:`HANDOVER_MARK`, or a client gone)."""
        return self._drained.is_set()

    def wait_drained(self, bound_s: float = DRAIN_BOUND_S) -> None:
        """Wait until the writer thread passed on everything up to :data:`END_MARK`."""
        self._drained.wait(bound_s)

    # -- answering ---------------------------------------------------------------------------

    def _answer(self, line: bytes) -> None:
        """Answer ``line`` from the cache when it is an opening request the cache holds; note
        which cache key the server's answer fills when it is one the cache lacks."""
        opening = self._opening(line)
        if opening is None:
            return
        request_id, key = opening
        answer = (self.answers or {}).get(key)
        if not isinstance(answer, dict):
            self.wanted[request_id] = key
            return
        self.given[request_id] = (key, answer)
        data = {"jsonrpc": "2.0", "id": json.loads(request_id), **answer}
        with self._lock:
            self.wire_out.write(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n")
            self.wire_out.flush()
        self.answered += 1

    def _opening(self, line: bytes) -> tuple[str, str] | None:
        """``(request id as JSON, cache key)`` when ``line`` is an opening request (``initialize``,
        a first-page ``tools/list``), else None; an ``initialize`` sets the revision."""
        if b'"initialize"' not in line and b'"tools/list"' not in line:
            return None  # not parsed: every tool call passes here (a method spelt with escapes goes on to the server)
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):  # nested too deeply: the server's transport answers it
            return None
        # Only a well-formed JSON-RPC 2.0 request is answered here; anything else goes to the
        # server's transport, whose answer (an error) is then the only one.
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
            return None
        if not isinstance(message.get("id"), (int, str)) or isinstance(message.get("id"), bool):
            return None
        raw_params = message.get("params", {})
        if not isinstance(raw_params, dict):
            return None
        params: dict[str, Any] = raw_params
        method = message["method"]
        if method == "initialize":
            revision = params.get("protocolVersion")
            if not isinstance(revision, str):
                return None
            key = f"initialize/{revision}"
            self.revision = revision
        elif method == "tools/list" and "cursor" not in params:
            meta = params.get("_meta")
            revision = meta.get(PROTOCOL_VERSION_META) if isinstance(meta, dict) else None
            revision = revision if isinstance(revision, str) else self.revision
            if revision is None:
                return None
            key = f"tools/list/{revision}"
        else:
            return None
        if method == "tools/list":
            self.listed = True
        return json.dumps(message["id"]), key

    def _pass_on(self, line: bytes) -> bool:
        """Whether the server's ``line`` goes to the client: not when the front already gave
        that answer (it is compared with the front's, then dropped); an answer the cache lacks
        is learnt and passed on."""
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            return True
        if not isinstance(message, dict) or "method" in message or "id" not in message:
            return True
        request_id = json.dumps(message["id"])
        answer = {k: v for k, v in message.items() if k not in ("jsonrpc", "id")}
        wanted = self.wanted.pop(request_id, None)
        if wanted is not None:
            self.learn(wanted, answer)
            self.keep_for_launcher(wanted, answer)
            return True
        launcher = self.launcher_given.pop(request_id, None)
        if launcher is not None:
            key, launcher_answer = launcher
            not_kept = self.keep_for_launcher(key, answer)
            if answer != launcher_answer:
                self.mismatches.append(key)
                log.warning("agent-link: the launcher answered %s with other answers than the server's (this connection keeps "
                            "them); %s", key, "kept the server's for the next start" if not_kept is None
                            else f"the launcher's stay for the next start ({not_kept})")
            return False
        given = self.given.pop(request_id, None)
        if given is None:
            return True
        key, front_answer = given
        if answer != front_answer:
            self.mismatches.append(key)
            self.answers = None  # answer nothing more from a cache found wrong
            log.warning("agent-link: the MCP start-up cache's %s differed from the server's answer; relearnt", key)
            self.learn(key, answer, fresh=True)
        self.keep_for_launcher(key, answer)
        return False


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def stop_learning() -> None:
    """Keep this process's answers out of the cache (the server runs in a degraded mode)."""
    if _current is not None:
        _current.learning = False
        _current.answers = None


def current() -> Front | None:
    """The front of this process, when :func:`start` installed one."""
    return _current


def opened_lines(env: Mapping[str, str]) -> list[tuple[bool, bytes]]:
    """The lines a launcher handed over in ``AGENT_LINK_MCP_OPENED`` (module docstring), as
    ``(answered by the launcher, line with its newline)``; ``[]`` when there are none."""
    lines = []
    for entry in env.get("AGENT_LINK_MCP_OPENED", "").split("\n"):
        mark, _, line = entry.partition(" ")
        if mark in ("0", "1") and line:
            lines.append((mark == "1", line.encode("utf-8", "surrogateescape") + b"\n"))
    return lines


def say_if_late(env: Mapping[str, str], opened: list[tuple[bool, bytes]], now_s: float) -> str | None:
    """The line saying this server came up late (also written to stderr, the host's log of
    the server), when a launcher answered the opening :data:`LATE_S` or more seconds before
    ``now_s`` (epoch seconds); else None."""
    if not any(answered for answered, _ in opened):
        return None
    try:
        late = now_s - int(env.get("AGENT_LINK_MCP_OPENED_AT", ""))
    except ValueError:
        return None
    if late < LATE_S:
        return None
    said = (f"agent-link: the server started {late:.0f} s after the host opened the connection; the launcher had "
            f"answered its opening with the last known tools ({env.get('AGENT_LINK_MCP_LAUNCHER_CACHE', '')}), "
            "so the session went on without waiting; tool calls made meanwhile waited for the server")
    try:
        sys.stderr.write(said + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    return said


def start(env: Mapping[str, str] | None = None) -> Front | None:
    """Put the front between fd 0/1 and the rest of this process (module docstring).

    Call before the MCP server is imported. Returns None (and changes nothing) when
    ``AGENT_LINK_MCP_FRONT`` is ``0`` and no launcher handed lines over, or the descriptors
    cannot be rearranged. With ``AGENT_LINK_MCP_FRONT=0`` and lines handed over, the front
    only replays them (it answers nothing from its cache).
    """
    global _current
    import time

    env = os.environ if env is None else env
    opened = opened_lines(env)
    say_if_late(env, opened, time.time())
    off = env.get("AGENT_LINK_MCP_FRONT", "1").strip().lower() in ("0", "false", "no", "off")
    if off and not opened:
        return None
    import fcntl

    try:
        wire_in_fd = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
        wire_out_fd = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        os.dup2(in_r, 0)
        os.dup2(out_w, 1)
    except OSError as exc:
        log.debug("no MCP start-up front: %s", exc)
        return None
    os.close(in_r)
    os.close(out_w)
    path = cache_path(env)
    # unbuffered: what the reader thread read and did not pass on is all in hand at a handover
    front = Front(os.fdopen(wire_in_fd, "rb", buffering=0), os.fdopen(wire_out_fd, "wb"), in_w, os.fdopen(out_r, "rb"),
                  path, None if off else load_answers(path), opened, env.get("AGENT_LINK_MCP_LAUNCHER_CACHE") or None)
    threading.Thread(target=front.pump_in, name="agent-link-front-in", daemon=True).start()
    threading.Thread(target=front.pump_out, name="agent-link-front-out", daemon=True).start()
    _current = front
    return front


def finish() -> None:
    """After the server ended: let the writer thread pass on the server's last output."""
    front = _current
    if front is None or front.handed_out.is_set():  # handed over: the server wrote to the wire itself
        return
    try:
        sys.stdout.flush()
        _write_all(1, END_MARK)
    except (OSError, ValueError):
        return
    front.wait_drained()

