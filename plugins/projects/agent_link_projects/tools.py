"""The six project tools: resolve and message a project's orchestrator, launch a worker
thread, return a worker's result, register a dependency handoff, check coordination
obligations. Their arguments and results are described in ``plugins/projects/README.md``.

Every Codex thread is reached through the codex plugin's registered tools
(:func:`agent_link_projects.peers.run_tool`) and every message through the core's
``message_agent`` handler, named after the tool that sends it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.mailbox import new_message_id, parse_iso_ms
from agent_link_core.tools import core_tools
from agent_link_core.tools.registry import ToolCall, ToolSpec
from agent_link_core.tools.schemas import PATH, PATHS, POLL_MS, TIMEOUT_MS, ULID, closed_object, limit_arg
from agent_link_projects import obligations
from agent_link_projects.peers import run_tool
from agent_link_projects.prompt import DEFAULT_ROLE, inert, worker_prompt
from agent_link_projects.resolve import (
    require_resolved,
    resolve_orchestrator,
    verify_thread,
)

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App

ANY: dict[str, Any] = {}
STR = {"type": "string"}
NESTR = {"type": "string", "minLength": 1}
BOOL = {"type": "boolean"}
STR_LIST = {"type": "array", "items": {"type": "string"}}
SCOPE = {"type": "string", "enum": ["active", "archived", "all"], "default": "all"}
CWD_FILTER = {**PATHS,
              "description": "Search filter only: threads whose working directory is exactly this (never used as a turn cwd)."}
RESULT_STATUSES = ("done", "done_with_concerns", "blocked")
RESULT_HEADING = "Project worker result"
HANDOFF_TAG = "dependency-handoff"
REQUIRED_PAYLOAD = ("status: ready or blocked",
                    "the exact command, API or spec details the origin thread should use",
                    "safety, suppression or compatibility constraints",
                    "evidence of verification, or the remaining blocker")




#: how a message to a Codex thread is delivered: the send options these tools pass on (the
#: codex plugin's harness declares the same options for ``message_agent``)
DELIVERY_OPTIONS: dict[str, Any] = {
    "mode": {"type": "string", "enum": ["auto", "start_turn", "steer_active"], "description": "How to deliver into a turn-based session."},
    "resumeIfNeeded": {"type": "boolean", "description": "Resume an unloaded session first (default true)."},
    "expectedTurnId": {"type": "string"},
    "model": {"type": "string", "description": "Model change request (subject to the override policy)."},
    "effort": {"type": "string", "enum": ["minimal", "low", "medium", "high", "xhigh"]},
}
TARGET: dict[str, Any] = {
    "projectRoot": {**PATH, "description": "The project's root directory (absolute)."},
    "projectId": {"type": "string", "minLength": 1, "maxLength": 200},
    "orchestratorThreadId": {"type": "string", "minLength": 1, "maxLength": 140,
                             "description": "The orchestrator: a Codex thread id, codex:<id>, or role:<name>."},
    "threadId": {"type": "string", "minLength": 1, "maxLength": 140, "description": "Same as orchestratorThreadId."},
    "query": {"type": "string", "minLength": 1, "maxLength": 300, "description": "Words to search threads with."},
    "cwd": CWD_FILTER,
    "archiveScope": SCOPE,
    "useLocalFallback": {"type": "boolean", "default": True},
}
TURN_OPTIONS: dict[str, Any] = {
    "anticipation": core_tools.ANTICIPATION, "replyBy": core_tools.REPLY_BY,
    "waitForReply": {"type": "boolean", "default": False}, "timeoutMs": TIMEOUT_MS, "pollIntervalMs": POLL_MS,
    "receipt": core_tools.RECEIPT, "messageId": core_tools.MESSAGE_ID,
    **DELIVERY_OPTIONS,
}
SEND_KEYS = tuple(TURN_OPTIONS)


def _target_args(args: dict[str, Any]) -> dict[str, Any]:
    return {k: args[k] for k in (*TARGET, "limit") if k in args}


def _send_args(args: dict[str, Any], *, reply: bool = True) -> dict[str, Any]:
    """The ``message_agent`` options among ``args`` (``replyToMessageId`` too unless the tool
    gives it another meaning)."""
    keys = (*SEND_KEYS, "replyToMessageId") if reply else SEND_KEYS
    return {k: args[k] for k in keys if k in args}


def _recipient(resolution: dict[str, Any]) -> str:
    """Where to send: the role address when the role's general holder decided (so role
    procedures and handover apply), else the thread."""
    role = resolution.get("role")
    if role is not None and role["scope"] == "role":
        return str(role["via"])
    return f"codex:{resolution['threadId']}"


def _merge_receipt(given: dict[str, Any] | None, purpose: str, cleanup: str, tags: list[str],
                   origin_thread: str | None = None) -> dict[str, Any]:
    receipt = dict(given or {})
    receipt.setdefault("purpose", purpose)
    receipt.setdefault("cleanupRecommendation", cleanup)
    receipt["tags"] = list(dict.fromkeys([*tags, *(receipt.get("tags") or [])]))
    if origin_thread is not None:
        receipt.setdefault("originThreadId", origin_thread)
    return receipt


def _caller_thread(call: ToolCall) -> str | None:
    """The calling Codex thread's id, when the caller is one."""
    caller = call.caller
    if caller.host == "codex" and caller.known:
        return caller.address.split(":", 1)[1]
    return None


# resolve / message ----------------------------------------------------------------------
async def resolve_project_orchestrator(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Tool handler: the resolution order of :mod:`agent_link_projects.resolve`."""
    return await resolve_orchestrator(app, _target_args(args), call)


async def message_project_orchestrator(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Tool handler: resolve the orchestrator, then ``message_agent`` to it (recorded as this
    tool, so role enforcement counts it as role-addressed)."""
    resolution = await resolve_orchestrator(app, _target_args(args), call)
    require_resolved(resolution)
    pid = resolution.get("projectId")
    send = _send_args(args)
    send["receipt"] = _merge_receipt(args.get("receipt"), "project_orchestrator_message", "review_before_archive",
                                     ["project-orchestrator", *([str(pid)] if pid else [])])
    result = await core_tools.message_agent(app, {**send, "to": _recipient(resolution), "message": args["message"]}, call,
                                            tool="message_project_orchestrator")
    return {"source": "project-orchestrator", "action": "sent_message", "resolution": resolution, "messageResult": result}


# workers ------------------------------------------------------------------------------------
async def launch_project_worker(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Tool handler: resolve the orchestrator, start a Codex thread in the project root and
    give it the worker prompt as its first message (anticipation ``action``: the worker
    resolves it with ``return_project_work_result``)."""
    if args.get("effort") and not call.caller.known:
        # an effort change on the new thread is granted to its launcher, which must be named
        raise invalid_arguments([{"path": "effort", "rule": "requires_caller",
                                  "expected": "a caller with an address (a host session or AGENT_LINK_ADDRESS)"}])
    resolution = await resolve_orchestrator(app, _target_args(args), call)
    orchestrator = require_resolved(resolution)
    binding = resolution.get("binding") or {}
    role_label = inert(args.get("workerRole") or args.get("role")) or DEFAULT_ROLE
    root = resolution.get("projectRoot")
    pid = resolution.get("projectId")
    wanted = args.get("leasePaths")
    prompt = worker_prompt(role=role_label, orchestrator_thread_id=orchestrator, project_root=root, project_id=pid,
                           policy_version=binding.get("policyVersion"), task=args["task"], instructions=args.get("instructions"),
                           leased=wanted)
    name = args.get("name") or (f"{role_label}: {inert(pid)}" if inert(pid) else role_label)
    key, _ = core_tools.idempotency_key(args)
    earlier = app.mailbox.get_row(key) if key is not None else None
    if earlier is not None:  # a retry: the worker was launched and given its task by the first call
        task_args = {"to": earlier["recipient"], "message": prompt, "anticipation": "action", "messageId": args["messageId"]}
        sent = await core_tools.message_agent(app, task_args, call)
        worker = earlier["recipient"].split(":", 1)[1]
        return {"source": "project-worker", "action": "duplicate", "resolution": resolution, "workerPrompt": prompt,
                "workerThreadId": worker, "taskMessageId": sent["messageId"], "duplicate": True,
                "launchResult": {"threadId": worker, "address": earlier["recipient"], "messageId": sent["messageId"],
                                 "delivery": sent["delivery"], "deliveredVia": sent.get("deliveredVia"), "taskMessage": sent}}
    task_id = key or new_message_id()  # the task message's stored id (a UUID messageId is stored as a ULID)
    lease = None
    if wanted:
        # Claimed before launching, under a stand-in holder and the task's id, so that a clash
        # launches nothing and nobody can take the paths while the worker starts.
        lease = {"paths": wanted, "project_root": _lease_root(root), "reason": f"project worker ({role_label}): {inert(args['task'])}",
                 "ttl_ms": args.get("leaseTtlMs"), "until_resolved": task_id, "key": task_id}
        launching = f"a project worker {call.caller.address if call.caller.known else 'someone'} is launching (task {task_id})"
        if await _claim(app, launching, lease) is None:
            raise invalid_arguments([{"path": "leasePaths", "rule": "plugin", "expected": "agent-link-leases installed and enabled"}],
                                    "leasePaths needs the leases plugin (agent-link-leases), which is not installed, is disabled "
                                    "or failed (agent-link health lists plugin problems); nothing was launched.")
    launch: dict[str, Any] = {"name": name[:200], "ephemeral": args.get("ephemeral", False), "openInGui": False}
    launch.update({k: args[k] for k in ("model", "modelProvider", "serviceTier") if k in args})
    if root:
        launch["cwd"] = root
    receipt = _merge_receipt(args.get("receipt"), "project_worker_launch", "review_before_archive",
                             ["project-worker", *([str(pid)] if pid else [])])
    try:
        launched = await run_tool(app, "launch_codex_thread", {**launch, "receipt": receipt}, call)
    except BaseException:
        if lease is not None:
            _release(app, task_id)
        raise
    worker = launched["threadId"]
    task = {"to": f"codex:{worker}", "message": prompt, "anticipation": "action", "receipt": receipt,
            **({"messageId": args["messageId"]} if key is not None else {"messageId": task_id} if lease is not None else {})}
    leases = None
    if lease is not None:
        # handed to the worker's session (same key: one transaction), before its task arrives
        try:
            claimed = await _claim(app, f"codex:{worker}", lease)
            leases = claimed["leases"] if claimed else None
        except AgentLinkError as exc:
            # only when a person ended the stand-in's lease during the launch (agent-link release --holder)
            # and another session took the paths: the worker runs, told nothing is leased
            _release(app, task_id)
            call.warnings.append({"code": "worker_paths_not_leased", "message": f"{exc.message} The worker was launched without them.",
                                  "details": {"error": exc.code, **exc.details}})
    if args.get("effort"):
        task["effort"] = args["effort"]
    try:
        sent = await core_tools.message_agent(app, task, call)
    except BaseException:  # no task message, so nothing would resolve (and end) the leases
        if lease is not None:
            _release(app, task_id)
        raise
    launched.update({"messageId": sent["messageId"], "delivery": sent["delivery"], "deliveredVia": sent.get("deliveredVia"),
                     "turnId": sent.get("turnId"), "taskMessage": sent})
    return {"source": "project-worker", "action": "launched_worker", "resolution": resolution, "workerPrompt": prompt,
            "workerThreadId": worker, "taskMessageId": sent["messageId"], "launchResult": launched,
            **({"leases": leases} if lease is not None else {})}


async def _claim(app: App, holder: str, lease: dict[str, Any]) -> dict[str, Any] | None:
    """Claim ``lease`` (``paths``, ``project_root``, ``reason``, ``ttl_ms``, ``until_resolved``, ``key``) for ``holder``
    through the leases plugin's ``agent_link_claim_paths``; None when no plugin claims files (or it failed, reported).
    :raises AgentLinkError: its refusal (``lease_conflict``)."""
    claimed = await app.hooks.acall("agent_link_claim_paths", holder=holder, **lease)
    return claimed if isinstance(claimed, dict) else None


def _release(app: App, key: str) -> None:
    """End what was claimed under ``key`` (``agent_link_release_claims``; nothing without the leases plugin)."""
    app.hooks.call("agent_link_release_claims", key=key)


def _lease_root(root: str | None) -> str:
    """The project root ``leasePaths`` are read against: the resolved one; there must be one."""
    if not root:
        raise invalid_arguments([{"path": "leasePaths", "rule": "requires_project_root",
                                  "expected": "a project root (projectRoot, or one the orchestrator's binding names)"}],
                                "leasePaths are read against the project root, and none was given or resolved.")
    return root


def _returned_at(row: Any) -> str | None:
    """The ``returnedAt`` of a result message sent earlier under the same ``messageId`` (a
    retry carries the first call's time, so its content is the same), or None."""
    if row is None or not row["body"].startswith(RESULT_HEADING):
        return None
    try:
        value = json.loads(row["body"][len(RESULT_HEADING):]).get("returnedAt")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def result_message(fields: dict[str, Any]) -> str:
    """The worker result message: a heading line, a blank line, the result as indented JSON."""
    return f"{RESULT_HEADING}\n\n{json.dumps(fields, indent=2, ensure_ascii=False)}"


async def return_project_work_result(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Tool handler: send the structured result to the orchestrator; with
    ``replyToMessageId`` also resolve that task message ``done`` (when the orchestrator sent
    the task, the result travels as the note of that resolution: one message)."""
    status = args.get("resultStatus")
    if status is None:
        raise invalid_arguments([{"path": "resultStatus", "rule": "required", "expected": " | ".join(RESULT_STATUSES)}])
    if "summary" in args and "result" in args and args["summary"] != args["result"]:
        raise invalid_arguments([{"path": "result", "rule": "conflict", "expected": "the same value as summary, or omit it"}])
    worker = args["workerThreadId"].removeprefix("codex:") if args.get("workerThreadId") else _caller_thread(call)
    task = app.mailbox.require(args["replyToMessageId"]) if args.get("replyToMessageId") else None
    resolution = await resolve_orchestrator(app, _target_args(args), call)
    orchestrator = require_resolved(resolution)
    key, _ = core_tools.idempotency_key(args)
    earlier = app.mailbox.get_row(key) if key is not None else None  # a retry: the first call sent it
    fields = {
        "status": status, "workerThreadId": worker, "projectId": resolution.get("projectId"),
        "projectRoot": resolution.get("projectRoot"), "summary": args.get("summary") or args.get("result") or "",
        "changedPaths": args.get("changedPaths", []), "testsRun": args.get("testsRun", []), "blockers": args.get("blockers", []),
        "nextSteps": args.get("nextSteps", []), "details": args.get("details", {}),
        "returnedAt": _returned_at(earlier) or datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
    }
    text = result_message(fields)
    receipt = _merge_receipt(args.get("receipt"), "project_work_result", "review_before_archive",
                             ["project-work-result", f"status:{status}"])
    send = {**_send_args(args, reply=False), "receipt": receipt}
    out: dict[str, Any] = {"source": "project-worker-result", "resolution": resolution, "message": text, "result": fields}
    if task is not None and task["from_addr"] == f"codex:{orchestrator}":
        answered = await app.reply(caller=call.caller, message_id=task["id"], resolution="done", message=text,
                                   arguments={"receipt": receipt}, meta=call.meta, reply_id=key)
        return {**out, "action": "resolved_task_done_with_result", "messageResult": answered, "taskResolution": answered["resolution"]}
    if task is not None and earlier is None:
        # resolve first: a wrong recipient or an already resolved task sends nothing
        done = await app.reply(caller=call.caller, message_id=task["id"], resolution="done", meta=call.meta)
        out["taskResolution"] = done["resolution"]
    elif task is not None:  # a retry: the first call resolved it
        out["taskResolution"] = app.mailbox.state(task).resolution
    result = await core_tools.message_agent(app, {**send, "to": _recipient(resolution), "message": text}, call,
                                            tool="return_project_work_result")
    return {**out, "action": "sent_result" + ("+resolved_task_done" if task is not None else ""), "messageResult": result}


# handoffs -------------------------------------------------------------------------------------
PROJECT_KEYS = ("projectRoot", "projectId", "orchestratorThreadId")


def _callback(args: dict[str, Any], call: ToolCall) -> tuple[str, dict[str, Any] | None]:
    supplied = args.get("callbackThreadId") or args.get("originThreadId")
    supplied_id = supplied.removeprefix("codex:") if supplied else None
    runtime = _caller_thread(call)
    if runtime is not None:
        mismatch = None
        if supplied_id and supplied_id != runtime:
            mismatch = {"supplied": supplied_id, "used": runtime,
                        "reason": "the caller's runtime thread is the callback; a supplied id counts only without runtime context"}
        return runtime, mismatch
    if supplied_id:
        return supplied_id, None
    raise invalid_arguments([{"path": "callbackThreadId", "rule": "required",
                              "expected": "the Codex thread to call back (the caller is not a Codex thread)"}])


async def _handoff_target(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    fallback = args.get("useLocalFallback", True)
    project = any(args.get(k) for k in PROJECT_KEYS)
    direct = args.get("targetThreadId") or (None if project else args.get("threadId"))
    if direct:
        tid = direct.removeprefix("codex:")
        verification = await verify_thread(app, tid, call, fallback)
        if not verification["readable"]:
            raise AgentLinkError("not_found", f"The target thread {tid} cannot be read.", {"id": tid, "candidates": []},
                                 hint="Check the id with list_codex_threads.")
        return {"kind": "thread", "threadId": tid, "to": f"codex:{tid}", "source": "explicit",
                "thread": verification.get("thread"), "resolution": None}
    if project:
        resolution = await resolve_orchestrator(app, _target_args(args), call)
        tid = require_resolved(resolution)
        return {"kind": "project_orchestrator", "threadId": tid, "to": _recipient(resolution), "source": resolution["source"],
                "thread": (resolution.get("verification") or {}).get("thread"), "resolution": resolution}
    query = args.get("targetQuery") or args.get("query")
    if query:
        search: dict[str, Any] = {"query": query, "limit": args.get("limit", 10), "archiveScope": args.get("archiveScope", "all"),
                                  "useLocalFallback": fallback}
        if args.get("targetCwd") or args.get("cwd"):
            search["cwd"] = args.get("targetCwd") or args.get("cwd")
        found = await run_tool(app, "resolve_codex_thread", search, call)
        if found["status"] != "resolved":
            short = [{"address": f"codex:{c['id']}", "title": c.get("name") or c.get("preview")} for c in found.get("candidates", [])[:5]]
            code = "ambiguous" if found["status"] == "ambiguous" else "not_found"
            raise AgentLinkError(code, f"The target query {query!r} is {found['status'].replace('_', ' ')}.",
                                 {"query": query, "candidates": short}, hint="Give targetThreadId instead.")
        best = found["best"]
        return {"kind": "thread_search", "threadId": best["id"], "to": f"codex:{best['id']}", "source": "search",
                "thread": best, "resolution": found}
    raise invalid_arguments([{"path": "targetThreadId", "rule": "required",
                              "expected": "targetThreadId, project arguments (projectRoot, projectId, orchestratorThreadId) or targetQuery"}])


def handoff_message(*, name: str, callback: str, contract: str, deadline: str | None, evidence: list[str],
                    context: str | None, mismatch: dict[str, Any] | None, source_thread: str | None) -> str:
    """The text of a dependency handoff (what is asked, by whom, and the callback expected)."""
    lines = [
        f"Dependency handoff from Codex thread {callback}.",
        "",
        f"Dependency: {name}",
    ]
    if deadline:
        lines.append(f"Deadline: {deadline}")
    lines += [
        "",
        "Readiness contract (when this counts as ready):",
        contract,
        "",
        (f"When it is ready, or if it is blocked, call back thread {callback} (message_codex_thread or message_agent to "
         f"codex:{callback}) with:"),
        "- status: ready or blocked",
        "- the exact command, API or spec details the origin thread should use",
        "- any safety, suppression or compatibility constraints it must respect",
        "- evidence that you verified it, or the blocker that remains",
        "",
        "Stay within this dependency: do not take over the origin thread's own work.",
    ]
    if evidence:
        lines += ["", "Evidence expected:", *[f"- {e}" for e in evidence]]
    if context:
        lines += ["", "Context:", context]
    if mismatch:
        lines += ["", (f"Note: the caller supplied callback thread {mismatch['supplied']}, but the call came from thread "
                       f"{mismatch['used']}, which is the one to call back.")]
    if source_thread and source_thread != callback:
        lines += ["", f"Source thread: {source_thread}"]
    return "\n".join(lines)


async def register_dependency_handoff(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Tool handler: tell the thread that owns a dependency what the caller waits for and how
    to call it back; the message's receipt is tagged ``dependency-handoff``,
    ``dependency:<slug>`` and ``callback:<thread>`` (what check_coordination_obligations looks for)."""
    callback, mismatch = _callback(args, call)
    target = await _handoff_target(app, args, call)
    evidence = args.get("evidenceRequirements") or []
    if isinstance(evidence, str):
        evidence = [evidence]
    name = args["dependencyName"].strip()
    text = handoff_message(name=name, callback=callback, contract=args["readinessContract"], deadline=args.get("deadline"),
                           evidence=evidence, context=args.get("context"), mismatch=mismatch,
                           source_thread=_caller_thread(call))
    tags = [HANDOFF_TAG, f"dependency:{obligations.slug(name)}", f"callback:{callback}"]
    receipt = _merge_receipt(args.get("receipt"), f"Dependency handoff: {name}", "keep_as_evidence", tags, origin_thread=callback)
    if mismatch is not None:
        receipt.setdefault("note", f"callback mismatch: supplied {mismatch['supplied']}, used {mismatch['used']}")
    send = {**_send_args(args), "receipt": receipt}
    send.setdefault("anticipation", "action")
    tool = "message_project_orchestrator" if target["kind"] == "project_orchestrator" else "message_agent"
    result = await core_tools.message_agent(app, {**send, "to": target.pop("to"), "message": text}, call, tool=tool)
    return {
        "source": "dependency-handoff", "action": "sent_handoff",
        "dependency": {"name": name, "slug": obligations.slug(name), "readinessContract": args["readinessContract"],
                       "callbackThreadId": callback, "callbackMismatch": mismatch, "deadline": args.get("deadline"),
                       "evidenceRequirements": evidence},
        "target": target, "message": text, "messageResult": result, "receiptTags": tags,
        "callbackExpectation": {"threadId": callback, "requiredStatusValues": ["ready", "blocked"],
                                "requiredPayload": list(REQUIRED_PAYLOAD)},
    }


# obligations ---------------------------------------------------------------------------------
RECEIPTS_TOOL = "list_agent_link_receipts"


def _created_ms(receipt: dict[str, Any]) -> int | None:
    try:
        return parse_iso_ms(str(receipt.get("createdAt")), "createdAt")
    except AgentLinkError:
        return None


async def check_coordination_obligations(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Tool handler: analyse the text; when it carries an obligation, look for the handoff
    receipts that satisfy it (rules in :mod:`agent_link_projects.obligations`)."""
    given = [k for k in ("text", "finalText", "currentText") if k in args]
    if len(given) != 1:
        raise invalid_arguments([{"path": "text", "rule": "required" if not given else "one_of",
                                  "expected": "exactly one of text, finalText, currentText"}])
    text = args[given[0]]
    since_ms = parse_iso_ms(args["since"], "since") if args.get("since") else None
    origin = (args.get("originThreadId") or args.get("threadId") or "").removeprefix("codex:") or _caller_thread(call)
    turn = args.get("originTurnId") or (call.caller.turn_id if origin is not None and origin == _caller_thread(call) else None)
    analysis = obligations.analyse(text)
    referenced = [t for t in analysis["referencedThreadIds"] if t != (origin or "").lower()]
    out: dict[str, Any] = {"source": "coordination-obligations", "analysis": analysis, "originThreadId": origin,
                           "originTurnId": turn, "satisfaction": None, "receipts": [], "blocker": None, "nextRequiredAction": None}
    if not analysis["hasObligation"]:
        return {**out, "status": "not_applicable", "action": "none"}
    if origin is None:
        return {**out, "status": "blocked", "action": "name_origin_thread",
                "blocker": "The text commits to a dependency, but no origin thread is known to check handoffs for.",
                "nextRequiredAction": {"tool": "check_coordination_obligations", "arguments": {"originThreadId": "<your thread id>"},
                                       "reason": "Call again with originThreadId (or from inside the Codex thread)."}}
    spec = app.hooks.tools().get(RECEIPTS_TOOL)
    receipts: list[dict[str, Any]] = []
    if spec is None:
        call.warnings.append({"code": "receipts_unavailable",
                              "message": "The receipts plugin (agent-link-receipts) is not installed, so no handoff can be verified."})
    else:
        listed = await run_tool(app, RECEIPTS_TOOL, {"originThreadId": origin, "query": HANDOFF_TAG, "limit": 500}, call)
        receipts = list(listed.get("data") or [])
    matched = obligations.matching_receipts(receipts, origin_thread_id=origin, referenced_ids=referenced,
                                            dependency_name=args.get("dependencyName"), origin_turn_id=turn,
                                            since_iso_ms=since_ms, created_ms=_created_ms)
    by_message: dict[str, dict[str, Any]] = {}
    for receipt in matched:
        by_message.setdefault(str(receipt.get("messageId") or receipt.get("id")), receipt)
    limit = args.get("receiptLimit", 20)
    criteria = {"referencedThreadIds": referenced, "dependencyTag": f"dependency:{obligations.slug(args['dependencyName'])}"
                if args.get("dependencyName") else None, "originTurnId": turn, "since": args.get("since")}
    out["satisfaction"] = {"criteria": criteria, "matchedHandoffs": len(by_message), "receiptsScanned": len(receipts),
                           "receiptsAvailable": spec is not None}
    out["receipts"] = list(by_message.values())[:limit]
    if by_message:
        return {**out, "status": "satisfied", "action": "none"}
    hint_args: dict[str, Any] = {"dependencyName": args.get("dependencyName") or "<what you wait for>",
                                 "readinessContract": "<what counts as ready>"}
    if referenced:
        hint_args["targetThreadId"] = referenced[0]
    else:
        hint_args["targetThreadId"] = "<the thread that owns the dependency>"
    if _caller_thread(call) is None:
        hint_args["callbackThreadId"] = origin
    return {**out, "status": "needs_handoff", "action": "register_handoff",
            "nextRequiredAction": {"tool": "register_dependency_handoff", "arguments": hint_args,
                                   "reason": "The text commits to waiting on another agent, and no matching dependency handoff is registered."}}


# registration ----------------------------------------------------------------------------------
def _fields(*names: str) -> dict[str, Any]:
    return {n: ANY for n in names}


RESOLVE_FIELDS = ("status", "source", "role", "threadId", "address", "projectRoot", "projectId", "binding", "bindingVerification",
                  "verification", "query", "selection", "candidates", "listSource", "appServerError", "rolesAvailable", "passedOver")
RESULT_ARGS: dict[str, Any] = {
    "workerThreadId": {"type": "string", "minLength": 1, "maxLength": 140},
    "resultStatus": {"type": "string", "enum": list(RESULT_STATUSES)},
    "summary": {"type": "string", "maxLength": 20000}, "result": {"type": "string", "maxLength": 20000, "description": "Same as summary."},
    "changedPaths": STR_LIST, "testsRun": STR_LIST, "blockers": STR_LIST, "nextSteps": STR_LIST,
    # free-form on purpose: the worker's own structured details
    "details": {"type": "object", "description": "Anything else the orchestrator should know (free-form object)."},
    "replyToMessageId": {**ULID, "description": "The task message: it is resolved done."},
}

PROJECT_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="resolve_project_orchestrator", title="Resolve a project's orchestrator",
        description="Find the Codex thread that orchestrates a project: an explicit thread or role:<name>, the orchestrator role assigned for projectRoot, the project's binding file (<projectRoot>/.codex/project-orchestrator.json), the orchestrator role's holder, then a ranked thread search. Reports resolved, ambiguous or not_found and which step decided (source).",
        input_schema=closed_object({**TARGET, "limit": limit_arg(10, 50)}),
        output_fields=_fields(*RESOLVE_FIELDS), handler=resolve_project_orchestrator, read_only=True, idempotent=True,
    ),
    ToolSpec(
        name="message_project_orchestrator", title="Message a project's orchestrator",
        description="Resolve a project's orchestrator thread (as resolve_project_orchestrator) and send it a message through agent-link, with every message_agent option. Counts as role-addressed for role enforcement.",
        input_schema=closed_object({**TARGET, "limit": limit_arg(10, 50), "message": {"type": "string", "minLength": 1},
                                    "replyToMessageId": ULID, **TURN_OPTIONS}, ("message",)),
        output_fields=_fields("source", "action", "resolution", "messageResult"), handler=message_project_orchestrator,
    ),
    ToolSpec(
        name="launch_project_worker", title="Launch a project worker",
        description="Start a new Codex thread in the project root as a worker for the project's orchestrator: its first message gives its role, the return path (report with return_project_work_result), the project context, the task and any extra instructions.",
        input_schema=closed_object({**TARGET, "limit": limit_arg(10, 50), "name": {"type": "string", "minLength": 1, "maxLength": 200},
                                    "workerRole": {"type": "string", "minLength": 1, "maxLength": 200},
                                    "role": {"type": "string", "minLength": 1, "maxLength": 200, "description": "Same as workerRole."},
                                    "task": {"type": "string", "minLength": 1}, "instructions": STR, "model": STR, "modelProvider": STR,
                                    "serviceTier": STR, "effort": DELIVERY_OPTIONS["effort"],
                                    "leasePaths": {"type": "array", "minItems": 1, "maxItems": 100, "items": {**PATH, "maxLength": 4096},
                                                   "description": "Files, directories or globs (relative to the project root) the worker owns: "
                                                   "leased exclusively for it until its task message is resolved (needs agent-link-leases). "
                                                   "A clash with another session's lease launches nothing (error lease_conflict)."},
                                    "leaseTtlMs": {"type": "integer", "minimum": 1000, "maximum": 7 * 24 * 60 * 60_000,
                                                   "description": "With leasePaths: their time to live in ms (default: the leases plugin's)."},
                                    "ephemeral": {"type": "boolean", "default": False}, "receipt": core_tools.RECEIPT,
                                    "messageId": {**core_tools.MESSAGE_ID, "description": "Your id for the task message (a ULID or a UUID), "
                                                  "so that retrying is safe: a retry with the same messageId and task launches no second "
                                                  "worker and returns the first (duplicate: true); another task under it is refused."}},
                                   ("task",)),
        output_fields=_fields("source", "action", "resolution", "workerPrompt", "workerThreadId", "taskMessageId", "launchResult",
                              "duplicate", "leases"),
        handler=launch_project_worker,
    ),
    ToolSpec(
        name="return_project_work_result", title="Return a project worker's result",
        description="Report a project worker's result to its orchestrator thread as a structured message (status, summary, changed paths, tests run, blockers, next steps, details). With replyToMessageId the task message is resolved done.",
        input_schema=closed_object({**TARGET, "limit": limit_arg(10, 50), **RESULT_ARGS,
                                    **{k: v for k, v in TURN_OPTIONS.items() if k != "waitForReply"}}),
        output_fields=_fields("source", "action", "resolution", "message", "result", "messageResult", "taskResolution"),
        handler=return_project_work_result, removed={"status": "resultStatus"},
    ),
    ToolSpec(
        name="register_dependency_handoff", title="Register a dependency handoff",
        description="Tell the thread that owns something you depend on what you wait for, when it counts as ready, and how to call you back (status ready or blocked, exact interface details, constraints, evidence). Recorded as a receipt tagged dependency-handoff that check_coordination_obligations looks for.",
        input_schema=closed_object({
            "dependencyName": {"type": "string", "minLength": 1, "maxLength": 200},
            "readinessContract": {"type": "string", "minLength": 1}, "targetThreadId": {"type": "string", "minLength": 1, "maxLength": 140},
            "targetQuery": {"type": "string", "minLength": 1, "maxLength": 300}, "targetCwd": CWD_FILTER, **TARGET,
            "callbackThreadId": {"type": "string", "minLength": 1, "maxLength": 140},
            "originThreadId": {"type": "string", "minLength": 1, "maxLength": 140, "description": "Same as callbackThreadId."},
            "deadline": STR, "evidenceRequirements": {"anyOf": [STR, STR_LIST]}, "context": STR,
            "limit": limit_arg(10, 50), "replyToMessageId": ULID, **TURN_OPTIONS,
        }, ("dependencyName", "readinessContract")),
        output_fields=_fields("source", "action", "dependency", "target", "message", "messageResult", "receiptTags", "callbackExpectation"),
        handler=register_dependency_handoff,
    ),
    ToolSpec(
        name="check_coordination_obligations", title="Check coordination obligations",
        description="Check whether your own text commits you to wait on, or be called back by, another agent, and if so whether you registered a dependency handoff for it: not_applicable, satisfied, needs_handoff (with nextRequiredAction) or blocked.",
        input_schema=closed_object({
            "text": {"type": "string", "maxLength": 200000}, "finalText": {"type": "string", "maxLength": 200000},
            "currentText": {"type": "string", "maxLength": 200000},
            "originThreadId": {"type": "string", "minLength": 1, "maxLength": 140}, "threadId": {"type": "string", "minLength": 1, "maxLength": 140},
            "receiptLimit": limit_arg(20, 100, 0), "dependencyName": {"type": "string", "minLength": 1, "maxLength": 200},
            "originTurnId": {"type": "string", "minLength": 1, "maxLength": 160},
            "since": {"type": "string", "minLength": 1, "description": "ISO 8601 with a timezone."},
        }),
        output_fields=_fields("status", "source", "action", "analysis", "originThreadId", "originTurnId", "satisfaction", "receipts",
                              "blocker", "nextRequiredAction"),
        handler=check_coordination_obligations, read_only=True, idempotent=True,
    ),
)


