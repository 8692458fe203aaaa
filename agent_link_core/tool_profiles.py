"""Which MCP tools ``agent-link mcp`` lists: the ``AGENT_LINK_TOOLS`` setting (README.md,
settings table).

The value is a comma or space separated list of ``all``, ``messaging`` (the core's tools), a
plugin's name (its tools plus the core's) or a tool's name. An item matching nothing is skipped
and reported; when no item matches, every tool is offered, since a misspelt profile must not
leave an agent without its messaging tools. Tools left out stay reachable through
``agent_link_tools`` (:mod:`agent_link_core.tools.gateway`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from agent_link_core.lazy import LazyLogger

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
    return (value or "").replace(",", " ").split() or [ALL]


def select_tools(tools: Mapping[str, T], owners: Mapping[str, str], value: str | None) -> dict[str, T]:
    """The tools of ``tools`` (``{name: spec}``, registration order kept) the profile picks.

    :param owners: ``{tool name: plugin name}`` (``Hooks.tool_owners``).
    :param value: the ``AGENT_LINK_TOOLS`` value.
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


def offered_tools(app: Any) -> dict[str, Any]:
    """The registered tools of ``app`` (an App) its server lists, by name, in registration order."""
    return select_tools(app.hooks.tools(), app.hooks.tool_owners(), effective_profile(app.config, app.env))


def effective_profile(config: Any, env: Mapping[str, str]) -> str:
    """The ``AGENT_LINK_TOOLS`` value this server uses: the setting when set, else
    :data:`HOST_DEFAULT` when ``AGENT_LINK_HOST`` names the host that started it (each
    session of a host then pays for the messaging tools only), else ``all``.

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
