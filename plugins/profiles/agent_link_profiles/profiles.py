"""Which MCP tools ``agent-link mcp`` lists: the ``AGENT_LINK_TOOLS`` setting (README.md,
settings table), answered through the core's ``agent_link_listed_tools`` hook.

The value is a comma or space separated list of ``all``, ``messaging`` (the core's tools and the
conversations and waits plugins', :data:`MESSAGING_OWNERS`), a plugin's name (its tools plus messaging's) or a
tool's name. An item matching nothing is skipped
and reported; when no item matches, every tool is offered, since a misspelt profile must not
leave an agent without its messaging tools. Tools left out stay reachable through
``agent_link_tools`` (:mod:`agent_link_profiles.gateway`).

Other plugins may use :func:`select_tools`, :func:`effective_profile`, :func:`unmatched`,
:data:`ALL` and :data:`MESSAGING`; what a host's server lists is ``app.hooks.listed_tools(host)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from agent_link_core import hookimpl
from agent_link_core.boundary import CORE_PLUGIN
from agent_link_core.lazy import LazyLogger

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App
    from agent_link_core.config import Setting
    from agent_link_core.tools.registry import ToolSpec

log = LazyLogger(__name__)

ALL = "all"
MESSAGING = "messaging"
CORE_OWNER = CORE_PLUGIN  #: the core's name as the owner of its tools (``Hooks.tool_owners``)
ALWAYS = ("agent_link_health", "agent_link_tools")
#: the owners of the tools ``messaging`` lists: the core, and the plugins that took a messaging tool out of
#: the core (conversations: a message's thread and the mailbox listing; waits: ``wait_for_agent``)
MESSAGING_OWNERS = (CORE_OWNER, "conversations", "waits")
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
        log.warning("agent-link: AGENT_LINK_TOOLS names %r, which is neither a profile, a plugin nor a tool; skipped", item)
    if ALL in items or len(unknown) == len(items):
        return dict(tools)
    plugins = set(owners.values())
    wanted: set[str] = set(ALWAYS)
    for item in items:
        if item == MESSAGING or item in plugins:
            wanted.update(name for name, owner in owners.items() if owner in MESSAGING_OWNERS or owner == item)
        elif item in tools:
            wanted.add(item)
    return {name: spec for name, spec in tools.items() if name in wanted}


def effective_profile(config: Any, host: str | None) -> str:
    """The ``AGENT_LINK_TOOLS`` value a server uses: the setting when set, else
    :data:`HOST_DEFAULT` for a server a host started (each session of a host then pays for the
    messaging tools only), else ``all``.

    :param config: the App's config (``get``, ``sources``).
    :param host: ``AGENT_LINK_HOST`` of the server (the host that started it), or None.
    """
    if config.sources.get("AGENT_LINK_TOOLS", "default") != "default":
        return str(config.get("AGENT_LINK_TOOLS") or ALL)
    return HOST_DEFAULT if host else ALL


def unmatched(tools: Mapping[str, object], owners: Mapping[str, str], value: str | None) -> list[str]:
    """The items of ``value`` that are neither a profile, a plugin's name nor a tool's name."""
    plugins = set(owners.values())
    return [i for i in profile_items(value) if i not in (ALL, MESSAGING) and i not in plugins and i not in tools]


@hookimpl
def agent_link_register_settings(register: Callable[[Setting], None]) -> None:
    from agent_link_core.config import Setting
    from agent_link_profiles import AGENT_LINK_SETTINGS

    for fields in AGENT_LINK_SETTINGS[__name__]:
        register(Setting(**fields))


@hookimpl
def agent_link_register_tools(register: Callable[[ToolSpec], None]) -> None:
    from agent_link_profiles.gateway import GATEWAY_TOOL

    register(GATEWAY_TOOL)


@hookimpl
def agent_link_listed_tools(tools: dict[str, ToolSpec], host: str | None, app: App) -> list[str]:
    return list(select_tools(tools, app.hooks.tool_owners(), effective_profile(app.config, host)))


@hookimpl
def agent_link_health(app: App) -> tuple[str, dict[str, Any]]:
    """``toolProfile``: the profile of a server with this process's settings, and a warning
    (``unknown_tool_profile_item``, also the section's summary) for items that name nothing."""
    value = app.config.get("AGENT_LINK_TOOLS")
    tools, owners = app.hooks.tools(), app.hooks.tool_owners()
    section: dict[str, Any] = {"profile": effective_profile(app.config, (app.env.get("AGENT_LINK_HOST") or "").strip()),
                               "warnings": []}
    unknown = unmatched(tools, owners, value)
    if unknown:
        offered = "every tool" if len(unknown) == len(profile_items(value)) else "the tools the other items name"
        message = (f"AGENT_LINK_TOOLS names {', '.join(map(repr, unknown))}, which is neither a profile "
                   f"(all, messaging), a plugin nor a tool; {offered} is offered instead.")
        section["warnings"] = [{"code": "unknown_tool_profile_item", "message": message, "details": {"items": unknown}}]
        section["summary"] = message
    return "toolProfile", section
