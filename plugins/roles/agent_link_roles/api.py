"""The roles plugin's public Python API, for other plugins (the projects plugin uses it).

Everything else in this package is internal. These functions read ``roles.json`` (validated as
:mod:`agent_link_roles.table` describes) and never write it::

    from agent_link_roles import api as roles_api

    holder = roles_api.project_orchestrator(app, "/work/shop")   # "codex:019..." or None
    held = roles_api.role_holders(app)                            # {"reviewer": ["team:bob"], ...}
    roles_api.enforcement(app)                                    # "off" | "warn" | "enforce"
    roles_api.procedure_versions(app)                             # {"reviewer": {"version": 3, "sha256": "..."}}
    roles_api.attach_arrived_procedure(app, metadata)             # mail from another machine, before storing it

Sending to a role still goes through the core (``role:<name>`` addresses, resolved by this
plugin's ``agent_link_resolve_address`` hook).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from agent_link_roles.context import from_app
from agent_link_roles.enforcement import REMOTE_RULES_KEY, ROLE_ADDRESSED_TOOLS, enforcement_mode
from agent_link_roles.table import ORCHESTRATOR, load_table

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App

__all__ = ["ORCHESTRATOR", "REMOTE_HOLDER_KEY", "REMOTE_RULES_KEY", "ROLE_ADDRESSED_TOOLS", "attach_arrived_procedure",
           "enforcement", "procedure_versions", "project_orchestrator", "role_holders"]

#: key of a message's ``metadata.role`` naming the machine whose session holds the role (set by
#: a plugin that carries mail between machines, e.g. agent-link-machines): the sending machine
#: then attaches no procedure of its own; the holder's machine attaches its own on arrival
#: (:func:`attach_arrived_procedure`)
REMOTE_HOLDER_KEY = "machine"


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


def enforcement(app: App) -> str:
    """This machine's enforcement mode (``off`` | ``warn`` | ``enforce``), as a send here
    applies it (``AGENT_LINK_ROLE_ENFORCEMENT``, else roles.json, else ``off``; an unreadable
    table counts as none). The machines plugin publishes it with :func:`role_holders`, and
    another machine's send to a role holder here carries both back under
    :data:`REMOTE_RULES_KEY`, so this machine's rules apply to it at the sender (see
    :mod:`agent_link_roles.enforcement`)."""
    from agent_link_core.errors import AgentLinkError

    try:
        table = load_table(from_app(app).state_dir)
    except AgentLinkError:
        table = None
    return str(enforcement_mode(from_app(app).config, table)["mode"])


def procedure_versions(app: App) -> dict[str, dict[str, Any]]:
    """The procedure of each role of this machine's table, or of a procedure file with no role
    in the table, that has one:
    ``{role name: {"version": last recorded version number or None, "sha256": the file's
    content digest (the last recorded one when the file is gone)}}``. Reads the files and the
    recorded versions, records nothing. The machines plugin publishes it, so another machine
    can show that its procedure of a role differs (an older copy).

    :raises AgentLinkError: ``state_io_error`` when roles.json cannot be read.
    """
    from pathlib import Path

    from agent_link_roles.procedures import procedure_view

    ctx = from_app(app)
    out: dict[str, dict[str, Any]] = {}
    files = {p.stem for p in (Path(ctx.state_dir) / "roles").glob("*.md")}
    for name in sorted(set(load_table(ctx.state_dir).roles) | files):
        view = procedure_view(ctx.store, Path(ctx.state_dir), name)
        if view is not None and view.get("sha256"):
            out[name] = {"version": view["version"], "sha256": view["sha256"]}
    return out


def attach_arrived_procedure(app: App, metadata: dict[str, Any]) -> dict[str, Any] | None:
    """Give a role-addressed message that arrived from another machine this machine's own
    procedure of the role, before the message is stored here.

    The role's procedure lives with its holder: ``<state>/roles/<name>.md`` and the version
    numbers of ``role_procedure_versions`` are this machine's. Whatever the sending machine
    put in ``metadata.role.procedure`` (its own file's version, usually none) is dropped, and
    the current content of this machine's file is recorded as a version here (as a local send
    to the role does) and attached. Once the message is stored, its ``sent`` event shows the
    text to the holder when this is the first message of that version to it, exactly as for
    local mail. A message not addressed through a role (no ``metadata.role.name``) is left
    alone.

    :param metadata: the arrived message's metadata (``{"role": {"name", "holder", ...}, ...}``),
        changed in place; :data:`REMOTE_HOLDER_KEY` is removed (the holder is local here).
    :returns: ``{name, version, sha256}`` attached, or None (not role-addressed, or no readable
        procedure file for the role here).
    :raises AgentLinkError: ``state_io_error`` / ``state_busy`` when a new version cannot be
        recorded (the caller stores nothing then, and takes the message again later).
    """
    role = metadata.get("role")
    if not isinstance(role, dict) or not isinstance(role.get("name"), str) or not role["name"]:
        return None
    from agent_link_roles.procedures import read_procedure, record_version

    role.pop("procedure", None)
    role.pop(REMOTE_HOLDER_KEY, None)
    proc = read_procedure(from_app(app).state_dir, role["name"])
    if not proc.present:
        return None
    role["procedure"] = record_version(from_app(app).store, role["name"], proc)
    return dict(role["procedure"])
