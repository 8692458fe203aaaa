"""Which MCP tools ``agent-link mcp`` offers: the ``AGENT_LINK_TOOLS`` setting.

Every tool offered costs each request of every agent its definition in context, so a person may
offer fewer. The value is a comma or space separated list of items, each one of:

* ``all`` — every registered tool (the default);
* ``messaging`` — the core's own tools (health, agents, messages, inbox, replies);
* a plugin's name (as ``agent-link health`` lists it) — that plugin's tools, plus the
  core's, since a plugin's tools lean on them;
* a tool's exact name.

An item matching nothing is skipped and reported (the log, and ``settings.warnings`` in
health); when no item matches anything, every tool is offered, since a misspelt profile
must not leave an agent without its messaging tools. ``agent_link_health`` and
``agent_link_tools`` are always offered. Tools not offered are only hidden from the client:
other plugins still call them in process, and a model reaches them through
``agent_link_tools`` (:mod:`agent_link_core.tools.gateway`).

Unset, the setting's default depends on who started the server (:func:`effective_profile`):
a host (``AGENT_LINK_HOST`` set, as each host plugin's MCP declaration does) gets
:data:`HOST_DEFAULT`, so every session of that host pays for the messaging tools only; any
other client gets every tool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from agent_link_core.lazy_log import LazyLogger

log = LazyLogger(__name__)

ALL = "all"
MESSAGING = "messaging"
CORE_OWNER = "agent_link_core.default_plugins"
ALWAYS = ("agent_link_health", "agent_link_tools")
#: the profile of a server a host started, when ``AGENT_LINK_TOOLS`` is unset
HOST_DEFAULT = MESSAGING

T = TypeVar("T")


def profile_items(value: str | None) -> list[str]:
    """The items of a setting value (empty or unset means ``all``)."""
    items = [part.strip() for part in (value or "").replace(",", " ").split() if part.strip()]
    return items or [ALL]


def select_tools(tools: Mapping[str, T], owners: Mapping[str, str], value: str | None) -> dict[str, T]:
    """The tools of ``tools`` (``{name: spec}``, registration order kept) the profile picks.

    :param owners: ``{tool name: plugin name}`` (``Hooks.tool_owners``).
    :param value: the ``AGENT_LINK_TOOLS`` value (module docstring).
    """
    items = profile_items(value)
    unknown = unmatched(tools, owners, value)
    for item in unknown:
        log.warning("AGENT_LINK_TOOLS names %r, which is neither a profile, a plugin nor a tool; skipped", item)
    if ALL in items or len(unknown) == len(items):
        return dict(tools)
    plugins = set(owners.values())
    wanted: set[str] = set(ALWAYS)
    for item in items:
        if item == MESSAGING or item in plugins:
            wanted.update(name for name, owner in owners.items() if owner in (CORE_OWNER, item))
        elif item in tools:
            wanted.add(item)
    return {name: spec for name, spec in tools.items() if name in wanted}


def effective_profile(config: Any, env: Mapping[str, str]) -> str:
    """The ``AGENT_LINK_TOOLS`` value this server uses: the setting when it is set (in the
    environment or the settings file), else :data:`HOST_DEFAULT` when ``AGENT_LINK_HOST``
    names the host that started it, else ``all``.

    :param config: the App's config (``get``, ``sources``).
    :param env: the process environment.
    """
    if config.sources.get("AGENT_LINK_TOOLS", "default") != "default":
        return str(config.get("AGENT_LINK_TOOLS") or ALL)
    return HOST_DEFAULT if (env.get("AGENT_LINK_HOST") or "").strip() else ALL


def unmatched(tools: Mapping[str, object], owners: Mapping[str, str], value: str | None) -> list[str]:
    """The items of ``value`` that are neither a profile, a plugin's name nor a tool's name."""
    plugins = set(owners.values())
    return [i for i in profile_items(value) if i not in (ALL, MESSAGING) and i not in plugins and i not in tools]


def settings_warnings(tools: Mapping[str, object], owners: Mapping[str, str], value: str | None) -> list[dict[str, object]]:
    """Health's warnings about ``AGENT_LINK_TOOLS`` (``[{code, message, details}]``, empty when fine)."""
    unknown = unmatched(tools, owners, value)
    if not unknown:
        return []
    offered = "every tool" if len(unknown) == len(profile_items(value)) else "the tools the other items name"
    return [{"code": "unknown_tool_profile_item",
             "message": f"AGENT_LINK_TOOLS names {', '.join(map(repr, unknown))}, which is neither a profile "
                        f"(all, messaging), a plugin nor a tool; {offered} is offered instead.",
             "details": {"items": unknown}}]
