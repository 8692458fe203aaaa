"""When each host's prompt hooks last ran, for a host plugin's health: ``agent-link hook <host> <event>`` leaves
``<state dir>/hooks/<host>-<event>.last`` holding epoch ms (``HookContext.heartbeat`` in ``agent_link_core/hook.py``)."""

from __future__ import annotations

import os


def last_runs(state_dir: str | os.PathLike[str]) -> dict[str, int]:
    """``{"<host>-<event>": epoch ms}`` of the last run of each hook; unreadable files are left out, no folder gives ``{}``."""
    out: dict[str, int] = {}
    beat_dir = os.path.join(state_dir, "hooks")
    for name in os.listdir(beat_dir) if os.path.isdir(beat_dir) else ():
        if not name.endswith(".last"):
            continue
        try:
            with open(os.path.join(beat_dir, name), encoding="ascii") as fh:
                out[name[: -len(".last")]] = int(fh.read() or 0)
        except (OSError, ValueError):
            continue
    return out
