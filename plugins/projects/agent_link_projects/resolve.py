"""Which Codex thread is a project's orchestrator (``resolve_project_orchestrator`` and the
tools built on it).

Order, first hit wins:

1. an explicit ``orchestratorThreadId`` / ``threadId``: a thread id (or ``codex:<id>``), or
   ``role:<name>`` (resolved by the roles plugin) → source ``explicit``;
2. the orchestrator role assigned for this ``projectRoot`` (``roles.orchestrator.projects``)
   → ``role`` (scope ``project``);
3. the binding file (:mod:`agent_link_projects.binding`) → ``binding``; when its thread cannot
   be read, a ranked search (never a role) → ``binding-unreadable-search``;
4. the orchestrator role's general holder, only when ``projectRoot`` was given and there is
   no binding file → ``role`` (scope ``role``);
5. a ranked thread search (``resolve_codex_thread``) → ``search``: the given query, else
   "project orchestrator <projectId>", else "<root folder name> project orchestrator"; a tie
   at the top score is ``ambiguous``.

A role holder that is not a Codex thread, or whose thread cannot be read, is passed over
(listed in ``passedOver``). A query alone never selects a role holder, and a role decision
never carries a binding's projectId. Without the roles plugin steps 2 and 4 are skipped and
the result says so (``rolesAvailable: false`` and a ``roles_unavailable`` warning).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.tools.registry import ToolCall
from agent_link_projects.binding import Binding, plain_root, read_binding
from agent_link_projects.peers import ROLES_UNAVAILABLE, roles_api, run_tool

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App

ORCHESTRATOR_ROLE = "orchestrator"
SEARCH_WORDS = "project orchestrator"
THREAD_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


def _bare(value: str, path: str) -> str:
    tid = value.removeprefix("codex:")
    if not tid or len(tid) > 128 or not set(tid) <= THREAD_ID_CHARS:
        raise invalid_arguments([{"path": path, "rule": "pattern", "expected": "a Codex thread id, codex:<id> or role:<name>"}])
    return tid


async def verify_thread(app: App, thread_id: str, call: ToolCall, use_fallback: bool = True) -> dict[str, Any]:
    """``{checked, readable, threadId, thread|error, source}``: can the thread be read now
    (``get_codex_thread``)? A missing codex plugin is an error, not an unreadable thread."""
    try:
        got = await run_tool(app, "get_codex_thread", {"threadId": thread_id, "recentItems": 0, "useLocalFallback": use_fallback}, call)
    except AgentLinkError as exc:
        if exc.code == "unsupported":
            raise
        return {"checked": True, "readable": False, "threadId": thread_id, "error": exc.to_dict(), "source": None}
    return {"checked": True, "readable": True, "threadId": thread_id, "thread": got.get("thread"), "source": got.get("source")}


async def resolve_orchestrator(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Run the resolution order for the orchestrator-target arguments ``args``
    (``projectRoot``, ``projectId``, ``orchestratorThreadId``/``threadId``, ``query``, ``cwd``,
    ``archiveScope``, ``useLocalFallback``, ``limit``).

    :returns: the result of ``resolve_project_orchestrator`` (``status`` resolved, ambiguous
        or not_found; not_found and ambiguous are verdicts, not errors).
    :raises AgentLinkError: ``invalid_arguments`` (bad ids, an invalid binding file, nothing to
        resolve with), ``unsupported`` (codex missing; roles missing for ``role:<name>``),
        ``not_found`` (an explicit thread, or an explicit role's holder thread, that cannot be
        read; an explicit role nobody holds), ``state_io_error`` (roles.json unreadable).
    """
    use_fallback = args.get("useLocalFallback", True)
    root = plain_root(args["projectRoot"]) if args.get("projectRoot") else None
    api = roles_api(app)
    out: dict[str, Any] = {
        "status": "resolved", "source": None, "role": None, "threadId": None, "address": None, "projectRoot": root,
        "projectId": args.get("projectId"), "binding": None, "bindingVerification": None, "verification": None,
        "query": None, "selection": None, "candidates": [], "listSource": None, "appServerError": None,
        "rolesAvailable": api is not None, "passedOver": [],
    }
    if api is None:
        call.warnings.append(dict(ROLES_UNAVAILABLE))

    def decided(source: str, thread_id: str, verification: dict[str, Any], role: dict[str, Any] | None = None) -> dict[str, Any]:
        out.update({"source": source, "threadId": thread_id, "address": f"codex:{thread_id}", "verification": verification,
                    "role": role})
        return out

    # 1. explicit
    explicit = args.get("orchestratorThreadId") or args.get("threadId")
    if explicit:
        path = "orchestratorThreadId" if args.get("orchestratorThreadId") else "threadId"
        if explicit.startswith("role:"):
            holder = await _role_holder(app, api, explicit, call)
            if not holder.startswith("codex:"):
                raise AgentLinkError("not_found", f"{explicit} is held by {holder}, which is not a Codex thread.",
                                     {"query": explicit, "candidates": [{"address": holder}]},
                                     hint="Project orchestrators are Codex threads; name one with orchestratorThreadId.")
            tid = holder.split(":", 1)[1]
            role = {"name": explicit[5:], "via": explicit, "address": holder, "scope": "role", "projectRoot": None}
        else:
            tid, role = _bare(explicit, path), None
        verification = await verify_thread(app, tid, call, use_fallback)
        if not verification["readable"]:
            raise AgentLinkError("not_found", f"The orchestrator thread {tid} cannot be read.",
                                 {"id": tid, "candidates": [], "verification": verification},
                                 hint="Check the thread id (list_codex_threads), or resolve by projectRoot instead.")
        return decided("explicit", tid, verification, role)
    # 2. the orchestrator role for this project
    if root is not None and api is not None:
        holder = api.project_orchestrator(app, root)
        if holder is not None:
            usable = await _usable_holder(app, holder, "project-role", out, call, use_fallback)
            if usable is not None:
                role = {"name": ORCHESTRATOR_ROLE, "via": f"role:{ORCHESTRATOR_ROLE}", "address": holder, "scope": "project",
                        "projectRoot": root}
                return decided("role", holder.split(":", 1)[1], usable, role)
    # 3. the binding file
    binding: Binding | None = read_binding(root) if root is not None else None
    if binding is not None:
        out["binding"] = binding.view()
        out["projectId"] = binding.project_id
        verification = await verify_thread(app, binding.thread_id, call, use_fallback)
        out["bindingVerification"] = verification
        if verification["readable"]:
            return decided("binding", binding.thread_id, verification)
        return await _search(app, args, call, out, "binding-unreadable-search", root, binding.project_id)
    # 4. the orchestrator role's general holder (projectRoot given, no binding file)
    if root is not None and api is not None:
        try:
            routed = await app.hooks.acall("agent_link_resolve_address", address=f"role:{ORCHESTRATOR_ROLE}", caller_address=call.caller.address)
        except AgentLinkError as exc:
            if exc.code not in ("not_found", "ambiguous"):
                raise
            routed = None
            if exc.code == "ambiguous":
                out["passedOver"].append({"step": "role", "address": f"role:{ORCHESTRATOR_ROLE}", "reason": "ambiguous"})
        if routed is not None:
            holder = routed["address"]
            general = await _usable_holder(app, holder, "role", out, call, use_fallback)
            if general is not None:
                role = {"name": ORCHESTRATOR_ROLE, "via": f"role:{ORCHESTRATOR_ROLE}", "address": holder, "scope": "role",
                        "projectRoot": None}
                return decided("role", holder.split(":", 1)[1], general, role)
    # 5. ranked search
    return await _search(app, args, call, out, "search", root, args.get("projectId"))


async def _role_holder(app: App, api: Any, address: str, call: ToolCall) -> str:
    if api is None:
        raise AgentLinkError("unsupported", f"{address} needs the roles plugin (agent-link-roles), which is not installed here.",
                             {"capability": "roles"}, hint="Name the orchestrator thread by id, or install the roles plugin.")
    routed = await app.hooks.acall("agent_link_resolve_address", address=address, caller_address=call.caller.address)
    if routed is None:
        raise AgentLinkError("not_found", f"Nobody holds {address}.", {"role": address, "candidates": []})
    return str(routed["address"])


async def _usable_holder(app: App, holder: str, step: str, out: dict[str, Any], call: ToolCall,
                         use_fallback: bool) -> dict[str, Any] | None:
    """The holder's verification when it is a readable Codex thread; else None, noted in
    ``passedOver``."""
    if not holder.startswith("codex:"):
        out["passedOver"].append({"step": step, "address": holder, "reason": "not_a_codex_thread"})
        return None
    verification = await verify_thread(app, holder.split(":", 1)[1], call, use_fallback)
    if not verification["readable"]:
        out["passedOver"].append({"step": step, "address": holder, "reason": "unreadable"})
        return None
    return verification


async def _search(app: App, args: dict[str, Any], call: ToolCall, out: dict[str, Any], source: str, root: str | None,
                  project_id: str | None) -> dict[str, Any]:
    query = (args.get("query") or "").strip()
    if not query and project_id:
        query = f"{SEARCH_WORDS} {project_id}"
    if not query and root is not None:
        query = f"{os.path.basename(root.rstrip('/')) or root} {SEARCH_WORDS}"
    if not query:
        raise invalid_arguments([{"path": "projectRoot", "rule": "required",
                                  "expected": "projectRoot, projectId, orchestratorThreadId/threadId or query"}])
    search: dict[str, Any] = {"query": query, "limit": args.get("limit", 10), "archiveScope": args.get("archiveScope", "all"),
                              "useLocalFallback": args.get("useLocalFallback", True)}
    cwd = args.get("cwd") or root
    if cwd:
        search["cwd"] = cwd
    found = await run_tool(app, "resolve_codex_thread", search, call)
    candidates = found.get("candidates") or []
    top = candidates[0].get("score") if candidates else None
    tied = [c["id"] for c in candidates if c.get("score") == top] if candidates else []
    out.update({
        "status": found["status"], "source": source, "query": query, "candidates": candidates, "listSource": found.get("source"),
        "appServerError": found.get("appServerError"),
        "selection": {"bestId": (found.get("best") or {}).get("id"), "topScore": top, "strategy": "ranked-thread-search",
                      "ambiguous": found["status"] == "ambiguous", "tiedCandidateCount": len(tied) if found["status"] == "ambiguous" else min(len(tied), 1),
                      "tiedCandidateIds": tied if found["status"] == "ambiguous" else tied[:1]},
    })
    if found["status"] == "resolved":
        best = found["best"]
        out.update({"threadId": best["id"], "address": f"codex:{best['id']}",
                    "verification": {"checked": True, "readable": True, "threadId": best["id"], "thread": best,
                                     "source": found.get("source")}})
    return out


def require_resolved(resolution: dict[str, Any]) -> str:
    """The orchestrator thread id of a resolution, for tools that must send.

    :raises AgentLinkError: ``ambiguous`` (with the tied candidates) or ``not_found``.
    """
    if resolution["status"] == "resolved":
        return str(resolution["threadId"])
    short = [{"address": f"codex:{c['id']}", "title": c.get("name") or c.get("preview"), "score": c.get("score")}
             for c in resolution["candidates"][:5]]
    if resolution["status"] == "ambiguous":
        raise AgentLinkError("ambiguous", f"Several threads match {resolution['query']!r} equally well as the project orchestrator.",
                             {"query": resolution["query"], "candidates": short},
                             hint="Name the orchestrator with orchestratorThreadId, or write a binding file for the project.")
    raise AgentLinkError("not_found", f"No project orchestrator thread was found (search {resolution['query']!r}).",
                         {"query": resolution["query"], "candidates": short},
                         hint="Name the orchestrator with orchestratorThreadId, assign the orchestrator role for the project, or write a binding file.")
