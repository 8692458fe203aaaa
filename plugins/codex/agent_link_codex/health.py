"""The Codex harness's health section: the Codex binary and its version, the endpoints and
connections, the private app-server, delivery into threads another program holds, and the
prompt hook's trust as Codex reports it (``hooks/list``)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agent_link_core.store import now_ms

from agent_link_codex.endpoints import explicit
from agent_link_codex.settings import VERIFIED_CODEX_VERSION, codex_home

if TYPE_CHECKING:  # annotations only
    from agent_link_codex.harness import CodexHarness
    from agent_link_codex.service import CodexService

def desktop_push_view(harness: CodexHarness, installed: str | None) -> dict[str, Any]:
    """``desktopPush``: the push mode for threads another program holds, the versions it
    was verified on, what the holder check can do on this platform, and ``rolloutChecks``
    (how the checks before pushes in this process went, see :class:`Deliverer`)."""
    values = harness.values
    mode = values.get("AGENT_LINK_CODEX_DESKTOP_PUSH") or "mailbox-only"
    refused = mode == "shared-daemon" and not explicit(values)
    warnings = []
    if installed is not None and installed != VERIFIED_CODEX_VERSION:
        warnings.append({"code": "codex_version_differs",
                         "message": f"Codex {installed} is installed; agent-link was verified against {VERIFIED_CODEX_VERSION}, "
                                    "so delivery into threads another program holds is unverified here."})
    if refused:
        warnings.append({"code": "desktop_push_override_refused",
                         "message": "AGENT_LINK_CODEX_DESKTOP_PUSH=shared-daemon needs AGENT_LINK_CODEX_URL or _SOCK; mailbox-only applies."})
    return {
        "mode": "mailbox-only" if refused else mode,
        "requested": mode,
        "source": harness.app.config.sources.get("AGENT_LINK_CODEX_DESKTOP_PUSH", "default") if harness.app is not None else "default",
        "refused": refused,
        "verifiedCodexVersion": VERIFIED_CODEX_VERSION,
        "installedCodexVersion": installed,
        "heldSignal": "rollout-open-elsewhere",
        "turnCompletedMethod": "turn/completed",
        "holderCheck": holder_check_view(),
        "rolloutChecks": {**harness.deliverer.rollout_checks, "skipped": dict(harness.deliverer.rollout_checks["skipped"])},
        "warnings": warnings,
    }


def health_view(harness: CodexHarness) -> dict[str, Any]:
    """:meth:`CodexHarness.health <agent_link_codex.harness.CodexHarness.health>`'s answer:
    endpoints, connections, the private app-server, the version probe, desktop push and the
    prompt hook's trust. May raise (the harness turns that into an ``error`` entry)."""
    from agent_link_codex.managed import ManagedError, find_codex

    values = harness.values
    service = harness.service
    candidates, problems = service.candidates()
    try:
        launcher = find_codex(values, harness.env)
        binary: dict[str, Any] = {"found": True, "path": launcher.path, "source": launcher.source}
    except ManagedError as exc:
        binary = {"found": False, "reason": exc.reason, "searched": exc.searched}
    from agent_link_hostkit.hook_runs import last_runs

    last = last_runs(harness._state_dir) if harness._state_dir else {}
    probe = harness._version_probe or {"probed": False, "installed": None, "reason": "not_probed"}
    desktop = desktop_push_view(harness, probe.get("installed"))
    return {
        "codexHome": str(codex_home(harness.env)),
        "autoStart": bool(values.get("AGENT_LINK_CODEX_AUTOSTART", True)),
        "explicitEndpoint": explicit(values),
        "transport": values.get("AGENT_LINK_CODEX_TRANSPORT"),
        "idleMs": values.get("AGENT_LINK_CODEX_IDLE_MS"),
        "version": {**probe, "verified": VERIFIED_CODEX_VERSION},
        "versionProbed": bool(probe.get("probed")),
        "startAppServer": (harness._health_options or {}).get("startAppServer"),
        "connectError": harness._health_connect_error,
        "desktopPush": desktop,
        "warnings": list(desktop["warnings"]),
        "reminderTurns": bool(values.get("AGENT_LINK_CODEX_REMINDERS", True)),
        "endpoints": {"candidates": [ep.view() for ep in candidates], "lastProbe": service.endpoint_reports(),
                      "problems": problems},
        "connections": [ln.view() for ln in service.live_links()],
        "managed": {**service.managed.view(), "lastError": service.managed_error,
                    "failureCached": _cached(service)},
        "binary": binary,
        "promptHook": prompt_hook_view(fresh_hooks(candidates), last.get("codex-UserPromptSubmit")),
    }


VERSION_RE = re.compile(r"(\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]+)?)")
VERSION_TIMEOUT_S = 10.0


def probe_version(values: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """``<codex> --version`` of the Codex agent-link would run: ``{probed, installed, path,
    source, reason}``; ``installed`` is None when it cannot be told (no binary, an
    ``AGENT_LINK_CODEX_APP_SERVER_BIN`` program, no version in the output)."""
    from agent_link_codex.managed import ManagedError, find_codex

    import subprocess

    try:
        launcher = find_codex(values, env)
    except ManagedError as exc:
        return {"probed": False, "installed": None, "path": None, "source": None, "reason": exc.reason}
    base = {"path": launcher.path, "source": launcher.source}
    if launcher.source == "AGENT_LINK_CODEX_APP_SERVER_BIN":
        return {**base, "probed": False, "installed": None, "reason": "app_server_bin_has_no_version_flag"}
    try:
        done = subprocess.run([launcher.path, "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S, check=False,
                              env=dict(env), stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {**base, "probed": True, "installed": None, "reason": type(exc).__name__}
    found = VERSION_RE.search(done.stdout or "")
    return {**base, "probed": True, "installed": found.group(1) if found else None,
            "reason": None if found else "no_version_in_output"}


def holder_check_view() -> dict[str, Any]:
    """How this platform can tell whether another process holds a thread's transcript:
    ``{method: psutil|lsof|None, platform, available}`` (see :func:`rollouts.rollout_holders`)."""
    from agent_link_codex import rollouts

    import shutil
    import sys

    import psutil

    method: str | None = None
    try:
        psutil.Process().open_files()
        method = "psutil"
    except (psutil.Error, OSError, NotImplementedError):
        if any(shutil.which(p) for p in rollouts.LSOF_PATHS):
            method = "lsof"
    return {"method": method, "platform": sys.platform, "available": method is not None}


def _cached(service: CodexService) -> dict[str, str] | None:
    failure = service.managed.cached_failure(service.managed.directory)
    return {"reason": failure[0], "detail": failure[1][:300]} if failure else None


# the shipped hook runs `... hook codex UserPromptSubmit` (hooks/codex-hooks.json); Codex lists
# plugin hook commands with ${PLUGIN_ROOT} already expanded
HOOK_COMMAND_MARK = "hook codex UserPromptSubmit"


def fresh_hooks(candidates: list[Any]) -> list[dict[str, Any]]:
    """``hooks/list`` answers asked now of every reachable candidate endpoint, each on a
    connection of its own (:mod:`agent_link_codex.lookup`; nothing is started): trust changes
    (a hook trusted, or reported modified after a reinstall) show at once, not once per
    connection. Blocks up to a few seconds when an endpoint hangs."""
    from agent_link_codex import lookup

    if not candidates:
        return []
    cwd = os.getcwd()
    sightings = lookup.run_blocking(lambda: lookup.probe_all(candidates, hooks_cwd=cwd))
    return [s.hooks for s in sightings if s.hooks is not None]


def prompt_hook_view(listed: list[dict[str, Any]], last_run_ms: int | None) -> dict[str, Any]:
    """The prompt hook as Codex sees it: declared (found by ``hooks/list``), its trust state
    (trusted, untrusted, modified, managed; not_installed; unknown when no app-server answered).

    :param listed: ``hooks/list`` answers, one per app-server asked (:func:`fresh_hooks`).
    """
    view: dict[str, Any] = {"declared": False, "trust": "unknown", "entries": [], "lastRunAt": last_run_ms,
                            "readAt": now_ms() if listed else None, "trustSource": None, "source": None, "pluginId": None,
                            "enabled": None, "event": "UserPromptSubmit"}
    if not listed:
        view["hint"] = "Trust is read from Codex (hooks/list) when a Codex app-server answers; none did."
        return view
    for answer in listed:
        for entry in answer.get("data") or []:
            for hook in entry.get("hooks") or []:
                if hook.get("eventName") == "userPromptSubmit" and HOOK_COMMAND_MARK in str(hook.get("command") or ""):
                    view["entries"].append({k: hook.get(k) for k in ("key", "source", "pluginId", "enabled", "trustStatus", "sourcePath")})
    if not view["entries"]:
        view["trust"] = "not_installed"
        view["hint"] = "Install the agent-link Codex plugin (`agent-link install codex`) and trust its hook with /hooks in Codex."
        return view
    view["declared"] = True
    view["trustSource"] = "hooks/list"  # what Codex itself reports, not a guess from files
    first = view["entries"][0]
    view.update(source=first.get("source"), pluginId=first.get("pluginId"), enabled=first.get("enabled"))
    states = [e["trustStatus"] for e in view["entries"]]
    view["trust"] = "trusted" if "trusted" in states else "managed" if "managed" in states else states[0] or "unknown"
    if view["trust"] in ("untrusted", "modified"):
        view["hint"] = "Codex skips untrusted hooks silently: review and trust the agent-link hook with /hooks in Codex."
    return view
