"""Plugin problems seen by other agent-link processes, in ``<state dir>/plugin-problems.json``.

A hook failing inside an MCP server may never run in the process of ``agent-link health``, so
each process appends the first occurrence of each runtime problem (with the plugin's version),
and health lists the last day's it did not see itself, of plugins still installed at that
version. Best effort: losing an entry only loses a diagnostic.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

from agent_link_core.json_files import read_json_object, write_json_object

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

FILE_NAME = "plugin-problems.json"
KEEP = 50
RECENT_S = 24 * 3600
#: how the problem of a hook interrupted after the budget begins
HUNG = "did not return within"
#: a hook that hung is skipped by every process of the state dir for this long (s), then tried again
HUNG_SKIP_S = 600


def _path(state_dir: str) -> str:
    return os.path.join(state_dir, FILE_NAME)


def read(state_dir: str) -> list[dict[str, Any]]:
    """Every kept entry (``{plugin, hook, error, fix, disabled, at (epoch s), pid, version?}``)."""
    entries = (read_json_object(_path(state_dir)) or {}).get("problems")
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def append(state_dir: str, problem: dict[str, Any], version: str | None = None) -> None:
    """Add one problem, stamped with the time, this pid and ``version``; keeps the newest :data:`KEEP`."""
    if not os.path.isdir(state_dir):
        return
    entries = read(state_dir)
    entries.append({**{k: problem[k] for k in ("plugin", "hook", "error", "fix", "disabled")}, "at": int(time.time()),
                    "pid": os.getpid(), **({"version": version} if version is not None else {})})
    write_json_object(_path(state_dir), {"problems": entries[-KEEP:]})


def recent_elsewhere(state_dir: str, seen_here: list[dict[str, Any]],
                     installed: Mapping[str, str | None]) -> list[dict[str, Any]]:
    """Entries of the last day from other processes that this process has not seen itself, of
    plugins still installed at the version that had the problem.

    :param installed: ``{plugin name: version or None (not known)}`` of every plugin installed
        now, loaded or not; an entry or a plugin without a version matches any version.
    """
    mine = {(p["plugin"], p["hook"], p["error"]) for p in seen_here}
    cutoff = time.time() - RECENT_S
    return [e for e in read(state_dir)
            if e.get("pid") != os.getpid() and isinstance(e.get("at"), int) and e["at"] >= cutoff
            and (e.get("plugin"), e.get("hook"), e.get("error")) not in mine
            and isinstance(e.get("plugin"), str) and e["plugin"] in installed
            and e.get("version") in (None, installed[e["plugin"]] or e.get("version"))]  # either unknown, or equal


def hung_lately(state_dir: str) -> list[dict[str, Any]]:
    """Entries of hooks interrupted after the hook budget (:data:`HUNG`) by any process in the
    last :data:`HUNG_SKIP_S` (one ``stat`` when no problem was ever kept)."""
    if not os.path.exists(_path(state_dir)):
        return []
    cutoff = time.time() - HUNG_SKIP_S
    return [e for e in read(state_dir) if isinstance(e.get("error"), str) and e["error"].startswith(HUNG)
            and isinstance(e.get("at"), int) and e["at"] >= cutoff and isinstance(e.get("plugin"), str) and isinstance(e.get("hook"), str)]
