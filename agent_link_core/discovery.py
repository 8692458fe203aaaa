"""The ``agent_link`` entry points, read from a small cache instead of scanning every distribution
(:mod:`importlib.metadata` imports about forty modules): docs/plugins.md, section 1. With :data:`USE_CACHE`
off (in-process callers) every call scans. Standard modules only: this runs before anything heavy."""

from __future__ import annotations

import importlib
import os
import sys
import types
import zlib
from functools import reduce

from agent_link_core.json_files import mtime_ns, read_json_object, write_json_object

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

#: the cache file's format; a file of another format is rebuilt
FORMAT = 2
#: read the entry points from the cache (the console script sets it; in-process callers scan)
USE_CACHE = False
FRONT_GROUP = "agent_link_mcp_front"
START_GROUP = "agent_link_mcp_start"
#: hermetic runs (tests): when set, only these plugins load (comma or space separated; empty: none)
LOAD_ONLY_ENV = "AGENT_LINK_LOAD_PLUGINS"
_front: list[Any] = []  # the front of this process once looked up: [object or None]


class CachedEntryPoint:
    """An entry point read from the cache, loaded as :meth:`importlib.metadata.EntryPoint.load` does.

    :param value: ``"package.module"`` or ``"package.module:attribute.path"``.
    :param version: its distribution's version, kept as ``dist.version``; None: ``dist`` is None.
    """

    def __init__(self, name: str, value: str, version: str | None) -> None:
        self.name = name
        self.value = value
        self.dist = types.SimpleNamespace(version=version) if version is not None else None

    def load(self) -> Any:
        """The module (or attribute) the value names, imported now. :raises Exception: as importing does."""
        module, _, attrs = self.value.partition(":")
        return reduce(getattr, [a for a in attrs.strip().split(".") if a], importlib.import_module(module.strip()))


def cache_path(env: Mapping[str, str] | None = None) -> str:
    """The cache file of this Python environment and search path."""
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    # one file per interpreter and search path: ``agent-link`` and ``python -m`` differ in sys.path[0]
    where = "\0".join([sys.prefix, *sys.path]).encode("utf-8", "surrogateescape")
    key = f"{zlib.crc32(where):08x}"
    return os.path.join(base, "agent-link", "entry-points", f"{key}.json")


def fingerprint(files: list[str]) -> list[Any]:
    """What decides the group's entry points, JSON-comparable: the interpreter prefix, the names and mtimes of
    the distribution folders (``*.dist-info``, ``*.egg-info``) in each ``sys.path`` entry, and the mtimes of
    ``files`` (the cached ``entry_points.txt`` files). Not a folder's own mtime: a busy current directory
    (``python -m``) would miss the cache on every call."""
    return [FORMAT, sys.prefix, [[entry, _distributions(entry or ".")] for entry in sys.path],
            [[f, mtime_ns(f)] for f in files]]


def _distributions(entry: str) -> Any:
    """``[[name, mtime], ...]`` of ``entry``'s metadata folders (``EGG-INFO`` too); a zip or a missing entry: its mtime or None."""
    try:
        with os.scandir(entry) as children:
            return sorted([child.name, child.stat().st_mtime_ns] for child in children
                          if child.name.lower().endswith((".dist-info", ".egg-info")) or child.name == "EGG-INFO")
    except OSError:
        return mtime_ns(entry)


def entry_points(group: str, env: Mapping[str, str] | None = None) -> list[Any]:
    """The entry points of ``group`` (``name``, ``dist.version``, ``load()``): with :data:`USE_CACHE`,
    the cached list while its fingerprint holds, else a scan that rewrites the cache."""
    if not USE_CACHE:
        import importlib.metadata

        return list(importlib.metadata.entry_points(group=group))
    path = cache_path(env)
    data = read_json_object(path)
    cached = (data or {}).get(group)
    if isinstance(cached, dict) and isinstance(files := cached.get("files"), list) and cached.get("fingerprint") == fingerprint(files):
        try:
            return [CachedEntryPoint(str(n), str(v), None if ver is None else str(ver)) for n, v, ver in cached["entry_points"]]
        except (KeyError, TypeError, ValueError):
            pass  # a damaged file: scan and rewrite it
    return _scan_and_write(group, path, data)


def chosen(env: Mapping[str, str]) -> tuple[set[str], set[str] | None]:
    """``(names AGENT_LINK_DISABLE_PLUGINS turns off, names AGENT_LINK_LOAD_PLUGINS keeps or None: every plugin)``,
    each comma or space separated."""
    listed = env.get(LOAD_ONLY_ENV)
    return set(env.get("AGENT_LINK_DISABLE_PLUGINS", "").replace(",", " ").split()), (
        None if listed is None else set(listed.replace(",", " ").split()))


def mcp_front(start: bool = False) -> Any:
    """The MCP start-up front of :data:`FRONT_GROUP` (docs/plugins.md, "The MCP start-up front"), loaded once per
    process, started on the first call when ``start``; None when there is none or it fails (one stderr line says so)."""
    if not _front:
        _front.append(None)
        out, sys.stdout = sys.stdout, sys.stderr  # stdout is the MCP transport: what the code prints goes to stderr
        for ep in sorted(entry_points(FRONT_GROUP), key=lambda ep: ep.name)[:1]:
            try:
                front = ep.load()
                if missing := [n for n in ("start", "stdio_server", "stop_learning", "finish") if not callable(getattr(front, n, None))]:
                    raise TypeError(f"it has no {', '.join(missing)}")
                if start:
                    front.start()
                _front[0] = front
            except (Exception, SystemExit) as exc:  # the declaring distribution's fault: serve without it
                _say(f"the MCP start-up front {ep.name!r} ({ep.value}) is not used", exc)
        sys.stdout = out
    return _front[0]


def mcp_start(env: Mapping[str, str] | None = None) -> None:
    """Call the callables of :data:`START_GROUP` in name order, the plugins :func:`chosen` leaves out of ``env`` skipped
    (docs/plugins.md, "The MCP start-up front"); one that fails to load or raises gets one stderr line, nothing more."""
    blocked, only = chosen(os.environ if env is None else env)
    out, sys.stdout = sys.stdout, sys.stderr  # stdout is the MCP transport
    for ep in sorted(entry_points(START_GROUP), key=lambda ep: ep.name):
        if ep.name in blocked or (only is not None and ep.name not in only):
            continue
        try:
            ep.load()()
        except (Exception, SystemExit) as exc:  # the declaring distribution's fault: start without it
            _say(f"the MCP start-up work {ep.name!r} ({ep.value}) failed", exc)
    sys.stdout = out


def _say(what: str, exc: BaseException) -> None:
    """One stderr line: ``what`` and ``exc`` (at most 500 characters; a closed stderr is passed over)."""
    try:
        sys.stderr.write(f"agent-link: {what}: {type(exc).__name__}: {exc}"[:500] + "\n")
    except (OSError, ValueError):
        pass


def _dist_info_entry_points(group: str) -> tuple[list[Any], list[str]] | None:
    """``group``'s entry points and the ``entry_points.txt`` files they came from, read from the ``*.dist-info`` and
    ``*.egg-info`` folders on ``sys.path`` as :mod:`importlib.metadata` finds them (path order, the first distribution
    of a name wins), without importing it (a first command in a new cache dir paid 20 ms for it); None when a path
    entry holds what only it reads (a zip, an egg)."""
    seen: set[str] = set()
    found: list[Any] = []
    files: set[str] = set()
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except NotADirectoryError:
            return None
        except OSError:
            continue
        for name in names:
            stem, _, suffix = name.rpartition(".")
            if name == "EGG-INFO":
                return None
            dist, _, version = stem.partition("-")
            key = "_".join(dist.replace("-", "_").replace(".", "_").lower().split("_"))
            if suffix.lower() not in ("dist-info", "egg-info") or key in seen:
                continue
            seen.add(key)
            folder = os.path.join(entry or ".", name)
            version = version.partition("-")[0] or next(  # an egg-info folder's name may carry no version
                (line[8:].strip() for line in _lines(os.path.join(folder, "PKG-INFO")) if line.startswith("Version:")), "")
            section = None
            for line in _lines(os.path.join(folder, "entry_points.txt")):
                if line.startswith("[") and line.endswith("]"):
                    section = line[1:-1].strip()
                elif section == group and "=" in line and not line.startswith(("#", ";")):
                    ep_name, _, value = line.partition("=")
                    found.append(CachedEntryPoint(ep_name.strip(), value.strip(), version or None))
                    files.add(os.path.join(folder, "entry_points.txt"))
    return found, sorted(files)


def _lines(path: str) -> list[str]:
    """The stripped lines of the UTF-8 text file ``path``; none when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as handle:
            return [line.strip() for line in handle]
    except (OSError, ValueError):
        return []


def _scan_and_write(group: str, path: str, data: dict[str, Any] | None = None) -> list[Any]:
    """Scan ``group`` into the cache, keeping the other groups of ``data`` (the file as read)."""
    from agent_link_core.errors import AgentLinkError

    # importlib.metadata already imported costs nothing, and it is what any patch of it (a test kit's) patches
    scanned = None if "importlib.metadata" in sys.modules else _dist_info_entry_points(group)
    if scanned is None:
        import importlib.metadata

        found: list[Any] = list(importlib.metadata.entry_points(group=group))
        # a PathDistribution's _path is its dist-info folder
        files = sorted({os.path.join(str(ep.dist._path), "entry_points.txt") for ep in found
                        if getattr(ep.dist, "_path", None) is not None})
    else:
        found, files = scanned
    records = [[ep.name, ep.value, ep.dist.version if ep.dist is not None else None] for ep in found]
    try:  # atomically, private to the user; a failure only means the next run scans
        write_json_object(path, {**(data or {}), group: {"fingerprint": fingerprint(files), "files": files, "entry_points": records}})
    except (OSError, AgentLinkError):
        pass
    return found
