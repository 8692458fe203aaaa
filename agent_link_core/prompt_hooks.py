"""Which module answers a host's prompt hooks, found without loading the plugins.

``agent-link hook <harness> <event>`` runs on every prompt, so the adapters plugins register
(``agent_link_register_prompt_hooks``) are kept in a registry file,
``<state dir>/prompt-hooks/<environment key>.json`` (one per Python environment), with a
fingerprint of what decides which plugins load: the interpreter prefix, the disabled plugins
and the modification time of each ``sys.path`` directory (installing a distribution changes
one). When the fingerprint differs, the registry is rebuilt through the plugin manager before
anything runs, so a removed or disabled plugin's adapter never runs.

Imported by the hook fast path: standard modules only, annotations stay strings.
"""

from __future__ import annotations

import os
import sys
import zlib

from agent_link_core.addresses import is_module_path
from agent_link_core.json_files import read_json_object

TYPE_CHECKING = False  # keep typing out of the fast path
if TYPE_CHECKING:
    from typing import Any

#: the registry file's format version; a file of another version is rebuilt
FORMAT = 1
#: the budget (ms) of each plugin call while the hook rebuilds the registry (the host waits 5 s at most)
REBUILD_BUDGET_MS = 2000


def disabled_names(env: Any = None) -> list[str]:
    """Plugin names in ``AGENT_LINK_DISABLE_PLUGINS``, sorted, and ``=only:<names>`` when
    ``AGENT_LINK_LOAD_PLUGINS`` names the only plugins to load."""
    source = os.environ if env is None else env
    raw = source.get("AGENT_LINK_DISABLE_PLUGINS", "")
    names = sorted({part for part in raw.replace(",", " ").split() if part})
    only = source.get("AGENT_LINK_LOAD_PLUGINS")
    if only is not None:
        names.append("=only:" + ",".join(sorted({p for p in only.replace(",", " ").split() if p})))
    return names


def registry_path(state_dir: str) -> str:
    """The registry file of this Python environment inside ``state_dir``."""
    key = f"{zlib.crc32(sys.prefix.encode('utf-8', 'surrogateescape')):08x}"
    return os.path.join(state_dir, "prompt-hooks", f"{key}.json")


def fingerprint(disabled: list[str]) -> list[Any]:
    """What decides which plugins load, as JSON-comparable lists (see the module doc); the
    current directory (``python -c`` / ``-m`` put it first on ``sys.path``) is left out."""
    entries = sys.path[1:] if sys.path and sys.path[0] in ("", os.getcwd()) else sys.path
    dirs = []
    for entry in entries:
        try:
            dirs.append([entry, os.stat(entry).st_mtime_ns])
        except OSError:
            dirs.append([entry, None])
    return [FORMAT, sys.prefix, disabled, dirs]


def adapter_module(state_dir: str, harness: str, env: Any = None) -> str | None:
    """The module that answers ``harness``'s prompt hooks, or None when no loaded plugin has one.

    :param state_dir: agent-link's state directory (the registry lives under it).
    :param harness: the harness name from the command line.
    :param env: the environment to read ``AGENT_LINK_DISABLE_PLUGINS`` from (default: process).
    :raises Exception: whatever rebuilding the registry raises (the hook fails open).
    """
    disabled = disabled_names(env)
    path = registry_path(state_dir)
    current = fingerprint(disabled)
    data = read_json_object(path)
    if data is None or data.get("fingerprint") != current:
        data = rebuild(path, current, env)
    entry = data.get("adapters", {}).get(harness)
    if not isinstance(entry, dict) or entry.get("plugin") in disabled:
        return None
    module = entry.get("module")
    return module if is_module_path(module) else None


def rebuild(path: str, current: list[Any], env: Any = None) -> dict[str, Any]:
    """Collect the adapters of the plugins that load now and write the registry. An adapter
    counts only when its plugin passes every start-up registration (:func:`registered`, run
    with just the core and the plugins that have adapters, within :data:`REBUILD_BUDGET_MS`).

    :returns: the registry, also when the file could not be written (rebuilt next time).
    """
    from agent_link_core.boundary import TIMEOUT_ENV, timeout_from_env
    from agent_link_core.plugins import DEFAULT_PLUGINS, Hooks, build_plugin_manager

    env = dict(os.environ if env is None else env)
    budget = timeout_from_env(env)
    env[TIMEOUT_ENV] = str(REBUILD_BUDGET_MS if budget == 0 else min(budget, REBUILD_BUDGET_MS))
    hooks = Hooks(build_plugin_manager(env=env)[0])
    hooks.only({*DEFAULT_PLUGINS, *(plugin for _, plugin in hooks.prompt_hooks().values())})
    data = {"fingerprint": current, "adapters": registered(hooks)}
    write(path, data)
    return data


def registered(hooks: Any) -> dict[str, dict[str, str]]:
    """``{harness: {"module", "plugin"}}`` of the adapters whose plugins pass every start-up
    registration (run first, or read when this process ran them)."""
    hooks.harnesses(), hooks.settings(), hooks.migrations(), hooks.tools()
    return {hook.harness: {"module": hook.module, "plugin": plugin} for hook, plugin in hooks.prompt_hooks().values()}


def refresh(state_dir: str, hooks: Any, env: Any = None) -> None:
    """Rewrite the registry from ``hooks`` (the process's
    :class:`~agent_link_core.plugins.Hooks`) when it differs: the MCP server does it at start,
    so the first prompt pays no rebuild and a plugin that only overran the hook's budget comes back."""
    path = registry_path(state_dir)
    data = {"fingerprint": fingerprint(disabled_names(env)), "adapters": registered(hooks)}
    if read_json_object(path) != data:
        write(path, data)


def write(path: str, data: dict[str, Any]) -> None:
    """Write the registry atomically, private to the user; one that cannot be written is rebuilt next time."""
    from agent_link_core.json_files import write_json_object

    try:
        write_json_object(path, data)
    except Exception:
        pass
