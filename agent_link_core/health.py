"""The health report of ``agent_link_health`` and ``agent-link health``."""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agent_link_core import __version__, boundary
from agent_link_core.boundary import RESULT_CHECKS, disable_hint
from agent_link_core.errors import AgentLinkError
from agent_link_core.store import disk_full

if TYPE_CHECKING:
    from agent_link_core.app import App
    from agent_link_core.model import Caller
    from agent_link_core.harness import Harness

_SECTION = RESULT_CHECKS["agent_link_health"]  # (name, a dict of JSON data of at most 64 KiB): a harness's and a watcher's sections too


def report(app: App, meta: Mapping[str, Any] | None = None, include_caller_context: bool = False) -> dict[str, Any]:
    """Whether agent-link works here: settings, state dir, database, harnesses, plugins and their problems (``meta``: the MCP
    call's ``_meta``)."""
    caller = app.caller(meta)
    try:
        pending = app.mailbox.count_open(caller.address, undelivered_only=True) if caller.known else 0
    except sqlite3.DatabaseError:  # reported by the integrity line below
        pending = None
    detection = host_detection(app, caller)
    try:
        private = os.stat(app.config.state_dir).st_mode & 0o077 == 0  # only the owner can enter it
    except OSError:
        private = False
    refusal = app.read_only or disk_full(app.config.db_path)  # also a disk that filled after the database opened
    if (full := refusal is not None and refusal.details.get("reason") == "disk_full"):  # said as the state: health stores nothing
        refusal = AgentLinkError(refusal.code, f"The disk holding the agent-link database {app.config.db_path} is full; "
                                 "every write is refused until space is freed there.", refusal.details, hint=refusal.hint)
    out: dict[str, Any] = {
        "version": __version__,
        "host": detection["host"],
        "hostDetection": detection,
        "address": caller.address,
        "addressSource": caller.source,
        "stateDir": {"path": app.config.state_dir, "source": app.config.sources["AGENT_LINK_STATE_DIR"],
                     "exists": os.path.isdir(app.config.state_dir), "private": private,
                     "writable": os.access(app.config.state_dir, os.W_OK | os.X_OK) and not full},
        "database": {"path": app.config.db_path, "pendingForCaller": pending, **app.store.check_health(),
                     **({"ok": False, "readOnly": True, "problem": refusal.to_dict()} if refusal else {})},
        "env": app.config.env_report(),
        "settings": {
            "file": app.config.settings_file,
            # where each setting not at its default came from: a variable's name or settings-file
            "sources": {name: src for name, src in app.config.sources.items() if src != "default"},
        },
        "reminders": {"limit": app.config.reminder_limit, "intervalMs": app.config.reminder_interval_ms},
        "harnesses": {name: _harness_health(app, h) for name, h in list(app.harnesses.items())},
        "mcp": _connection_view(app),
        "sections": app.hooks.health_sections(),
    }
    out["plugins"] = plugins_view(app)
    out["problems"] = section_problems(out["sections"]) + plugin_problems(out["plugins"])
    if out["stateDir"]["exists"] and not out["stateDir"]["private"]:
        # left as it is (it may be shared on purpose), but said, with the command that fixes it
        out["stateDir"]["warning"] = {
            "code": "state_dir_not_private", "message": "other users can open the state dir, where the mailbox is",
            "hint": f"Run `chmod 700 {shlex.quote(app.config.state_dir)}` unless it is shared on purpose."}
    if detection["source"] == "AGENT_LINK_HOST" and detection["host"] not in app.harnesses.declared():
        # a misspelt host picks no harness first and lists tools for a host nobody serves: said, not silently used
        known = ", ".join(sorted(app.harnesses.declared())) or "none is installed"
        out["hostDetection"]["warning"] = {
            "code": "unknown_host", "message": f"AGENT_LINK_HOST names {detection['host']!r}, which no installed harness serves",
            "hint": f"Set it to one of the installed harnesses ({known}) or unset it."}
    if include_caller_context:
        out["callerContext"] = {"meta": json.loads(json.dumps(meta or {}, default=str)), "source": caller.source}
    return out


def _connection_view(app: App) -> dict[str, Any] | None:
    """The MCP connection (revision, client) as the plugin watching it shows it; None outside an MCP server or unwatched."""
    if app.mcp_connection is None:
        return None
    plugin, peer = app.mcp_connection
    return app.hooks.boundary.call(plugin, "agent_link_mcp_connection.view", lambda: peer.view(), check=lambda r, _: _SECTION(("mcp", r), _))


def section_problems(sections: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What the plugins' health sections say needs the person: ``[{section, message, hint}]``, from a section's ``problem``
    (a line, or ``{message, hint}``) or ``error`` object (a plain string is a failed hook, under ``plugins.problems``)."""
    out: list[dict[str, Any]] = []
    for name, section in sections.items():
        if not isinstance(section, dict):
            continue
        problem, error = section.get("problem"), section.get("error")
        if isinstance(problem, str) and problem:
            out.append({"section": name, "message": problem, "hint": None})
        for found in (problem, error):
            if isinstance(found, dict) and isinstance(found.get("message"), str):
                out.append({"section": name, "message": found["message"], "hint": found.get("hint")})
    return out


def plugin_problems(plugins: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every broken plugin in :func:`plugins_view`'s answer, one ``{section: "plugins", plugin, message, hint}`` per fault:
    left out (``failed``), of this process, met by other processes (``elsewhere``: one per hook, its latest error and how
    many processes met it); health is not ok while any is."""
    out = [{"section": "plugins", "plugin": name, "message": f"left out: {reason}", "hint": disable_hint(name)}
           for name, reason in plugins["failed"].items()]
    out += [{"section": "plugins", "plugin": p["plugin"], "message": f"{p['hook']}: {p['error']} ({p['count']}x)", "hint": p["fix"]}
            for p in plugins["problems"] if not (p["disabled"] and p["plugin"] in plugins["failed"])]  # else said above
    seen: dict[tuple[str, str], list[Any]] = {}
    for p in plugins["elsewhere"]:  # one line per hook, however many processes met it, whatever each said: the latest error
        seen.setdefault((p["plugin"], p["hook"]), []).append(p)
    counted = [(key, entries[-1], len({e.get("pid") for e in entries})) for key, entries in seen.items()]  # oldest first
    return out + [{"section": "plugins", "plugin": plugin, "hint": last.get("fix"), "message": f"{hook}: {last['error']} (in "
                   f"{n} other process{'es' if n > 1 else ''} in the last day)"} for (plugin, hook), last, n in counted]


def plugins_view(app: App) -> dict[str, Any]:
    """What loading found, this process's plugin problems and those other processes met in the last day (``elsewhere``:
    :func:`agent_link_core.boundary.recent_elsewhere`), less the plugins ``AGENT_LINK_DISABLE_PLUGINS`` turned off since.
    Imports every plugin and collects every tool first: one that cannot be imported or a refused tool is a problem."""
    app.hooks.load_all()
    app.hooks.tools()
    view = app.hooks.as_dict()
    installed = app.hooks.installed(app.env)
    view["elsewhere"] = [e for e in boundary.recent_elsewhere(app.config.state_dir, view["problems"], installed)
                         if e["plugin"] not in view["blocked"]]
    if unknown := [name for name in view["blocked"] if name not in installed]:  # a misspelt name disables nothing: said
        view["warning"] = {"code": "unknown_disabled_plugin",
                           "message": f"AGENT_LINK_DISABLE_PLUGINS names {', '.join(unknown)}, which no installed plugin is called",
                           "hint": f"Plugin names (exact case): {', '.join(sorted(set(installed) - {boundary.CORE_PLUGIN}))}."}
    return view


def _harness_health(app: App, harness: Harness) -> dict[str, Any]:
    from agent_link_core.harness import call_harness

    # checked as a plugin's (name, section): the boundary checks only answers other than None, and None is no section either
    answer = call_harness(app.hooks, harness, "health", lambda: (harness.name, harness.health()), check=_SECTION)
    return {"error": "this harness's health failed; see plugins.problems"} if answer is None else answer[1]


def host_detection(app: App, caller: Caller) -> dict[str, Any]:
    """Which host this process serves and what decided it: ``AGENT_LINK_HOST``, else the first harness (by
    ``host_priority``) whose ``host_variables`` are set, else the caller's harness.
    ``{"host", "source": "AGENT_LINK_HOST"|"environment"|"caller"|"none", "variable"}`` (its name, never its value)."""
    configured = app.config.get("AGENT_LINK_HOST")
    if configured:
        return {"host": configured, "source": "AGENT_LINK_HOST", "variable": "AGENT_LINK_HOST"}
    for harness in sorted(app.harnesses.declared().values(), key=lambda h: (h.host_priority, h.name)):
        for variable in harness.host_variables:
            if app.env.get(variable):
                return {"host": harness.name, "source": "environment", "variable": variable}
    if caller.host:
        return {"host": caller.host, "source": "caller", "variable": None}
    return {"host": None, "source": "none", "variable": None}
