"""Which state directories agent-link processes on this machine used lately: two processes with
different ones keep two mailboxes, which health warns about until the other dir goes unused
for :data:`RECENT_MS`, is removed, or ``agent-link health --forget-state-dirs`` drops it. The record (advisory: a lost race
drops one entry until the next use) is ``$XDG_CACHE_HOME/agent-link/state-dirs.json``
(default ``~/.cache/agent-link``), ``{path: last use in ms since the epoch}``."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

from agent_link_core.json_files import read_json_object

RECENT_MS = 24 * 3600 * 1000  # "recently" for the health warning
REFRESH_MS = 60 * 1000


def registry_path(env: Mapping[str, str] | None = None) -> str:
    """The record's file (module docstring; ``env``: default ``os.environ``)."""
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".cache")
    return os.path.join(base, "agent-link", "state-dirs.json")


def _load(path: str) -> dict[str, int]:
    data = read_json_object(path) or {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, int)}


def record(state_dir: str, env: Mapping[str, str] | None = None, now_ms: int | None = None) -> None:
    """Note that ``state_dir`` is in use now (at most once a minute; a failed write is ignored)."""
    path = registry_path(env)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    known = _load(path)
    if now - known.get(state_dir, 0) < REFRESH_MS:
        return
    known[state_dir] = now
    from agent_link_core.errors import AgentLinkError
    from agent_link_core.json_files import write_json_object

    try:
        write_json_object(path, known)  # private like every file agent-link makes, whatever the umask
    except (OSError, AgentLinkError):
        pass


def forget_others(state_dir: str, env: Mapping[str, str] | None = None) -> list[str]:
    """Drop every state directory but ``state_dir`` from the record (``agent-link health
    --forget-state-dirs``; one still in use comes back with its next process): the paths dropped, sorted.

    :raises AgentLinkError: ``state_io_error`` when the record cannot be rewritten.
    """
    from agent_link_core.json_files import state_io_error, write_json_object

    path = registry_path(env)
    known = _load(path)
    dropped = sorted(p for p in known if p != state_dir)
    if dropped:
        try:
            write_json_object(path, {p: t for p, t in known.items() if p == state_dir})
        except OSError as exc:
            raise state_io_error(path, exc) from exc
    return dropped


def others(state_dir: str, env: Mapping[str, str] | None = None, now_ms: int | None = None) -> list[dict[str, object]]:
    """Other state directories used within :data:`RECENT_MS` that still exist (a removed one
    holds no mailbox anyone uses): ``[{path, lastUsedMs}]``, newest first."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    found = [{"path": p, "lastUsedMs": t} for p, t in _load(registry_path(env)).items()
             if p != state_dir and now - t <= RECENT_MS and os.path.isdir(p)]
    return sorted(found, key=lambda item: -int(item["lastUsedMs"]))  # type: ignore[call-overload]
