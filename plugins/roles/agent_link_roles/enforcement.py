"""Role enforcement: should persistent agents write to each other through ``role:<name>``?

A *persistent agent* holds at least one role (directly, or the orchestrator role for a
project). A *coordination message* is a new message (not a reply) from one persistent agent
to another; it is *direct* when addressed to a session rather than to ``role:<name>``.

Mode: ``AGENT_LINK_ROLE_ENFORCEMENT`` when set (any other word than the three is refused at
start, as every setting's bad value is), else roles.json ``enforcement`` when valid, else ``off``. An unreadable table counts as no table, so enforcement fails open.

* ``off``: nothing is checked;
* ``warn``: delivered with a ``direct_coordination`` warning and the message (and its receipt)
  tagged ``direct-coordination``;
* ``enforce``: refused with ``permission_denied`` (reason ``role_address_required``) before
  anything is stored.

Replies, and messages with a role-less session on either end, are never checked, nor are sends
made by the project orchestrator tools (:data:`ROLE_ADDRESSED_TOOLS`): they pick the
orchestrator by role, binding or search themselves and count as role-addressed. Holding a
role gives nobody extra rights: this only keeps coordination traffic on role addresses.

A recipient on another machine: that machine's rules apply, checked here at send time so the
sender learns a refusal as it would on one machine. The plugin that carries mail between
machines puts what the recipient's machine publishes into the message's metadata under
:data:`REMOTE_RULES_KEY` (``{"machine", "enforcement", "roles"}``: that machine's mode and
the roles the recipient holds there); the mode is then that machine's, the recipient counts
as persistent when it holds a role there, and the sender as here.
"""

from __future__ import annotations

from typing import Any

from agent_link_core.config import Config
from agent_link_core.errors import AgentLinkError
from agent_link_core.records import OutgoingMessage, SendContext

from agent_link_roles.table import TABLE_FILE, RoleTable

ENV_NAME = "AGENT_LINK_ROLE_ENFORCEMENT"
DIRECT_TAG = "direct-coordination"
#: tools (``SendContext.tool``) whose sends count as role-addressed: the projects plugin's
#: messages to a project's orchestrator
ROLE_ADDRESSED_TOOLS = frozenset({"message_project_orchestrator", "return_project_work_result"})
#: metadata key of a recipient on another machine's role rules (module docstring)
REMOTE_RULES_KEY = "roleRules"
MODES = ("off", "warn", "enforce")


def remote_rules(metadata: dict[str, Any]) -> dict[str, Any] | None:
    """The recipient machine's rules a message carries (:data:`REMOTE_RULES_KEY`), or None when
    it carries none or they are malformed (then this machine's rules apply, as before)."""
    rules = metadata.get(REMOTE_RULES_KEY)
    if not isinstance(rules, dict) or rules.get("enforcement") not in MODES or not isinstance(rules.get("machine"), str):
        return None
    roles = rules.get("roles")
    if not isinstance(roles, list) or not all(isinstance(r, str) and r for r in roles):
        return None
    return rules


def enforcement_mode(config: Config, table: RoleTable | None) -> dict[str, Any]:
    """``{mode, source, ignored}``: the mode in force, where it came from
    (``AGENT_LINK_ROLE_ENFORCEMENT`` | ``roles.json`` | ``default``) and a roles.json value that
    was set but invalid (``[{source, reason}]``, never the value itself; a bad variable never
    gets here: :func:`agent_link_core.config.load_config` refuses it)."""
    ignored: list[dict[str, str]] = []
    env_mode = config.get(ENV_NAME)
    if env_mode:
        return {"mode": env_mode, "source": ENV_NAME, "ignored": ignored}
    if table is not None:
        if table.enforcement:
            return {"mode": table.enforcement, "source": TABLE_FILE, "ignored": ignored}
        if any(p["path"] == "enforcement" for p in table.problems):
            ignored.append({"source": TABLE_FILE, "reason": "not one of off, warn, enforce"})
    return {"mode": "off", "source": "default", "ignored": ignored}


def replacement_for(table: RoleTable, recipient: str) -> dict[str, str]:
    """How to address ``recipient`` instead: ``{"to": "role:<name>"}`` for a role it holds, or
    ``{"tool": "message_project_orchestrator", "projectRoot": ...}`` when it is the
    orchestrator only for some projects."""
    held = table.roles_held_by(recipient)
    if held:
        return {"to": f"role:{held[0]}"}
    _, root = table.projects_held_by(recipient)[0]
    return {"tool": "message_project_orchestrator", "projectRoot": root}


def check_send(message: OutgoingMessage, context: SendContext, table: RoleTable, mode: str) -> list[dict[str, Any]]:
    """Apply the mode to one outgoing message.

    :param mode: this machine's mode; a message carrying :data:`REMOTE_RULES_KEY` is checked
        with the recipient's machine's mode and roles instead.
    :returns: ``[]`` or one ``direct_coordination`` warning (and tags the message) under warn.
    :raises AgentLinkError: ``permission_denied`` (``reason: role_address_required``,
        ``recipientRoles``, ``replacement``) under enforce.
    """
    remote = remote_rules(message.metadata)
    if remote is not None:
        mode = remote["enforcement"]  # a recipient on another machine: that machine's rules
    if mode == "off" or context.is_reply or message.to.startswith("role:") or context.tool in ROLE_ADDRESSED_TOOLS:
        return []
    sender, recipient = message.sender.address, message.recipient
    if not table.is_persistent(sender):
        return []
    details: dict[str, Any]
    if remote is not None:
        if not remote["roles"]:
            return []
        details = {"recipientRoles": sorted(remote["roles"]), "recipientMachine": remote["machine"],
                   "replacement": {"to": f"role:{sorted(remote['roles'])[0]}"}}
    else:
        if not table.is_persistent(recipient):
            return []
        details = {"recipientRoles": table.roles_held_by(recipient), "replacement": replacement_for(table, recipient)}
        projects = table.projects_held_by(recipient)
        if projects:
            details["recipientProjects"] = [{"role": name, "projectRoot": root} for name, root in projects]
    target = details["replacement"].get("to") or f"message_project_orchestrator with projectRoot {details['replacement']['projectRoot']}"
    if mode == "enforce":
        raise AgentLinkError(
            "permission_denied",
            f"{recipient} holds a role{' on ' + remote['machine'] if remote else ''}, and role holders coordinate through"
            f" role addresses {'there' if remote else 'here'}.",
            {"reason": "role_address_required", **details},
            hint=f"Send to {target} instead.",
        )
    if DIRECT_TAG not in message.tags:
        message.tags.append(DIRECT_TAG)
    return [{
        "code": "direct_coordination",
        "message": f"Delivered, but {recipient} holds a role: coordinate through {target} so the work follows the role.",
        "details": details,
    }]
