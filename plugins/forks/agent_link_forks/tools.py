"""``fork_codex_thread``: run another model (or effort, or folder) on a Codex thread's context.

The call checks the original thread, forks it, decides about compaction and starts the
compaction or the task turn, then returns (``status: running``) unless ``waitForResult``
asks it to wait. The rest runs in this server (:mod:`agent_link_forks.runner`), or in another
server's sweeper when this one stops. Exactly one reconcile message reports the outcome to
the original thread; for a self-fork that waits, it is the tool result itself
(``reconcile.deliveredVia: "tool-result"`` and ``output``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.mailbox import check_body, check_labels, new_message_id
from agent_link_core.store import now_ms
from agent_link_core.tools import core_tools
from agent_link_core.tools.registry import ToolCall, ToolSpec
from agent_link_core.tools.schemas import PATH
from agent_link_forks.codex import is_archived, refuse_archived
from agent_link_forks.runner import TOOL_RESULT, compaction_decision, runtime

STR = {"type": "string"}
NAME = {"type": "string", "minLength": 1, "maxLength": 200}
THREAD_ID_RE = r"^(codex:)?[A-Za-z0-9_.-]{1,128}$"
#: a self-fork's call waits at most this long for its result, then it comes as a message
MAX_WAIT_MS = 660_000
DEFAULT_WAIT_MS = 50_000

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "threadId": {"type": "string", "pattern": THREAD_ID_RE, "description": "The thread to fork: its id or codex:<id>."},
        "query": {"type": "string", "minLength": 1, "maxLength": 300,
                  "description": "Words identifying the thread instead of threadId (it must resolve to exactly one)."},
        "message": {"type": "string", "minLength": 1, "description": "The task for the fork (at most 64 KiB UTF-8)."},
        "model": {**NAME, "description": "The fork's model (default: the original's)."},
        "modelProvider": NAME, "serviceTier": NAME,
        "effort": {"type": "string", "enum": ["minimal", "low", "medium", "high", "xhigh"],
                   "description": "Reasoning effort of the task turn."},
        "cwd": {**PATH, "description": "The fork's working directory (absolute, inside the original's workspace)."},
        "lastTurnId": {"type": "string", "minLength": 1, "maxLength": 140,
                       "description": "Fork through this completed turn (default: the latest completed one)."},
        "compactFork": {"type": "string", "enum": ["never", "always", "auto"], "default": "auto",
                        "description": "Compact the fork before the task; auto: when the original's last request used more than half its context window."},
        "archiveFork": {"type": "boolean", "default": True, "description": "Archive a completed fork once its result is reported."},
        "reconcile": {"type": "object", "properties": {"anticipation": core_tools.ANTICIPATION, "replyBy": core_tools.REPLY_BY},
                      "additionalProperties": False, "description": "Labels of the reconcile message (default fyi)."},
        "waitForResult": {"type": "boolean", "default": False,
                          "description": "Wait for the task's end; a self-fork then gets the result in this tool result."},
        "timeoutMs": {"type": "integer", "minimum": 1000, "maximum": MAX_WAIT_MS, "default": DEFAULT_WAIT_MS,
                      "description": "How long waitForResult waits, in ms (your client may cut tool calls sooner)."},
        "receipt": core_tools.RECEIPT,
        "messageId": {**core_tools.MESSAGE_ID, "description": "Your id for this fork (a ULID or a UUID; it becomes forkJobId), so "
                      "that retrying is safe: a retry with the same messageId and arguments starts no second fork and returns the "
                      "first job (duplicate: true); other arguments under it are refused naming what differs."},
    },
    "required": ["message"],
    "additionalProperties": False,
}
NOBJ = {"type": ["object", "null"]}
OUTPUT_FIELDS: dict[str, Any] = {
    "forkJobId": STR, "status": {"type": "string", "enum": ["running", "completed", "failed", "interrupted", "aborted"]},
    "original": {"type": "object"}, "fork": NOBJ, "lastTurnId": STR, "turn": NOBJ, "compaction": NOBJ, "reconcile": NOBJ,
    "output": {"type": ["string", "null"]}, "tokenUsage": NOBJ, "archived": {"type": "boolean"}, "timedOut": {"type": "boolean"},
    "duplicate": {"type": "boolean"},
}


def workspace_of(cwd: str) -> str:
    """The workspace of a thread working in ``cwd``: the nearest folder at or above its real
    path holding ``.git`` (a folder, or a file as in worktrees), else the real cwd itself."""
    real = Path(os.path.realpath(cwd))
    for folder in (real, *real.parents):
        if os.path.lexists(folder / ".git"):
            return str(folder)
    return str(real)


def check_cwd(cwd: str, original_cwd: str | None, address: str) -> None:
    """Refuse a fork cwd outside the original's workspace (symlinks resolved).

    :raises AgentLinkError: ``invalid_arguments`` (not absolute), ``permission_denied``
        with ``details.reason`` ``cwd_outside_workspace``.
    """
    if not os.path.isabs(cwd):
        raise invalid_arguments([{"path": "cwd", "rule": "absolute_path", "expected": "an absolute path"}])
    workspace = workspace_of(original_cwd) if original_cwd else None
    real = os.path.realpath(cwd)
    if workspace is None or os.path.commonpath([real, workspace]) != workspace:
        raise AgentLinkError("permission_denied", f"The fork's working directory must stay inside the workspace of {address}.",
                             {"reason": "cwd_outside_workspace", "workspace": workspace, "requested": cwd, "target": address},
                             hint="Pick a folder inside the original thread's repository (or its folder outside one).")


async def original_thread(app: Any, args: dict[str, Any], call: ToolCall) -> str:
    """The thread id named by ``threadId``, or found by ``query``."""
    if "threadId" in args:
        return str(args["threadId"]).removeprefix("codex:")
    verdict = await app.resolve_agent(args["query"], harness="codex", caller=call.caller)
    short = [{"address": c.get("address"), "title": c.get("title")} for c in verdict["candidates"][:5]]
    if verdict["status"] == "ambiguous":
        raise AgentLinkError("ambiguous", f"{args['query']!r} matches several Codex threads.", {"query": args["query"], "candidates": short},
                             hint="Pass threadId with one of the candidates.")
    if verdict["status"] != "resolved" or not str(verdict["best"]["address"]).startswith("codex:"):
        raise AgentLinkError("not_found", f"No Codex thread matches {args['query']!r}.", {"query": args["query"], "candidates": short},
                             hint="List threads with list_codex_threads.")
    return str(verdict["best"]["address"]).split(":", 1)[1]


async def fork_codex_thread(app: Any, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Tool handler (see the module docstring).

    :raises AgentLinkError: ``invalid_arguments`` (bad arguments, a ``lastTurnId`` that is
        not a completed turn), ``not_found`` / ``ambiguous`` (the thread), ``archived``,
        ``permission_denied`` (``cwd_outside_workspace``), ``codex_unavailable``,
        ``upstream_error`` (Codex refused the fork: the job is recorded as aborted),
        ``body_too_large``, ``unsupported`` (no codex plugin).
    """
    message = check_body(args["message"])
    labels = args.get("reconcile") or {}
    anticipation, reply_by_ms = check_labels(labels.get("anticipation"), labels.get("replyBy"), False, now_ms())
    if ("threadId" in args) == ("query" in args):
        raise invalid_arguments([{"path": "threadId", "rule": "one_of", "expected": "exactly one of threadId and query"}])
    rt = runtime(app)
    threads = rt.threads
    thread_id = await original_thread(app, args, call)
    address = f"codex:{thread_id}"
    caller = call.caller
    request = {
        "message": message, **{k: args.get(k) for k in ("model", "modelProvider", "serviceTier", "effort", "cwd")},
        "compactFork": args.get("compactFork", "auto"), "archiveFork": args.get("archiveFork", True),
        "reconcile": {"anticipation": anticipation, "replyByMs": reply_by_ms}, "waitForResult": args.get("waitForResult", False),
        "receipt": args.get("receipt") or {},
    }
    key, _ = core_tools.idempotency_key(args)
    earlier = rt.jobs.get(key) if key is not None else None
    if earlier is not None:  # a retry of a fork the first call started: no second fork
        return {**result_view(rt, forked_before(earlier, caller.address, thread_id, args.get("lastTurnId"), request)),
                "duplicate": True}
    thread = await threads.read(thread_id)
    if is_archived(thread):
        raise refuse_archived(address)
    last_turn_id = await threads.completed_turn(thread_id, args.get("lastTurnId"))
    if args.get("cwd") is not None:
        check_cwd(args["cwd"], thread.get("cwd"), address)
    job_id = key or new_message_id()
    rt.jobs.create(job_id, original_thread=thread_id, created_by=caller.address, caller_source=caller.source, request=request,
                   last_turn_id=last_turn_id, owner=rt.owner, lease_ms=rt.lease_ms)
    self_wait = bool(args.get("waitForResult")) and caller.address == address
    if self_wait:
        rt.waiting.add(job_id)
    try:
        try:
            forked = await threads.fork(thread_id, last_turn_id, request)
        except AgentLinkError as exc:
            rt.jobs.finish(job_id, None, "aborted", {"error": f"{exc.code}: {exc.message}"})
            raise
        fork_thread = forked.get("thread") or {}
        fork_id = str(fork_thread["id"])
        fork_info = {"model": forked.get("model") or fork_thread.get("model"), "effort": args.get("effort") or forked.get("reasoningEffort"),
                     "cwd": forked.get("cwd") or fork_thread.get("cwd"), "forkedFromId": fork_thread.get("forkedFromId"),
                     "threadSource": fork_thread.get("threadSource"), "modelProvider": forked.get("modelProvider"),
                     "serviceTier": forked.get("serviceTier")}
        rt.jobs.update(job_id, rt.owner, "forked", {"fork": fork_id}, phase="forked", fork_thread=fork_id, fork=fork_info)
        rt.emit("forked", None, caller.address, {"target": f"codex:{fork_id}", "original": address, "forkJobId": job_id,
                                                 "fork": fork_info, "lastTurnId": last_turn_id, "receipt": request["receipt"]})
        decision = compaction_decision(request["compactFork"], await threads.token_usage(thread))
        if decision["compact"]:
            try:
                await threads.compact(fork_id)
            except AgentLinkError as exc:
                decision = {**decision, "error": f"compaction refused: {exc.message}"}
        rt.jobs.update(job_id, rt.owner, "compacting" if decision["compact"] else "no_compaction", decision,
                       phase="compacting" if decision["compact"] and "error" not in decision else "forked", compaction=decision)
        if decision["compact"] and "error" not in decision:
            rt.spawn(rt.continue_after_compaction(job_id))
        elif await rt.start_task(job_id) is not None:
            rt.spawn(rt.watch(job_id))
        timed_out = False
        if args.get("waitForResult"):
            timed_out = not await rt.wait_finished(job_id, args.get("timeoutMs", DEFAULT_WAIT_MS))
    finally:
        rt.waiting.discard(job_id)
    out = result_view(rt, job_id)
    if args.get("waitForResult"):
        out["timedOut"] = timed_out
    return out


def forked_before(job: dict[str, Any], caller: str, thread_id: str, last_turn_id: str | None, request: dict[str, Any]) -> str:
    """The id of ``job``, started earlier under the ``messageId`` a call gives again, when that
    call asks for the same fork (same caller, thread, ``lastTurnId`` when given, and request).

    :raises AgentLinkError: ``invalid_arguments`` (rule ``idempotency``, ``details.differs``
        naming the arguments that differ) otherwise.
    """
    before = job.get("request") or {}
    differs = [name for name, was, now in (("from", job["created_by"], caller), ("threadId", job["original_thread"], thread_id))
               if was != now]
    if last_turn_id is not None and job["last_turn_id"] != last_turn_id:
        differs.append("lastTurnId")
    differs += [name for name in request if before.get(name) != request[name]]
    if differs:
        what = f"its {', '.join(differs)} {'differs' if len(differs) == 1 else 'differ'}"
        raise invalid_arguments(
            [{"path": "messageId", "rule": "idempotency", "expected": "the same fork as the first call with this id"}],
            f"Message id {job['id']} was already used for a different fork: {what}.", differs=differs,
        )
    return str(job["id"])


def result_view(rt: Any, job_id: str) -> dict[str, Any]:
    """The tool's result fields for a job as it stands now."""
    job = rt.jobs.get(job_id)
    assert job is not None
    fork = job.get("fork") or {}
    result = job.get("result") or {}
    stored = rt.jobs.reconcile(job_id)
    archive = rt.jobs.archive(job_id)
    reconcile = None
    output = None
    if stored is not None and stored["stored_at"] is not None:
        row = rt.app.mailbox.get_row(stored["message_id"])
        via = row["delivered_via"] if row is not None else stored["delivered_via"]
        reconcile = {"messageId": stored["message_id"], "delivery": "delivered" if row is not None and row["first_delivered_at"] else "queued",
                     "deliveredVia": via, "anticipation": row["anticipation"] if row is not None else None}
        if via == TOOL_RESULT:
            output = stored["body"]
    compaction = job.get("compaction")
    usage = result.get("tokenUsage")
    return {
        "forkJobId": job_id, "status": job["status"],
        "original": {"address": f"codex:{job['original_thread']}", "threadId": job["original_thread"]},
        "fork": {"threadId": job["fork_thread"], "address": f"codex:{job['fork_thread']}", **fork} if job["fork_thread"] else None,
        "lastTurnId": job["last_turn_id"], "turn": {"id": job["task_turn_id"]} if job["task_turn_id"] else None,
        "compaction": compaction, "reconcile": reconcile, "output": output, "tokenUsage": usage,
        "archived": archive is not None and archive["state"] == "archived",
    }


FORK_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="fork_codex_thread", title="Fork a Codex thread",
        description=("Run a task with another model, effort or folder on a Codex thread's context without changing the thread: "
                     "agent-link forks the thread through its latest completed turn (or lastTurnId), optionally compacts the fork, "
                     "runs your message there as a turn, and sends the fork's final answer (or what went wrong) back to the "
                     "original thread as one agent-link message. A completed fork is archived afterwards; a failed one is kept. "
                     "Forking your own thread with waitForResult returns the answer here instead."),
        input_schema=INPUT_SCHEMA, output_fields=OUTPUT_FIELDS, handler=fork_codex_thread,
    ),
)
