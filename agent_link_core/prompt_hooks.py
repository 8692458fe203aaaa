"""Which module answers a host's prompt hooks, found without loading the plugins.

A harness plugin declares its prompt-hook adapter through the
``agent_link_register_prompt_hooks`` hook (a :class:`~agent_link_core.records.PromptHook`:
harness name and module). ``agent-link hook <harness> <event>`` runs on every prompt, and
scanning entry points and building the plugin manager costs tens of milliseconds, so the
declarations are kept in a small registry file that the hook reads instead:
``<state dir>/prompt-hooks/<environment key>.json``, one per Python environment (two
installations sharing a state directory never read each other's registry).

The registry is never trusted blindly. It records a fingerprint of what decides which
plugins load: the interpreter prefix, ``AGENT_LINK_DISABLE_PLUGINS`` and, for every directory
on ``sys.path``, its modification time (installing or removing a distribution adds or
removes a ``*.dist-info`` folder in one of them). When the fingerprint differs, the hook
rebuilds the registry through the plugin manager before it runs anything, so a removed or
disabled plugin's adapter never runs, and a newly installed one is found.

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
#: the budget (ms) of each plugin call while the hook rebuilds the registry (at most the
#: configured ``AGENT_LINK_HOOK_TIMEOUT_MS``): the host waits for the hook, for 5 s at most
REBUILD_BUDGET_MS = 2000


def disabled_names(env: Any = None) -> list[str]:
    """Plugin names in ``AGENT_LINK_DISABLE_PLUGINS`` (comma or space separated), sorted; when
    ``AGENT_LINK_LOAD_PLUGINS`` names the only plugins to load, one more entry ``=only:<names>``
    (no plugin name contains ``=``) so that the registry follows that choice too."""
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
    """What decides which plugins load, as JSON-comparable lists (see the module doc).

    The first entry is left out when it is the current directory (``python -c`` / ``-m`` put
    it there): hooks run from every project folder, and a plugin is not installed by being
    the folder a host was started in.
    """
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
    """Collect the adapters from the plugins that load now and write the registry.

    A plugin's adapter counts only when every registration a process makes at start succeeds
    for it (:func:`registered`), run with just the core and the plugins that have adapters
    (the others' tools would cost the prompt seconds): one that raises, exits, answers a refused
    record or outlasts :data:`REBUILD_BUDGET_MS` is left out, so its adapter never runs.

    :returns: the registry as written (also when the file could not be written: the hook
        then rebuilds next time, which is slower but still right).
    """
    from agent_link_core.boundary import TIMEOUT_ENV, timeout_from_env
    from agent_link_core.plugins import DEFAULT_PLUGINS, Hooks, build_plugin_manager

    env = dict(os.environ if env is None else env)
    budget = timeout_from_env(env)
    env[TIMEOUT_ENV] = str(REBUILD_BUDGET_MS if budget == 0 else min(budget, REBUILD_BUDGET_MS))
    hooks = Hooks(build_plugin_manager(env=env)[0])
    keep = {*DEFAULT_PLUGINS, *(plugin for _, plugin in hooks.prompt_hooks().values())}
    for name, _plugin in hooks.pm.list_name_plugin():
        if name not in keep:
            hooks.pm.unregister(name=name)
    data = {"fingerprint": current, "adapters": registered(hooks)}
    write(path, data)
    return data


def registered(hooks: Any) -> dict[str, dict[str, str]]:
    """``{harness: {"module", "plugin"}}`` of the adapters whose plugins registered cleanly:
    runs (or reads, when this process already ran them) every start-up registration first,
    so that a plugin the boundary left out in any of them is not among them."""
    hooks.harnesses(), hooks.settings(), hooks.migrations(), hooks.tools()
    return {hook.harness: {"module": hook.module, "plugin": plugin} for hook, plugin in hooks.prompt_hooks().values()}


def refresh(state_dir: str, hooks: Any, env: Any = None) -> None:
    """Rewrite the registry from an already built plugin manager when it is stale or differs.

    Called when the MCP server starts, so the first prompt of a session does not pay for a
    rebuild, and so that the server's view (its registrations under the full budget) replaces
    one a hook wrote (a plugin that only overran the hook's shorter budget comes back).
    ``hooks`` is the process's :class:`~agent_link_core.plugins.Hooks`.
    """
    path = registry_path(state_dir)
    data = {"fingerprint": fingerprint(disabled_names(env)), "adapters": registered(hooks)}
    if read_json_object(path) != data:
        write(path, data)


def write(path: str, data: dict[str, Any]) -> bool:
    """Write the registry atomically, private to the user; False when it cannot be written."""
    from agent_link_core.json_files import write_json_object

    try:
        write_json_object(path, data)
        return True
    except Exception:
        return False
