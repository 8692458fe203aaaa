"""Entry point of the agent-link roles plugin, registered under the ``agent_link`` group.

Hooks:

* ``agent_link_resolve_address``: ``role:<name>`` -> the role's holder (``not_found`` with
  ``details.role`` when nobody holds it, ``ambiguous`` for a hand-edited multi-holder entry,
  ``state_io_error`` when roles.json cannot be read); applies any pending handover first;
* ``agent_link_before_send``: role enforcement, and the procedure version a role-addressed
  message carries (its metadata's ``role.procedure``; the send result's ``roleProcedure``),
  unless the holder is on another machine (``role.machine``, :data:`agent_link_roles.api.REMOTE_HOLDER_KEY`):
  that machine attaches its own (:func:`agent_link_roles.api.attach_arrived_procedure`);
* ``agent_link_on_event``: on ``sent``, claims the procedure text for the holder when this
  is the first message of that version to it (and completes ``roleProcedure.textIncluded``);
* ``agent_link_render_envelopes``: ``via``, ``procedure="<name>@<version>"`` and, on that first
  message, a ``<procedure>`` element with the text;
* ``agent_link_check_override``: the override policy;
* ``agent_link_session_roles``: the roles each session holds, for list_agents / resolve_agent;
* ``agent_link_register_panels``: the Roles section of the web page (holders, labels beside agents);
* tools, settings, schema and the ``roles`` health section.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from agent_link_core import hookimpl
from agent_link_core.contribute import migrations, registers
from agent_link_core.errors import AgentLinkError
from agent_link_core.json_files import loads
from agent_link_core.lazy import LazyLogger

from agent_link_roles.context import MIGRATIONS, SETTINGS, TABLE_FILE, from_app

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any
    from agent_link_core.app import App
    from agent_link_core.records import EnvelopeContribution, Event, OutgoingMessage, SendContext
    from agent_link_core.model import Caller

log = LazyLogger(__name__)


agent_link_register_settings = registers(SETTINGS)
agent_link_schema = migrations(MIGRATIONS)
#: the role tools and the web page's Roles section: their modules load when they are listed
agent_link_register_tools = registers("agent_link_roles.tools:ROLE_TOOLS")
agent_link_register_panels = registers("agent_link_roles.panel:PANELS", optionalhook=True)  # the web plugin's hook


@hookimpl
def agent_link_resolve_address(address: str, caller_address: str, app: App) -> dict[str, Any] | None:
    if not address.startswith("role:"):
        return None
    from agent_link_roles.handover import apply_handover
    from agent_link_roles.table import load_table

    name = address[5:]
    table = load_table(from_app(app).state_dir)
    # A hand edit of roles.json takes effect here too; resolving is also a read (resolve_agent),
    # so it never waits for a writer: a send that follows takes the lock anyway.
    apply_handover(app, table, caller_address, wait=False)
    role = table.roles.get(name)
    if role is None or not role.holders:
        assigned = [{"address": r.role_address, "holder": r.address} for r in table.roles.values() if r.address][:5]
        raise AgentLinkError("not_found", f"Nobody holds {address}.", {"role": address, "candidates": assigned},
                             hint="list_agents shows the roles each session holds; the user assigns roles with the set_agent_role tool.")
    if len(role.holders) > 1:
        raise AgentLinkError("ambiguous", f"roles.json lists several holders for {address}.",
                             {"query": address, "candidates": [{"address": h} for h in role.holders]},
                             hint="Send to one of the candidates, or have the user keep a single holder in roles.json.")
    holder = role.holders[0]
    return {"address": holder, "via": address, "metadata": {"role": {"name": name, "holder": holder}}}


@hookimpl
def agent_link_before_send(message: OutgoingMessage, context: SendContext, app: App) -> list[dict[str, Any]] | None:
    ctx = from_app(app)
    role = message.metadata.get("role")
    if not (isinstance(role, dict) and role.get("name")) and not os.path.lexists(os.path.join(ctx.config.state_dir, TABLE_FILE)):
        return []  # no role table: nobody holds a role, so nothing to check (and nothing to import for it)
    from agent_link_roles.enforcement import check_send, enforcement_mode
    from agent_link_roles.table import load_table

    try:
        table = load_table(ctx.state_dir)
    except AgentLinkError:
        table = None  # unreadable table: enforcement falls back to off (fails open)
    warnings: list[dict[str, Any]] = []
    if table is not None:
        warnings = check_send(message, context, table, enforcement_mode(ctx.config, table)["mode"])
    # only a send through a role reads its procedure, and only for a holder on this machine: a
    # holder's own machine attaches its own on arrival ("machine": api.REMOTE_HOLDER_KEY, api
    # not imported here: it loads the role table's code)
    if isinstance(role, dict) and role.get("name") and not role.get("machine"):
        from agent_link_roles.procedures import read_procedure, record_version

        proc = read_procedure(ctx.state_dir, role["name"])
        if proc.present:
            role["procedure"] = record_version(ctx.store, role["name"], proc)
            # textIncluded is settled by the "sent" event, once the holder's copy is claimed.
            context.result["roleProcedure"] = {"name": role["name"], "version": role["procedure"]["version"], "textIncluded": False}
    return warnings


@hookimpl
def agent_link_on_event(event: Event, app: App) -> None:
    if event.kind != "sent" or event.message_id is None:
        return
    row = app.mailbox.get_row(event.message_id)
    if row is None:
        return
    role = loads(row["metadata"] or "{}").get("role") or {}
    procedure = role.get("procedure") or {}
    if procedure.get("sha256"):
        from agent_link_roles.procedures import claim_text

        included = claim_text(app.store, role["name"], row["recipient"], procedure["sha256"], event.message_id)
        if event.result is not None and "roleProcedure" in event.result:
            event.result["roleProcedure"]["textIncluded"] = included


@hookimpl
def agent_link_render_envelopes(messages: tuple[Mapping[str, Any], ...], app: App) -> dict[str, EnvelopeContribution] | None:
    roles = [(m, role) for m in messages if isinstance(role := m.get("metadata", {}).get("role"), Mapping) and role.get("name")]
    if not roles:
        return None  # most mail: decided before any import
    return {message["id"]: _role_contribution(message, role, app) for message, role in roles}


def _role_contribution(message: Mapping[str, Any], role: Mapping[str, Any], app: App) -> EnvelopeContribution:
    """``via``, ``procedure`` and the procedure's text (the first time) of a message sent to a role."""
    from agent_link_core.records import EnvelopeContribution

    name = role["name"]
    contribution = EnvelopeContribution({"via": f"role:{name}"})
    procedure = role.get("procedure") or {}
    if not procedure.get("version"):
        return contribution
    contribution.attributes["procedure"] = f"{name}@{procedure['version']}"
    from agent_link_roles.procedures import text_for

    try:
        text = text_for(app.store, name, message["recipient"], procedure["sha256"], message["id"])
    except Exception:  # a missing text must never stop the message itself from rendering
        log.exception("agent-link: procedure text lookup failed for %s", message.get("id"))
        return contribution
    if text is not None:
        contribution.elements.append(procedure_element(name, str(procedure["version"]), text, contribution))
    return contribution


def procedure_element(name: str, version: str, text: str, contribution: EnvelopeContribution) -> str:
    """``<procedure name version>text</procedure>``, the text cut (saying where the whole is) to what the core renders of
    one message's contribution with ``contribution``'s attributes (:data:`~agent_link_core.boundary.MAX_CONTRIBUTION_CHARS`)."""
    from agent_link_core.boundary import MAX_CONTRIBUTION_CHARS
    from agent_link_core.envelope import render_element

    attrs, room = [("name", name), ("version", version)], MAX_CONTRIBUTION_CHARS - sum(map(len, contribution.attributes.values()))
    element, cut = render_element("procedure", attrs, text), len(text)
    more = f"\n[cut here: get_agent_role with role {name!r} and includeProcedure true shows the whole procedure]"
    while len(element) > room and cut > 0:  # escaping only lengthens text: each pass cuts what is still over
        cut -= len(element) - room
        element = render_element("procedure", attrs, text[:max(cut, 0)] + more)
    return element


@hookimpl(optionalhook=True)  # the codex plugin's hook
def agent_link_check_override(
    target: str, sender: Caller, setting: str, value: str, context: dict[str, Any], app: App
) -> dict[str, Any]:
    """May ``sender`` change ``setting`` of the existing session ``target`` to ``value``?
    See :func:`agent_link_roles.policy.evaluate_override` for the decision's shape."""
    from agent_link_roles.policy import evaluate_override

    return evaluate_override(from_app(app).state_dir, target, sender.address, setting, value, context,
                             sender_verified=sender.verified)


@hookimpl
def agent_link_session_roles(addresses: list[str], app: App) -> dict[str, list[str]] | None:
    """The roles each listed session holds (directly or for a project), from ``roles.json``;
    None when the table cannot be read (listings then show no roles rather than fail)."""
    from agent_link_roles.table import load_table

    try:
        table = load_table(from_app(app).state_dir)
    except AgentLinkError:
        return None
    out: dict[str, list[str]] = {}
    for address in addresses:
        names = {*table.roles_held_by(address), *(name for name, _ in table.projects_held_by(address))}
        if names:
            out[address] = sorted(names)
    return out


@hookimpl
def agent_link_health(app: App) -> tuple[str, dict[str, Any]]:
    from agent_link_roles.enforcement import enforcement_mode
    from agent_link_roles.table import load_table, table_path
    from agent_link_roles.tools import ADMIN_SETTING

    ctx = from_app(app)
    path = table_path(ctx.state_dir)
    section: dict[str, Any] = {"path": str(path), "exists": path.exists(), "admin": bool(ctx.config.get(ADMIN_SETTING))}
    try:
        table = load_table(ctx.state_dir)
    except AgentLinkError as exc:
        section.update({"error": exc.to_dict(), "enforcement": enforcement_mode(ctx.config, None)})
        return "roles", section
    section.update({
        "count": len(table.roles),
        "assigned": sum(1 for r in table.roles.values() if r.address),
        "policyTargets": len(table.policy),
        "enforcement": enforcement_mode(ctx.config, table),
        "problems": table.problems,
        "error": None,
    })
    return "roles", section


@hookimpl(optionalhook=True)  # the legacy plugin's hook
def agent_link_register_legacy_importers(register: Any) -> None:
    """The original's role table and role state (``agent-link import-legacy``)."""
    from agent_link_roles.legacy import RolesImporter

    register(RolesImporter())
