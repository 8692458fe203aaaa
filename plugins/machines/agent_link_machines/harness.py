"""The ``machines`` harness: the other machines' sessions, in this machine's listings.

It lists what the relay last read from the engine (``<state>/machines/directory.json``):
each session under its own address (``team:bob``, ``codex:<thread>``) with ``machine`` (the
machine that listed it), ``machineStale`` and ``machineAgeMs``. The listing is incomplete,
with the reason in its provider report, when a machine's listing is older than
``STALE_HEARTBEATS`` heartbeats or the relay's own copy is (relay stopped, engine
unreachable): never a silent partial list. It delivers nothing itself: mail to another
machine's session is sent by the relay (:mod:`agent_link_machines.plugin`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from agent_link_core.harness import Harness, SessionListing
from agent_link_core.model import Session

from agent_link_machines.common import NAME, URL_SETTING, check_url, listing_stale, machine_name, read_directory, read_status, relay_alive

_FIELDS = ("address", "harness", "id")


def _session(view: dict[str, Any], machine: str, stale: bool, age: int | None) -> Session | None:
    if not all(isinstance(view.get(k), str) for k in _FIELDS):
        return None
    last = view.get("lastActivityMs")
    return Session(
        address=view["address"], harness=view["harness"], id=view["id"],
        title=view.get("title") if isinstance(view.get("title"), str) else None,
        cwd=view.get("cwd") if isinstance(view.get("cwd"), str) else None,
        surface=tuple(str(s) for s in view.get("surface") or ()), loaded=view.get("loaded") if isinstance(view.get("loaded"), bool) else None,
        archived=bool(view.get("archived")), last_activity_ms=last if isinstance(last, int) else None,
        receive={"push": None, "nudge": None, "pull": True},
        extra={"machine": machine, "machineStale": stale, "machineAgeMs": age},
    )


def _relay_problem(status: dict[str, Any] | None, config: Any) -> tuple[str | None, list[str]]:
    """``(relay_not_running | engine_unreachable | None, its words)``: with either, every listing the relay copied is stale."""
    if not relay_alive(status, config):
        return "relay_not_running", ["this machine's relay is not running (agent-link machines status)"]
    if not (status or {}).get("reachable"):
        return "engine_unreachable", [f"the engine is unreachable ({(status or {}).get('error') or 'no answer'})"]
    return None, []


class MachinesHarness(Harness):
    """Sessions of the other machines, from the relay's copy of the engine's directory."""

    name = NAME

    async def list_sessions(self, *, include_archived: bool = False, limit: int = 200) -> SessionListing:
        config = self.app.config
        if not config.get(URL_SETTING):
            return SessionListing(provider={"available": True, "reason": None, "configured": False})
        directory, status = await asyncio.to_thread(lambda: (read_directory(config), read_status(config)))
        try:
            check_url(config.get(URL_SETTING))
            own = machine_name(config)
        except ValueError as exc:  # health names the setting; the listing says it cannot be trusted
            return SessionListing(provider={"available": False, "reason": "bad_setting", "detail": str(exc)}, complete=False)
        relay_problem, details = _relay_problem(status, config)
        problems = [relay_problem] if relay_problem else []
        machines: dict[str, Any] = {}
        sessions: list[Session] = []
        for name, entry in sorted(((directory or {}).get("machines") or {}).items()):
            if name == own or not isinstance(entry, dict):
                continue
            # one machine's old listing makes that machine's sessions stale, not the next machine's
            own_stale, age = listing_stale(entry, config)
            stale = relay_problem is not None or own_stale
            machines[name] = {"ageMs": age, "stale": stale, "sessions": len(entry.get("sessions") or ())}
            if own_stale:
                details.append(f"{name}'s listing is {'of unknown age' if age is None else f'{age // 1000} s old'}")
                if "machines_stale" not in problems:
                    problems.append("machines_stale")
            for view in entry.get("sessions") or ():
                found = _session(view, name, stale, age) if isinstance(view, dict) else None
                if found is not None and (include_archived or not found.archived):
                    sessions.append(found)
        sessions.sort(key=lambda s: -(s.last_activity_ms or 0))
        provider = {"available": not problems or problems == ["machines_stale"], "reason": ",".join(problems) or None,
                    "source": "engine directory", "machines": machines, **({"detail": "; ".join(details)} if details else {})}
        return SessionListing(sessions[:limit], provider, complete=not problems and len(sessions) <= limit)

    def health(self) -> dict[str, Any]:
        return {"configured": bool(self.app.config.get(URL_SETTING))}
