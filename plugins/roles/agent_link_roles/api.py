"""The roles plugin's public Python API, for other plugins (the projects plugin uses it).

Everything else in this package is internal. These functions read ``roles.json`` (validated as
:mod:`agent_link_roles.table` describes) and never write it::

    from agent_link_roles import api as roles_api

    holder = roles_api.project_orchestrator(app, "/work/shop")   # "codex:019..." or None
    held = roles_api.role_holders(app)                            # {"reviewer": ["team:bob"], ...}

Sending to a role still goes through the core (``role:<name>`` addresses, resolved by this
plugin's ``agent_link_resolve_address`` hook).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from agent_link_roles.context import from_app
from agent_link_roles.enforcement import ROLE_ADDRESSED_TOOLS
from agent_link_roles.table import ORCHESTRATOR, load_table

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App

__all__ = ["ORCHESTRATOR", "ROLE_ADDRESSED_TOOLS", "project_orchestrator", "role_holders"]


def project_orchestrator(app: App, project_root: str) -> str | None:
    """The address assigned the orchestrator role for ``project_root``
    (``roles.orchestrator.projects``), or None when that project has no assignment.

    :param project_root: an absolute path; matched after plain normalisation (``..`` and
        duplicate slashes), with no symlink resolution and no subdirectory matching.
    :raises AgentLinkError: ``state_io_error`` when roles.json cannot be read.
    """
    table = load_table(from_app(app).state_dir)
    role = table.roles.get(ORCHESTRATOR)
    if role is None:
        return None
    return role.projects.get(os.path.normpath(project_root))


def role_holders(app: App) -> dict[str, list[str]]:
    """Who holds each role directly (what ``role:<name>`` resolves to on this machine):
    ``{role name: [holder address, ...]}``, one holder normally, several when roles.json was
    hand-edited so; unassigned roles are left out (the machines plugin publishes this so
    another machine can reach a role held here).

    :raises AgentLinkError: ``state_io_error`` when roles.json cannot be read.
    """
    table = load_table(from_app(app).state_dir)
    return {name: list(role.holders) for name, role in sorted(table.roles.items()) if role.holders}
