"""Finding Claude Code and Claude Desktop sessions on this machine (read-only).

Three sources, merged per session (docs/hosts/claude-code.md §3-4,
docs/behaviour.md §15):

* **transcripts** ``<config dir>/projects/<encoded cwd>/<session id>.jsonl`` -- every session
  that ever ran a turn. ``<config dir>`` is ``$CLAUDE_CONFIG_DIR`` or ``~/.claude``. Only the
  head (cwd, first prompt, start time) and the last 64 KiB (Claude Code re-appends
  ``custom-title`` / ``ai-title`` lines there) are read, and each file's summary is cached by
  ``(mtime, size)``. Only the newest ``limit`` files are read at all; older ones are listed
  from their directory entry (id and mtime), so a listing costs one ``stat`` per transcript.
* **live sessions** ``<config dir>/sessions/<pid>.json`` -- written by every running claude
  process (``-p`` included) and deleted at exit. A file counts only while its pid runs *and*
  has the recorded ``procStart`` (a reused pid does not).
* **Claude Desktop sidecars** ``local_<id>.json`` under ``local-agent-mode-sessions/``
  (surface ``desktop``) and ``claude-code-sessions/`` (surface ``code``) in the Desktop app's
  data folder: ``~/Library/Application Support/Claude`` (macOS) or
  ``${XDG_CONFIG_HOME:-~/.config}/Claude`` (Linux). A sidecar names the session's current CLI
  id (``cliSessionId``) and the ids it had before (``priorCliSessionIds``); those become the
  session's aliases, so an address made from a former id still reaches it.

A session's address is ``claude:<cli session id>``; a Desktop session that has no CLI id yet
uses its sidecar id without the ``local_`` prefix.
"""

from __future__ import annotations

import glob
import json
import os
import re
import time
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agent_link_core.json_files import read_json_object
from agent_link_core.mailbox import iso
from agent_link_core.model import Session
from agent_link_hostkit.titles import retitled

from agent_link_claude.procs import is_claude_program, proc_start, same_process

HARNESS = "claude"
ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,128}\Z")
SIDECAR_NAME_RE = re.compile(r"^local_[0-9a-zA-Z-]+\.json\Z")
SIDECAR_DIRS = (("local-agent-mode-sessions", "desktop"), ("claude-code-sessions", "code"))
SIDECAR_MAX_DEPTH = 4
HEAD_CHUNK = 16 * 1024
HEAD_MAX = 1024 * 1024
TAIL_BYTES = 64 * 1024
TITLE_MAX = 120
LIVE_TTL_S = 2.0  # liveness is re-checked at most this often (it may run `ps` on macOS)
_DROP_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})


# -- locations ---------------------------------------------------------------------------------


def _home(env: Mapping[str, str]) -> str:
    return env.get("HOME") or os.path.expanduser("~")


def config_dir(env: Mapping[str, str]) -> str:
    """Claude Code's config dir: ``$CLAUDE_CONFIG_DIR`` (``~`` expanded) or ``$HOME/.claude``."""
    explicit = (env.get("CLAUDE_CONFIG_DIR") or "").strip()
    if explicit:
        if explicit == "~" or explicit.startswith("~/"):
            explicit = _home(env) + explicit[1:]
        return os.path.abspath(explicit)
    return os.path.join(_home(env), ".claude")


def global_config_path(env: Mapping[str, str]) -> str:
    """The global config file: ``$CLAUDE_CONFIG_DIR/.claude.json`` when that variable is set
    (verified on 2.1.197), else ``$HOME/.claude.json``."""
    if (env.get("CLAUDE_CONFIG_DIR") or "").strip():
        return os.path.join(config_dir(env), ".claude.json")
    return os.path.join(_home(env), ".claude.json")


def desktop_roots(env: Mapping[str, str]) -> list[str]:
    """Folders where Claude Desktop keeps its data (macOS and Linux), whether or not they exist."""
    home = _home(env)
    xdg = (env.get("XDG_CONFIG_HOME") or "").strip() or os.path.join(home, ".config")
    return [os.path.join(home, "Library", "Application Support", "Claude"), os.path.join(xdg, "Claude")]


# -- small helpers -----------------------------------------------------------------------------


def clean_label(value: object, limit: int = TITLE_MAX) -> str | None:
    """A one-line label safe to show a model: controls, format/invisible characters, lone
    surrogates and private-use characters dropped, whitespace collapsed, at most ``limit``
    characters (cut with ``…``). None when nothing is left."""
    if not isinstance(value, str):
        return None
    raw = value[: limit * 4]
    kept = "".join(" " if unicodedata.category(ch) in _DROP_CATEGORIES else ch for ch in raw)
    text = " ".join(kept.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text or None


def _safe(value: str | None) -> str | None:
    """``value`` with lone surrogates (undecodable path bytes, broken JSON escapes) replaced,
    so it can always be written out as UTF-8."""
    return value.encode("utf-8", "replace").decode("utf-8") if value is not None else None


def _iso_ms(value: object) -> int | None:
    if not isinstance(value, str):
        return None
    try:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _parse_lines(data: bytes) -> Iterable[dict[str, Any]]:
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(record, dict):
            yield record


# -- transcripts -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Transcript:
    """What a transcript file says about its session.

    ``mtime_ms`` / ``size`` come from ``stat``; the other fields are filled only when the file
    was read (``read`` True). ``title`` is the newest ``custom-title`` / ``ai-title`` /
    ``summary`` line; ``first_prompt`` the first typed user text.
    """

    session_id: str
    path: str
    mtime_ms: int
    size: int
    read: bool = False
    cwd: str | None = None
    title: str | None = None
    first_prompt: str | None = None
    created_ms: int | None = None
    entrypoint: str | None = None


def _prompt_text(record: dict[str, Any]) -> str | None:
    if record.get("type") != "user" or record.get("isMeta") or record.get("toolUseResult") is not None:
        return None
    content = (record.get("message") or {}).get("content") if isinstance(record.get("message"), dict) else None
    texts = [content] if isinstance(content, str) else [
        b.get("text") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"
    ]
    for text in texts:
        # system reminders, slash-command echoes and command output are wrapped in tags
        if isinstance(text, str) and text.strip() and not text.lstrip().startswith("<"):
            return clean_label(text)
    return None


def read_transcript(path: str, mtime_ms: int, size: int) -> Transcript:
    """Summarise one transcript from its head and its last :data:`TAIL_BYTES`.

    Unparseable lines are skipped (the host may be writing the last one right now).
    """
    session_id = os.path.basename(path)[: -len(".jsonl")]
    cwd = first_prompt = entrypoint = None
    created = None
    titles: dict[str, str] = {}
    try:
        with open(path, "rb") as f:
            head = b""
            want = HEAD_CHUNK
            while True:
                chunk = f.read(want - len(head))
                head += chunk
                complete = head if not chunk or len(head) >= size else head[: head.rfind(b"\n") + 1]
                for record in _parse_lines(complete):
                    created = created or _iso_ms(record.get("timestamp"))
                    cwd = cwd or _str(record.get("cwd"))
                    entrypoint = entrypoint or _str(record.get("entrypoint"))
                    first_prompt = first_prompt or _prompt_text(record)
                if (cwd and first_prompt) or not chunk or len(head) >= min(size, HEAD_MAX):
                    break
                want = len(head) * 2
            start = max(0, size - TAIL_BYTES)
            f.seek(start)
            tail = f.read(TAIL_BYTES)
    except OSError:
        return Transcript(session_id, path, mtime_ms, size)
    if start > 0:
        tail = tail[tail.find(b"\n") + 1 :]  # the first line is probably cut
    for record in _parse_lines(tail):
        kind = record.get("type")
        for wanted, key in (("custom-title", "customTitle"), ("ai-title", "aiTitle"), ("summary", "summary")):
            if kind == wanted and _str(record.get(key)):
                titles[wanted] = record[key]
    title = next((clean_label(titles[k]) for k in ("custom-title", "ai-title", "summary") if k in titles), None)
    return Transcript(session_id, path, mtime_ms, size, True, cwd, title, first_prompt, created, entrypoint)


# -- live sessions -----------------------------------------------------------------------------


@dataclass(frozen=True)
class LiveSession:
    """A ``sessions/<pid>.json`` file whose process runs (fields as Claude Code writes them)."""

    pid: int
    session_id: str
    cwd: str | None
    started_ms: int | None
    updated_ms: int | None
    kind: str | None
    entrypoint: str | None
    name: str | None
    name_source: str | None
    status: str | None
    proc_start: str | None
    socket_path: str | None = None  # messagingSocketPath: the session's inbox socket (2.1.224+)
    version: str | None = None


def read_live_file(path: str) -> LiveSession | None:
    """Parse one live-session file (None when unreadable or malformed); liveness not checked."""
    data = read_json_object(path)
    if data is None:
        return None
    pid, sid = _int(data.get("pid")), _str(data.get("sessionId"))
    if pid is None or sid is None or not ID_RE.match(sid):
        return None
    return LiveSession(
        pid=pid, session_id=sid, cwd=_str(data.get("cwd")), started_ms=_int(data.get("startedAt")),
        updated_ms=_int(data.get("updatedAt")), kind=_str(data.get("kind")), entrypoint=_str(data.get("entrypoint")),
        name=clean_label(data.get("name")), name_source=_str(data.get("nameSource")), status=_str(data.get("status")),
        proc_start=_str(data.get("procStart")), socket_path=_str(data.get("messagingSocketPath")),
        version=_str(data.get("version")),
    )


def host_session(config_dir: str, pid: int) -> LiveSession | None:
    """The session the Claude Code process ``pid`` runs, by that process's own record; None
    unless ``pid`` runs Claude Code's program (:func:`~agent_link_claude.procs.is_claude_program`)
    and ``<config_dir>/sessions/<pid>.json`` names that pid with its exact start stamp (a
    record without one, or for a reused pid, proves nothing). Any process can write such a
    record for itself; only Claude Code's program writes one for a Claude Code process."""
    if pid <= 1 or not is_claude_program(pid):
        return None
    live = read_live_file(os.path.join(config_dir, "sessions", f"{pid}.json"))
    if live is None or live.pid != pid or not live.proc_start or live.proc_start != proc_start(pid):
        return None
    return live


# -- Desktop sidecars --------------------------------------------------------------------------


@dataclass(frozen=True)
class Sidecar:
    """A Claude Desktop ``local_<id>.json`` session record (docs/behaviour.md §15 fields)."""

    session_id: str
    surface: str
    path: str
    cli_session_id: str | None = None
    prior_cli_ids: tuple[str, ...] = ()
    title: str | None = None
    cwd: str | None = None
    archived: bool = False
    created_ms: int | None = None
    last_activity_ms: int | None = None
    process_name: str | None = None


def read_sidecar(path: str, surface: str) -> Sidecar | None:
    """Parse a sidecar; it must be an object with a non-empty string ``sessionId``."""
    data = read_json_object(path)
    if data is None or not _str(data.get("sessionId")):
        return None
    cli = _str(data.get("cliSessionId"))
    prior = data.get("priorCliSessionIds")
    folders = data.get("userSelectedFolders")
    cwd = _str(data.get("cwd")) or _str(data.get("originCwd"))
    if cwd is None and isinstance(folders, list) and folders and isinstance(folders[0], str):
        cwd = folders[0]
    return Sidecar(
        session_id=data["sessionId"], surface=surface, path=path,
        cli_session_id=cli if cli and ID_RE.match(cli) else None,
        prior_cli_ids=tuple(p for p in prior if isinstance(p, str) and ID_RE.match(p)) if isinstance(prior, list) else (),
        title=clean_label(data.get("title")), cwd=cwd, archived=data.get("isArchived") is True,
        created_ms=_int(data.get("createdAt")), last_activity_ms=_int(data.get("lastActivityAt")),
        process_name=clean_label(data.get("processName")),
    )


def _strip_local(ident: str) -> str:
    return ident[len("local_"):] if ident.startswith("local_") and len(ident) > len("local_") else ident


# -- the index ---------------------------------------------------------------------------------


@dataclass
class _Parts:
    sidecar: Sidecar | None = None
    transcripts: list[Transcript] = field(default_factory=list)
    live: LiveSession | None = None


@dataclass
class IndexStats:
    """Counters for health: files seen and read by the last listing, and cache size."""

    transcripts_seen: int = 0
    transcripts_read: int = 0
    cached: int = 0
    live: int = 0
    sidecars: int = 0
    last_scan_ms: float = 0.0


class SessionIndex:
    """Claude sessions from transcripts, live-session files and Desktop sidecars.

    :param env: the environment to read ``CLAUDE_CONFIG_DIR``, ``HOME`` and
        ``XDG_CONFIG_HOME`` from (a live mapping such as ``os.environ`` is re-read each call).

    Not thread-safe; one per process. Caches: transcript and sidecar summaries by
    ``(path, mtime, size)``, live-session liveness for :data:`LIVE_TTL_S`.
    """

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self._transcripts: dict[str, Transcript] = {}
        self._sidecars: dict[str, tuple[int, int, Sidecar | None]] = {}
        self._live_files: dict[str, tuple[int, LiveSession | None]] = {}
        self._alive: dict[tuple[int, str | None], tuple[float, bool]] = {}
        self.stats = IndexStats()

    # -- raw sources -------------------------------------------------------------------

    @property
    def config_dir(self) -> str:
        return config_dir(self.env)

    def _transcript(self, path: str, mtime_ms: int, size: int, *, read: bool) -> Transcript:
        cached = self._transcripts.get(path)
        if cached is not None and cached.mtime_ms == mtime_ms and cached.size == size and (cached.read or not read):
            return cached
        if not read:
            return Transcript(os.path.basename(path)[: -len(".jsonl")], path, mtime_ms, size)
        summary = read_transcript(path, mtime_ms, size)
        self._transcripts[path] = summary
        self.stats.transcripts_read += 1
        return summary

    def transcript_files(self) -> list[tuple[str, int, int]]:
        """``(path, mtime ms, size)`` of every ``projects/*/<id>.jsonl``, newest first."""
        out: list[tuple[str, int, int]] = []
        projects = os.path.join(self.config_dir, "projects")
        try:
            project_dirs = [e.path for e in os.scandir(projects) if e.is_dir(follow_symlinks=False)]
        except OSError:
            return out
        for directory in project_dirs:
            try:
                entries = list(os.scandir(directory))
            except OSError:
                continue
            for entry in entries:
                if not entry.name.endswith(".jsonl") or not ID_RE.match(entry.name[: -len(".jsonl")]):
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if entry.is_file(follow_symlinks=False):
                    out.append((entry.path, st.st_mtime_ns // 1_000_000, st.st_size))
        out.sort(key=lambda t: -t[1])
        return out

    def _find_transcripts(self, ids: Iterable[str]) -> list[Transcript]:
        projects = glob.escape(os.path.join(self.config_dir, "projects"))
        found = []
        for ident in ids:
            for path in glob.glob(os.path.join(projects, "*", glob.escape(ident) + ".jsonl")):
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                found.append(self._transcript(path, st.st_mtime_ns // 1_000_000, st.st_size, read=True))
        return found

    def _alive_check(self, live: LiveSession) -> bool:
        key = (live.pid, live.proc_start)
        now = time.monotonic()
        hit = self._alive.get(key)
        if hit is not None and now - hit[0] < LIVE_TTL_S:
            return hit[1]
        alive = same_process(live.pid, live.proc_start)
        self._alive[key] = (now, alive)
        return alive

    def live_sessions(self) -> list[LiveSession]:
        """Live-session files whose process is running (the same process that wrote them)."""
        directory = os.path.join(self.config_dir, "sessions")
        try:
            names = [n for n in os.listdir(directory) if n.endswith(".json")]
        except OSError:
            return []
        out = []
        seen = set()
        for name in names:
            path = os.path.join(directory, name)
            seen.add(path)
            try:
                mtime = os.stat(path).st_mtime_ns
            except OSError:
                continue
            cached = self._live_files.get(path)
            live = cached[1] if cached is not None and cached[0] == mtime else read_live_file(path)
            self._live_files[path] = (mtime, live)
            if live is not None and name == f"{live.pid}.json" and self._alive_check(live):
                out.append(live)
        for stale in set(self._live_files) - seen:
            del self._live_files[stale]
        self.stats.live = len(out)
        return out

    def live_file(self, pid: int) -> LiveSession | None:
        """The live-session file of ``pid`` if present and written by that very process."""
        live = read_live_file(os.path.join(self.config_dir, "sessions", f"{pid}.json"))
        if live is None or live.pid != pid or not same_process(pid, live.proc_start):
            return None
        return live

    def sidecars(self) -> list[Sidecar]:
        """Every parseable Desktop sidecar under :func:`desktop_roots`."""
        out: list[Sidecar] = []
        for root in desktop_roots(self.env):
            for sub, surface in SIDECAR_DIRS:
                base = os.path.join(root, sub)
                if not os.path.isdir(base):
                    continue
                base_depth = base.rstrip(os.sep).count(os.sep)
                for dirpath, dirnames, filenames in os.walk(base):
                    if dirpath.count(os.sep) - base_depth >= SIDECAR_MAX_DEPTH:
                        dirnames[:] = []
                    for name in filenames:
                        if SIDECAR_NAME_RE.match(name):
                            sidecar = self._sidecar(os.path.join(dirpath, name), surface)
                            if sidecar is not None:
                                out.append(sidecar)
        self.stats.sidecars = len(out)
        return out

    def _sidecar(self, path: str, surface: str) -> Sidecar | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        cached = self._sidecars.get(path)
        if cached is not None and cached[:2] == (st.st_mtime_ns, st.st_size):
            return cached[2]
        sidecar = read_sidecar(path, surface)
        self._sidecars[path] = (st.st_mtime_ns, st.st_size, sidecar)
        return sidecar

    # -- merged view -------------------------------------------------------------------

    def sessions(self, limit: int = 200, channel_sessions: frozenset[str] = frozenset()) -> list[Session]:
        """Every session, newest first; the newest ``limit`` transcripts are read for titles.

        :param channel_sessions: CLI session ids served by a running channel bridge (their
            ``receive.push`` is ``channel``).
        """
        started = time.monotonic()
        files = self.transcript_files()
        sidecars = self.sidecars()
        live = self.live_sessions()
        linked = {s.session_id for s in live}
        for sc in sidecars:
            linked.update(i for i in (sc.cli_session_id, *sc.prior_cli_ids) if i)
        transcripts = [
            self._transcript(path, mtime, size, read=rank < limit or os.path.basename(path)[:-6] in linked)
            for rank, (path, mtime, size) in enumerate(files)
        ]
        sessions = merge(transcripts, live, sidecars, channel_sessions)
        self.stats.transcripts_seen = len(files)
        self.stats.cached = len(self._transcripts)
        self.stats.last_scan_ms = round((time.monotonic() - started) * 1000, 1)
        return sessions

    def find(self, ident: str, channel_sessions: frozenset[str] = frozenset()) -> Session | None:
        """One session by CLI id, prior CLI id, sidecar id (``local_<id>``) or ``local_<cli>``;
        archived ones included. None when nothing names it."""
        if not ID_RE.match(ident):
            return None
        bare = _strip_local(ident)
        sidecars = [
            sc for sc in self.sidecars()
            if ident in _sidecar_ids(sc) or bare in _sidecar_ids(sc)
        ]
        ids = {ident, bare}
        for sc in sidecars:
            ids.update(i for i in (sc.cli_session_id, *sc.prior_cli_ids) if i)
        transcripts = self._find_transcripts(sorted(i for i in ids if not i.startswith("local_")))
        live = [s for s in self.live_sessions() if s.session_id in ids]
        for session in merge(transcripts, live, sidecars, channel_sessions):
            if ident == session.id or ident in session.aliases or bare == session.id:
                return session
        return None


def _sidecar_ids(sc: Sidecar) -> set[str]:
    ids = {sc.session_id, _strip_local(sc.session_id), *sc.prior_cli_ids}
    if sc.cli_session_id:
        ids.update({sc.cli_session_id, f"local_{sc.cli_session_id}"})
    ids.update(f"local_{p}" for p in sc.prior_cli_ids)
    return ids


def merge(
    transcripts: Iterable[Transcript], live: Iterable[LiveSession], sidecars: Iterable[Sidecar],
    channel_sessions: frozenset[str] = frozenset(),
) -> list[Session]:
    """Merge the three sources into sessions, newest first.

    A sidecar claims every transcript and live file named by its current or prior CLI ids;
    the sidecar's title and archive flag win; last activity is the newest of all sources.
    """
    parts: dict[str, _Parts] = {}
    owner: dict[str, str] = {}
    for sc in sidecars:
        key = sc.cli_session_id or _strip_local(sc.session_id)
        if key in parts:  # two sidecars naming one CLI session: keep the newer record
            old = parts[key].sidecar
            if old is not None and (old.last_activity_ms or 0) >= (sc.last_activity_ms or 0):
                continue
        parts[key] = _Parts(sidecar=sc)
        for ident in (sc.cli_session_id, *sc.prior_cli_ids):
            if ident:
                owner[ident] = key
    for t in transcripts:
        parts.setdefault(owner.get(t.session_id, t.session_id), _Parts()).transcripts.append(t)
    for s in live:
        key = owner.get(s.session_id, s.session_id)
        part = parts.setdefault(key, _Parts())
        if part.live is None or (s.started_ms or 0) > (part.live.started_ms or 0):
            part.live = s
    sessions = [session for key, part in parts.items() if (session := _session(key, part, channel_sessions))]
    sessions.sort(key=lambda s: -(s.last_activity_ms or 0))
    return sessions


def _of(record: Any, name: str) -> Any:
    """``record.name``, or None without a record (a session has any of a sidecar, transcripts, a live process)."""
    return getattr(record, name) if record is not None else None


def _session(key: str, part: _Parts, channel_sessions: frozenset[str]) -> Session | None:
    if not ID_RE.match(key):
        return None
    sc, live = part.sidecar, part.live
    # the transcript of the current id first, then the newest of the prior ones
    transcripts = sorted(part.transcripts, key=lambda t: (t.session_id != key, -t.mtime_ms))
    main = transcripts[0] if transcripts else None
    activity = [t.mtime_ms for t in transcripts] + [
        v for v in (_of(sc, "last_activity_ms"), _of(live, "updated_ms"), _of(live, "started_ms")) if v]
    inbox = live is not None and live.socket_path is not None and os.path.exists(live.socket_path)
    title, extra = retitled(_title(sc, main, live), _extra(key, sc, main, live, transcripts, inbox))
    return Session(
        address=f"{HARNESS}:{key}",
        harness=HARNESS,
        id=key,
        title=title,
        cwd=_safe(_of(main, "cwd") or _of(live, "cwd") or _of(sc, "cwd")),
        surface=(sc.surface if sc else "code",),
        loaded=live is not None,
        archived=bool(_of(sc, "archived")),
        last_activity_ms=max(activity) if activity else None,
        receive={"push": "inbox" if inbox else "channel" if key in channel_sessions else None, "nudge": "claude-hook", "pull": True},
        aliases=tuple(i for i in sorted(_sidecar_ids(sc)) if i != key and ID_RE.match(i)) if sc is not None else (),
        extra=extra,
    )


def _title(sc: Sidecar | None, main: Transcript | None, live: LiveSession | None) -> str | None:
    """The sidecar's title, else the transcript's, a name chosen for the live session, the first prompt, a derived name."""
    derived = _of(live, "name_source") == "derived"
    return (_of(sc, "title") or _of(main, "title") or (None if derived else _of(live, "name"))
            or _of(main, "first_prompt") or (_of(live, "name") if derived else None))


def _extra(key: str, sc: Sidecar | None, main: Transcript | None, live: LiveSession | None, transcripts: list[Transcript],
           inbox: bool) -> dict[str, Any]:
    """The session's ``extra``: the host's ids, where it was found, its transcript, creation, and its live process."""
    sources = ([f"sidecar:{sc.surface}"] if sc else []) + (["transcript"] if transcripts else []) + (["live"] if live else [])
    created = _of(sc, "created_ms") or _of(main, "created_ms") or _of(live, "started_ms")
    extra: dict[str, Any] = {
        "sessionId": sc.session_id if sc else f"local_{key}",
        "cliSessionId": sc.cli_session_id if sc else key,
        "sources": sources,
        "transcriptPath": _safe(main.path) if main else None,
        "createdAt": iso(created) if created else None,
        "entrypoint": _of(live, "entrypoint") or _of(main, "entrypoint"),
    }
    if sc is not None and sc.prior_cli_ids:
        extra["priorCliSessionIds"] = list(sc.prior_cli_ids)
    if sc is not None and sc.process_name:
        extra["processName"] = sc.process_name
    if live is not None:
        # name: what Claude sessions' ListAgents / SendMessage call it; liveStatus: idle | busy
        extra.update(pid=live.pid, liveStatus=live.status, name=live.name, inbox=inbox)
    return extra

