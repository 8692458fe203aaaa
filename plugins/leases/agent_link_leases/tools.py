"""The lease MCP tools: ``lease_paths``, ``release_paths``, ``list_leases``.

The default project root is the git top level of this server's working directory (a host
starts its MCP server in the session's directory).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from agent_link_core.store import now_ms
from agent_link_core.tools.registry import ToolCall, ToolSpec
from agent_link_core.tools.schemas import ADDRESS, BOOL, PATH

from agent_link_leases.liveness import claim_ending_gone
from agent_link_leases.table import (
    DEFAULT_TTL_MS,
    MAX_REASON_CHARS,
    MAX_TTL_MS,
    TTL_SETTING,
    active,
    project,
    project_warnings,
    release,
)

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App

MAX_PATHS = 100
PATTERN = {**PATH, "maxLength": 4096}
PATTERNS = {"type": "array", "minItems": 1, "maxItems": MAX_PATHS, "items": PATTERN,
            "description": "Files, directories or globs (* and ? within a segment, ** across segments, [a-z] classes), relative to the project root or absolute inside it. A directory covers what is below it."}
ROOT = {**PATH, "maxLength": 4096,
        "description": "Absolute project root; default: the git top level of this server's working directory."}
LEASE = {"type": "object", "properties": {
    "id": {"type": "integer"}, "holder": {"type": "string"}, "projectRoot": {"type": "string"},
    "path": {"type": "string"}, "exclusive": {"type": "boolean"}, "reason": {"type": ["string", "null"]},
    "createdAt": {"type": "string"}, "expiresAt": {"type": "string"}, "expiresInMs": {"type": "integer"},
    "untilResolved": {"type": ["string", "null"], "description": "The message whose resolution ends this lease (a project worker's task)."},
    "claimKey": {"type": ["string", "null"], "description": "What another plugin claimed it for: role:<name> (ends when the role is cleared) or a project worker's task message id."},
}, "required": ["id", "holder", "projectRoot", "path", "exclusive", "reason", "createdAt", "expiresAt", "expiresInMs", "untilResolved", "claimKey"]}
LEASES = {"type": "array", "items": LEASE}
#: a gone holder whose leases a claim ended (agent_link_leases.liveness)
#: another holder's lease overlapping a pattern the caller asked to release (left as it is)
HELD_BY_OTHER = {"type": "object", "properties": {
    "path": {"type": "string", "description": "The pattern as you gave it."}, "holder": {"type": "string"},
    "paths": {"type": "array", "items": {"type": "string"}, "description": "The holder's leased patterns overlapping it."},
    "exclusive": {"type": "boolean"}, "expiresAt": {"type": "string"},
}, "required": ["path", "holder", "paths", "exclusive", "expiresAt"]}
ENDED = {"type": "object", "properties": {
    "holder": {"type": "string"}, "why": {"type": "string", "enum": ["session_not_running", "session_archived", "presence_expired"]},
    "paths": {"type": "array", "items": {"type": "string"}},
}, "required": ["holder", "why", "paths"]}

LEASE_INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "paths": PATTERNS,
        "exclusive": {**BOOL, "default": True, "description": "true: nobody else may lease an overlapping path; false: shared with other shared leases."},
        "ttlMs": {"type": "integer", "minimum": 1000, "maximum": MAX_TTL_MS,
                  "description": f"Time to live in ms (default {TTL_SETTING}, one hour unless set); claim again to renew."},
        "reason": {"type": "string", "minLength": 1, "maxLength": MAX_REASON_CHARS, "description": "Why: shown to anyone your lease stops."},
        "projectRoot": ROOT,
    },
    "required": ["paths"],
    "additionalProperties": False,
}
RELEASE_INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {"paths": {**PATTERNS, "description": "The patterns to release, as leased; none: every lease you hold."},
                   "projectRoot": ROOT},
    "additionalProperties": False,
}
LIST_INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {**PATTERN, "description": "Only leases overlapping this file, directory or glob (of the project root)."},
        "holder": {**ADDRESS, "description": "Only this holder's leases."},
        "projectRoot": {**ROOT, "description": "Only leases under this absolute root (default with path: the git top level of this server's working directory; else every root)."},
    },
    "additionalProperties": False,
}


async def lease_paths(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Tool ``lease_paths``: claim or renew every path, or none; the leases of a clashing holder
known gone end first (:func:`agent_link_leases.liveness.claim_ending_gone`, warning
``lease_holder_gone``); a lease of the whole project is granted with warning
``lease_covers_project``."""
    caller = app.require_caller(call.caller)
    root = project(args.get("projectRoot"), os.getcwd())
    ttl = args.get("ttlMs") or app.config.get(TTL_SETTING) or DEFAULT_TTL_MS
    out = await claim_ending_gone(app, caller.address, root, list(args["paths"]), exclusive=args.get("exclusive", True),
                                  reason=args.get("reason"), ttl_ms=int(ttl))
    for gone in out["ended"]:
        call.warnings.append({"code": "lease_holder_gone", "details": gone,
                              "message": f"{gone['holder']} is gone ({gone['why']}): its leases of {', '.join(gone['paths'])} ended."})
    call.warnings.extend(project_warnings(out))
    return out


async def release_paths(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Tool ``release_paths``: release the given patterns, or every lease of the caller; a
    pattern the caller holds no lease of is named in ``notHeld`` (warning ``not_held``), and
    in ``heldByOthers`` when others' leases overlap it (left as they are, warning
    ``held_by_others``)."""
    caller = app.require_caller(call.caller)
    typed = args.get("paths")
    root = project(args.get("projectRoot"), os.getcwd()) if typed is not None else None
    out = release(app.store, caller.address, root, typed, now_ms())
    if out["notHeld"]:
        call.warnings.append({"code": "not_held", "message": f"You held no lease of {', '.join(out['notHeld'])}.",
                              "details": {"paths": out["notHeld"]}})
    for other in out["heldByOthers"]:
        call.warnings.append({"code": "held_by_others", "details": other,
                              "message": f"{other['path']} is held by {other['holder']} (its lease of {', '.join(other['paths'])}), not by you:"
                                         " it was not released. Ask them to release it (message_agent)."})
    return out


async def list_leases(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Tool ``list_leases``: active leases (who holds what, until when, why), oldest first."""
    path = args.get("path")
    given = args.get("projectRoot")
    root = project(given, os.getcwd()) if (given is not None or path is not None) else None
    return {"projectRoot": root.path if root else None,
            "leases": active(app.store, now_ms(), root=root, path=path, holder=args.get("holder"))}


LEASE_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="lease_paths",
        title="Lease paths",
        description="Before editing files other agents may touch, claim them: files, directories or globs under the project root, exclusive (default) or shared, with a reason and a time to live. Claiming again renews. A claim overlapping another agent's lease is refused whole (error lease_conflict), unless that agent's session has ended (its leases end then, warning lease_holder_gone): details.conflicts names each holder, their paths, reason and expiry, and a message you can send them. While you hold a lease, other sessions' edit tools and the shell writes visible in a command's text (redirections, rm, mv, sed -i...) are refused on those paths; what a program writes on its own (python x.py, make) is not seen.",
        input_schema=LEASE_INPUT,
        output_fields={"projectRoot": {"type": "string"}, "leases": LEASES, "renewed": {"type": "array", "items": {"type": "string"}},
                       "ended": {"type": "array", "items": ENDED}},
        handler=lease_paths,
    ),
    ToolSpec(
        name="release_paths",
        title="Release leased paths",
        description="Release leases you hold: the given paths (as you leased them), or all of yours when none are given. Release as soon as you are done editing. Another agent's lease is never released: heldByOthers names who holds what you asked for.",
        input_schema=RELEASE_INPUT,
        output_fields={"released": LEASES, "notHeld": {"type": "array", "items": {"type": "string"}},
                       "heldByOthers": {"type": "array", "items": HELD_BY_OTHER}},
        handler=release_paths, idempotent=True,
    ),
    ToolSpec(
        name="list_leases",
        title="List leases",
        description="Who holds which paths, exclusive or shared, until when and why; filter by a path (leases overlapping it) or a holder.",
        input_schema=LIST_INPUT,
        output_fields={"projectRoot": {"type": ["string", "null"]}, "leases": LEASES},
        handler=list_leases, read_only=True, idempotent=True,
    ),
)
