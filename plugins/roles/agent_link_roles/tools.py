"""The role and override-policy MCP tools.

Writes (set_agent_role, clear_agent_role, set_agent_override_policy) are refused with
``permission_denied`` (reason ``role_admin_disabled``) unless this server process was started
with ``AGENT_LINK_ROLE_ADMIN=1``: the flag is read once, when the App is created, and no
argument, message or ``_meta`` can set it. They are marked destructive so hosts that ask
before risky tools ask for them. Reads never write roles.json.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.mailbox import iso
from agent_link_core.store import now_ms
from agent_link_core.tools.registry import ToolCall, ToolSpec
from agent_link_core.tools.schemas import AGENT_QUERY, ANY, BOOL, NOBJ, NSTR, OBJ, PATH, STR, closed_object

from agent_link_roles.context import RolesContext, from_app
from agent_link_roles.enforcement import enforcement_mode
from agent_link_roles.handover import apply_handover
from agent_link_roles.policy import effective_policy
from agent_link_roles.procedures import encode_procedure, procedure_view, read_procedure, record_version, write_procedure
from agent_link_roles.table import (
    MAX_LEASE_PATHS,
    MAX_POLICY_ENTRIES,
    ORCHESTRATOR,
    POLICY_SETTINGS,
    Role,
    RoleTable,
    is_holder_address,
    is_policy_entry,
    is_policy_key,
    load_table,
    owned_object,
    parse_role_name,
    table_path,
    update_table,
)

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App

ADMIN_SETTING = "AGENT_LINK_ROLE_ADMIN"
ROLE_ARG = {"type": "string", "pattern": "^(role:)?[a-z0-9-]{1,40}$", "description": "Role name, or role:<name>."}
PROJECT_ROOT = {**PATH, "description": "Absolute project root (orchestrator role only)."}
LEASE_PATHS = {"type": "array", "maxItems": MAX_LEASE_PATHS, "items": {**PATH, "maxLength": 4096},
               "description": "Files, directories or globs the role owns, relative to leaseRoot: leased exclusively for the holder "
                              "(needs agent-link-leases), moved to each new holder, released by clear_agent_role. [] clears them."}
LEASE_ROOT = {**PATH, "maxLength": 4096, "description": "Absolute project root of leasePaths (needed with them)."}
LEASE_TTL = {"type": "integer", "minimum": 1000, "maximum": 7 * 24 * 60 * 60_000,
             "description": "Time to live (ms) of the role's leases from now (default: the leases plugin's); set the role again to renew."}
POLICY_TARGET = {**AGENT_QUERY, "description": "role:<name> or a session address."}
POLICY_LIST = {
    "type": "array", "maxItems": MAX_POLICY_ENTRIES, "items": {"type": "string", "minLength": 1},
    "description": 'Senders allowed: "*" (anyone with an identity), role:<name>, or an address. [] clears it.',
}



def require_admin(app: App) -> None:
    """Refuse a role write unless the server started with ``AGENT_LINK_ROLE_ADMIN=1``.

    :raises AgentLinkError: ``permission_denied`` with ``reason: role_admin_disabled``.
    """
    if not app.config.get(ADMIN_SETTING):
        raise AgentLinkError(
            "permission_denied",
            "Role administration is turned off in this agent-link server.",
            {"reason": "role_admin_disabled"},
            hint=f"Only the user can turn it on, by starting one session's agent-link server with {ADMIN_SETTING}=1 in its environment.",
        )


def role_view(ctx: RolesContext, role: Role, *, include_text: bool = False) -> dict[str, Any]:
    """``{role, roleAddress, address, assignedAt, projects?, holders?, procedure}``; ``holders``
    (several) appears only for a hand-edited ambiguous entry."""
    view: dict[str, Any] = {
        "role": role.name,
        "roleAddress": role.role_address,
        "address": role.address,
        "assignedAt": role.assigned_at,
        "procedure": procedure_view(ctx.store, ctx.state_dir, role.name, include_text=include_text),
    }
    if role.projects:
        view["projects"] = dict(role.projects)
    if role.lease_paths:
        view["leasePaths"], view["leaseRoot"] = list(role.lease_paths), role.lease_root
    if len(role.holders) > 1:
        view["holders"] = list(role.holders)
    return view


def _project_root(args: dict[str, Any], name: str) -> str | None:
    root = args.get("projectRoot")
    if root is None:
        return None
    if name != ORCHESTRATOR:
        raise invalid_arguments([{"path": "projectRoot", "rule": "orchestrator_only", "expected": "projectRoot only with role orchestrator"}])
    if not os.path.isabs(root):
        raise invalid_arguments([{"path": "projectRoot", "rule": "absolute_path", "expected": "an absolute path"}])
    # Matched like binding files: normalised, symlinks not resolved.
    return os.path.normpath(root)


async def _holder(app: App, agent: str, call: ToolCall) -> dict[str, Any]:
    if agent.startswith("role:"):
        raise invalid_arguments([{"path": "agent", "rule": "not_role", "expected": "a session address or id, not a role"}])
    address, _, _ = await app.target_address(agent, call.caller)
    if not is_holder_address(address):
        raise invalid_arguments([{"path": "agent", "rule": "address", "expected": "a session address such as <harness>:<id>"}])
    scheme, ident = address.split(":", 1)
    harness = app.harnesses.get(scheme)
    session = await harness.get_session(ident) if harness is not None else None
    return {"address": address, "harness": scheme, "title": session.title if session is not None else None}


def _lease_args(args: dict[str, Any], root: str | None) -> tuple[list[str], str] | None:
    """The ``leasePaths`` and ``leaseRoot`` given ([] and "" to clear), or None when not given.

    :raises AgentLinkError: ``invalid_arguments``: lease arguments with ``projectRoot`` (a
        project's orchestrator owns no files), ``leaseRoot`` missing, relative or alone.
    """
    given = [k for k in ("leasePaths", "leaseRoot", "leaseTtlMs") if k in args]
    if given and root is not None:
        raise invalid_arguments([{"path": given[0], "rule": "not_with_project_root",
                                  "expected": "leasePaths for the role's holder, not with projectRoot"}])
    if "leasePaths" not in args:
        if "leaseRoot" in args:
            raise invalid_arguments([{"path": "leaseRoot", "rule": "requires_lease_paths", "expected": "leaseRoot with leasePaths"}])
        return None
    paths = list(dict.fromkeys(args["leasePaths"]))
    if not paths:
        return [], ""
    lease_root = args.get("leaseRoot")
    if lease_root is None:
        raise invalid_arguments([{"path": "leaseRoot", "rule": "required", "expected": "the absolute project root of leasePaths"}])
    if not os.path.isabs(lease_root):
        raise invalid_arguments([{"path": "leaseRoot", "rule": "absolute_path", "expected": "an absolute path"}])
    return paths, os.path.normpath(lease_root)


async def _claim_role_paths(app: App, name: str, address: str, paths: list[str], lease_root: str,
                            ttl_ms: int | None) -> dict[str, Any] | None:
    """Lease ``paths`` for ``address`` under the key ``role:<name>`` (replacing the role's
    earlier claim, whoever held it, in one transaction); None when no plugin keeps leases.

    :raises AgentLinkError: ``lease_conflict`` (nothing claimed), ``invalid_arguments``.
    """
    claimed = await app.hooks.acall("agent_link_claim_paths", holder=address, paths=paths, project_root=lease_root,
                                    reason=f"role:{name}", ttl_ms=ttl_ms, until_resolved=None, key=f"role:{name}")
    return claimed if isinstance(claimed, dict) else None


def _release_role_paths(app: App, name: str) -> dict[str, Any] | None:
    """End the leases claimed for the role ``name`` (``agent_link_release_claims``): ``{"released": [...]}``, or None
    when no plugin keeps leases (or it failed, reported)."""
    ended = app.hooks.call("agent_link_release_claims", key=f"role:{name}")
    return ended if isinstance(ended, dict) else None


async def set_agent_role(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Tool ``set_agent_role``: make ``agent`` the holder (or a project's orchestrator), optionally
    replace the procedure, record its version, hand open role mail over, and lease the files
    the role owns (``leasePaths``, given now or earlier) for the holder.

    The leases are claimed before roles.json is written, so a clash changes nothing; when the
    write then fails the role's earlier leases are claimed back for its earlier holder. A
    plain address no process has ever served still gets the role, with ``message_agent``'s
    ``unknown_address`` warning (:meth:`agent_link_core.sending.Outbox.unseen_address`).

    :raises AgentLinkError: ``permission_denied`` (not admin), ``invalid_arguments`` (also
        ``leasePaths`` without agent-link-leases: rule ``plugin``), ``lease_conflict`` (another
        session holds some of the role's paths: nothing changes), ``not_found`` / ``archived``
        (agent), ``body_too_large`` (procedure), ``state_io_error``.
    """
    require_admin(app)
    ctx = from_app(app)
    name = parse_role_name(args["role"])
    root = _project_root(args, name)
    given = _lease_args(args, root)
    holder = await _holder(app, args["agent"], call)
    address = holder["address"]
    unseen = app.outbox.unseen_address(address)
    if unseen is not None:  # a typo'd holder: said as message_agent says it (the role is still given)
        unseen["message"] = unseen["message"].replace("the message waits", f"work sent to role:{name} waits")
        call.warnings.append(unseen)
    procedure = encode_procedure(args["procedure"]) if "procedure" in args else None
    path = table_path(ctx.state_dir)
    before = load_table(ctx.state_dir).roles.get(name)
    owned = given if given is not None else (list(before.lease_paths), before.lease_root or "") if before and root is None else None
    claimed = None
    if owned and owned[0]:
        claimed = await _claim_role_paths(app, name, address, owned[0], owned[1], args.get("leaseTtlMs"))
        if claimed is None and given is not None:
            raise invalid_arguments([{"path": "leasePaths", "rule": "plugin", "expected": "agent-link-leases installed and enabled"}],
                                    "leasePaths needs the leases plugin (agent-link-leases), which is not installed, is disabled "
                                    "or failed (agent-link health lists plugin problems); the role was not changed.")
        if claimed is None:
            call.warnings.append({"code": "role_paths_not_leased", "details": {"paths": owned[0]},
                                  "message": f"role:{name} owns {', '.join(owned[0])}, but no plugin keeps leases "
                                             "(agent-link-leases): the holder was given the role without them."})

    def mutate(raw: dict[str, Any]) -> Any:
        roles = owned_object(raw, "roles", path, ctx.state_dir)
        entry = roles.get(name)
        if not isinstance(entry, dict):
            entry = roles[name] = {}
        if given is not None and given[0]:
            entry["leasePaths"], entry["leaseRoot"] = given
        elif given is not None:
            entry.pop("leasePaths", None)
            entry.pop("leaseRoot", None)
        if root is not None:
            projects = entry.get("projects")
            if not isinstance(projects, dict):
                projects = entry["projects"] = {}
            previous = projects.get(root)
            projects[root] = address
            return previous
        previous = entry.get("address")
        if previous != address:  # assignedAt says when this holder got the role
            entry["address"] = address
            entry["assignedAt"] = iso(now_ms())
        return previous

    try:
        previous = update_table(ctx.state_dir, mutate)  # an unusable table leaves the role (and its leases) as they were
    except AgentLinkError:
        if claimed is not None:
            await _restore_role_paths(app, name, before)
        raise
    if given is not None and not given[0]:
        _release_role_paths(app, name)
    if procedure is not None:
        write_procedure(ctx.state_dir, name, procedure)
    proc = read_procedure(ctx.state_dir, name)
    if proc.present:
        record_version(ctx.store, name, proc)
    table = load_table(ctx.state_dir)
    moved = apply_handover(app, table, call.caller.address)
    return {
        "role": role_view(ctx, table.roles[name]),
        "previousAddress": previous,
        "holder": holder,
        "projectRoot": root,
        "path": str(path),
        "handedOver": moved.get(name, []),
        "leases": claimed["leases"] if claimed is not None else None,
    }


async def _restore_role_paths(app: App, name: str, before: Role | None) -> None:
    """Give the role's leases back to its earlier holder (or end them) after a failed write."""
    if before is not None and before.address and before.lease_paths and before.lease_root:
        try:
            await _claim_role_paths(app, name, before.address, list(before.lease_paths), before.lease_root, None)
            return
        except AgentLinkError:
            pass  # the earlier holder's paths were taken meanwhile: they end below
    _release_role_paths(app, name)


async def clear_agent_role(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Tool ``clear_agent_role``: remove the holder (or one project's orchestrator); the procedure
    file and the role's ``leasePaths`` stay, the holder's leases of them end
    (``releasedLeases``). ``cleared`` is False when there was nothing to clear.

    :raises AgentLinkError: ``permission_denied`` (not admin), ``invalid_arguments``, ``state_io_error``.
    """
    require_admin(app)
    ctx = from_app(app)
    name = parse_role_name(args["role"])
    root = _project_root(args, name)

    def mutate(raw: dict[str, Any]) -> tuple[bool, Any]:
        entry = raw.get("roles", {}).get(name) if isinstance(raw.get("roles"), dict) else None
        if not isinstance(entry, dict):
            return False, None
        if root is not None:
            projects = entry.get("projects")
            if not isinstance(projects, dict) or root not in projects:
                return False, None
            previous = projects.pop(root)
            if not projects:
                del entry["projects"]
            return True, previous
        previous = entry.pop("address", None)
        entry.pop("assignedAt", None)  # the procedure file is kept
        return previous is not None, previous

    cleared, previous = update_table(ctx.state_dir, mutate)
    # the holder gives the role up, and with it the role's leases (its leasePaths stay declared)
    ended = _release_role_paths(app, name) if cleared and root is None else None
    table = load_table(ctx.state_dir)
    apply_handover(app, table, call.caller.address)
    role = table.roles.get(name)
    return {"cleared": cleared, "previousAddress": previous, "role": role_view(ctx, role) if role else None,
            "projectRoot": root, "path": str(table.path), "releasedLeases": ended["released"] if ended else []}


def _table_or_error(ctx: RolesContext) -> tuple[RoleTable | None, dict[str, Any] | None]:
    try:
        return load_table(ctx.state_dir), None
    except AgentLinkError as exc:
        return None, exc.to_dict()


async def list_agent_roles(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Tool ``list_agent_roles``: every valid role, the enforcement mode, problems; an unparsable
    table is reported in ``tableError`` rather than failing the call."""
    ctx = from_app(app)
    table, error = _table_or_error(ctx)
    out: dict[str, Any] = {
        "roles": [],
        "enforcement": enforcement_mode(ctx.config, table),
        "admin": bool(app.config.get(ADMIN_SETTING)),
        "path": str(table_path(ctx.state_dir)),
        "exists": table_path(ctx.state_dir).exists(),
        "problems": [],
        "tableError": error,
    }
    if table is not None:
        out["roles"] = [role_view(ctx, table.roles[n]) for n in sorted(table.roles)]
        out["problems"] = table.problems
        out["handedOver"] = apply_handover(app, table, call.caller.address, wait=False)  # a read never waits
    return out


async def get_agent_role(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Tool ``get_agent_role``: one role and its ``role:<name>`` override policy.

    :raises AgentLinkError: ``not_found`` (``details.role``), ``state_io_error``.
    """
    ctx = from_app(app)
    name = parse_role_name(args["role"])
    table = load_table(ctx.state_dir)
    role = table.roles.get(name)
    if role is None:
        raise AgentLinkError("not_found", f"There is no role {name!r} in roles.json.",
                             {"role": f"role:{name}", "candidates": sorted(table.roles)[:5]},
                             hint="list_agent_roles shows the roles that exist.")
    apply_handover(app, table, call.caller.address, wait=False)  # a read never waits for a writer
    policy = table.policy.get(role.role_address)
    return {"role": role_view(ctx, role, include_text=args.get("includeProcedure", False)),
            "overridePolicy": {k: list(v) for k, v in policy.items()} if policy else None}


def _check_entries(args: dict[str, Any]) -> None:
    errors = [
        {"path": f"{setting}.{i}", "rule": "entry", "expected": '"*", role:<name> or a session address'}
        for setting in POLICY_SETTINGS for i, entry in enumerate(args.get(setting, ())) if not is_policy_entry(entry)
    ]
    if not is_policy_key(args["target"]):
        errors.insert(0, {"path": "target", "rule": "target", "expected": "role:<name> or a session address"})
    if errors:
        raise invalid_arguments(errors)


async def set_agent_override_policy(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Tool ``set_agent_override_policy``: set, keep (omitted) or clear (``[]``) each setting's
    senders for ``target``; a target left with no setting is removed.

    :raises AgentLinkError: ``permission_denied`` (not admin), ``invalid_arguments``, ``state_io_error``.
    """
    require_admin(app)
    ctx = from_app(app)
    _check_entries(args)
    target = args["target"]
    path = table_path(ctx.state_dir)

    def mutate(raw: dict[str, Any]) -> None:
        policy = owned_object(raw, "overridePolicy", path, ctx.state_dir)
        entry = policy.get(target)
        entry = dict(entry) if isinstance(entry, dict) else {}
        for setting in POLICY_SETTINGS:
            if setting not in args:
                continue  # omitted: unchanged
            if args[setting]:
                entry[setting] = list(dict.fromkeys(args[setting]))
            else:
                entry.pop(setting, None)  # []: that setting no longer allows anyone
        if entry:
            policy[target] = entry
        else:
            policy.pop(target, None)

    update_table(ctx.state_dir, mutate)
    policy = load_table(ctx.state_dir).policy.get(target)
    return {"target": target, "policy": {k: list(v) for k, v in policy.items()} if policy else None, "path": str(path)}


async def get_agent_override_policy(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Tool ``get_agent_override_policy``: one target's policy and its effective union over the
    roles it holds, or every policy when no target is given.

    :raises AgentLinkError: ``invalid_arguments`` (target), ``state_io_error``.
    """
    ctx = from_app(app)
    table = load_table(ctx.state_dir)
    out: dict[str, Any] = {"path": str(table.path), "problems": [p for p in table.problems if p["path"].startswith("overridePolicy")]}
    target = args.get("target")
    if target is None:
        out["policies"] = {key: {k: list(v) for k, v in entry.items()} for key, entry in sorted(table.policy.items())}
        return out
    if not is_policy_key(target):
        raise invalid_arguments([{"path": "target", "rule": "target", "expected": "role:<name> or a session address"}])
    policy = table.policy.get(target)
    out.update({"target": target, "policy": {k: list(v) for k, v in policy.items()} if policy else None,
                "effective": effective_policy(table, target)})
    return out


ROLE_VIEW_NOTE = "Each role: role, roleAddress, address (holder), assignedAt, procedure {name, version, sha256, updatedAt, present, pending}, and leasePaths/leaseRoot when it owns files."

ROLE_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="set_agent_role",
        title="Set an agent role",
        description="Give a session a role (router, builder...) so agents can write to role:<name>. Open reply/action messages sent to the role move to the new holder. Optionally replace the role's procedure text. The files the role owns (leasePaths, kept with the role) are leased exclusively for the holder (another session's lease of any of them refuses the whole call: lease_conflict, nothing changed). Needs AGENT_LINK_ROLE_ADMIN=1 in this server's environment.",
        input_schema=closed_object({
            "role": ROLE_ARG,
            "agent": {**AGENT_QUERY, "description": "The new holder: a session address or id."},
            "procedure": {"type": "string", "minLength": 1, "description": "How the holder should handle work sent to the role (at most 64 KiB); shown to the holder, never run."},
            "projectRoot": PROJECT_ROOT,
            "leasePaths": LEASE_PATHS,
            "leaseRoot": LEASE_ROOT,
            "leaseTtlMs": LEASE_TTL,
        }, ("role", "agent")),
        output_fields={"role": OBJ, "previousAddress": ANY, "holder": OBJ, "projectRoot": NSTR, "path": STR,
                       "handedOver": {"type": "array", "items": STR},
                       "leases": {"type": ["array", "null"], "items": OBJ, "description": "The holder's leases of the role's paths; null when the role owns none (or no plugin keeps leases)."}},
        handler=set_agent_role, destructive=True,
    ),
    ToolSpec(
        name="clear_agent_role",
        title="Clear an agent role",
        description="Remove a role's holder (or one project's orchestrator); the procedure and the role's leasePaths are kept, the holder's leases of them end. Mail already sent stays where it is. Needs AGENT_LINK_ROLE_ADMIN=1 in this server's environment.",
        input_schema=closed_object({"role": ROLE_ARG, "projectRoot": PROJECT_ROOT}, ("role",)),
        output_fields={"cleared": BOOL, "previousAddress": ANY, "role": NOBJ, "projectRoot": NSTR, "path": STR,
                       "releasedLeases": {"type": "array", "items": OBJ}},
        handler=clear_agent_role, destructive=True,
    ),
    ToolSpec(
        name="list_agent_roles",
        title="List agent roles",
        description="List the roles in roles.json with their holders and procedures, the role enforcement mode, whether this server may change roles, and any problems found in the file. " + ROLE_VIEW_NOTE,
        input_schema=closed_object({}),
        output_fields={"roles": {"type": "array", "items": OBJ}, "enforcement": OBJ, "admin": BOOL, "path": STR,
                       "exists": BOOL, "problems": {"type": "array", "items": OBJ}, "tableError": NOBJ, "handedOver": OBJ},
        handler=list_agent_roles, read_only=True, idempotent=True,
    ),
    ToolSpec(
        name="get_agent_role",
        title="Get an agent role",
        description="One role: its holder, procedure (text with includeProcedure) and override policy.",
        input_schema=closed_object({"role": ROLE_ARG, "includeProcedure": {"type": "boolean", "default": False}}, ("role",)),
        output_fields={"role": OBJ, "overridePolicy": NOBJ},
        handler=get_agent_role, read_only=True, idempotent=True,
    ),
    ToolSpec(
        name="set_agent_override_policy",
        title="Set an override policy",
        description="Choose which senders may change an existing session's model, effort or working directory (target: role:<name> or an address). An omitted setting is unchanged; [] clears it. Needs AGENT_LINK_ROLE_ADMIN=1 in this server's environment.",
        input_schema=closed_object({"target": POLICY_TARGET, "model": POLICY_LIST, "effort": POLICY_LIST, "cwd": POLICY_LIST}, ("target",)),
        output_fields={"target": STR, "policy": NOBJ, "path": STR},
        handler=set_agent_override_policy, destructive=True,
    ),
    ToolSpec(
        name="get_agent_override_policy",
        title="Get override policies",
        description="Show the override policy of one target (with the effective union over the roles it holds), or every policy.",
        input_schema=closed_object({"target": POLICY_TARGET}),
        output_fields={"target": STR, "policy": NOBJ, "effective": OBJ, "policies": OBJ, "path": STR,
                       "problems": {"type": "array", "items": OBJ}},
        handler=get_agent_override_policy, read_only=True, idempotent=True,
    ),
)
