"""Which MCP tools ``agent-link mcp`` offers: the ``AGENT_LINK_TOOLS`` setting.

Every tool offered costs each request of every agent its definition in context, so a person may
offer fewer. The value is a comma or space separated list of items, each one of:

* ``all`` — every registered tool (the default);
* ``messaging`` — the core's own tools (health, agents, messages, inbox, replies);
* a plugin's name (as ``agent-link health`` lists it) — that plugin's tools, plus the
  core's, since a plugin's tools lean on them;
* a tool's exact name.

An item matching nothing is logged and skipped; ``agent_link_health`` is always offered so a
misspelt profile can be seen. Tools not offered are only hidden from the client: other
plugins still call them in process.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TypeVar

log = logging.getLogger(__name__)

ALL = "all"
MESSAGING = "messaging"
CORE_OWNER = "agent_link_core.default_plugins"
ALWAYS = "agent_link_health"

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
    if ALL in items:
        return dict(tools)
    plugins = set(owners.values())
    wanted: set[str] = {ALWAYS}
    for item in items:
        if item == MESSAGING or item in plugins:
            wanted.update(name for name, owner in owners.items() if owner in (CORE_OWNER, item))
        elif item in tools:
            wanted.add(item)
        else:
            log.warning("AGENT_LINK_TOOLS names %r, which is neither a profile, a plugin nor a tool; skipped", item)
    return {name: spec for name, spec in tools.items() if name in wanted}
