"""Running fork jobs: after the tool call, and when a sweeper takes over.

One :class:`Runtime` per :class:`~agent_link_core.app.App` (:func:`runtime`). A job's steps:

1. (tool call) fork the original through its completed turn; decide compaction; start the
   compaction or the task turn (:mod:`agent_link_forks.tools`);
2. wait for the compaction (up to :data:`COMPACTION_WAIT_MS`), start the task turn (phase
   ``starting`` first, so a sweeper knows the turn may exist);
3. watch the task turn: poll every 1 s, ×1.5 up to 15 s, renewing the lease; after
   :data:`MAX_POLL_ERRORS` failed polls in a row the lease is given back for a sweeper.
   ``interrupted`` counts only when two polls in a row say so: ``thread/turns/list`` reports a
   turn that has just been started as ``interrupted`` for a moment before ``inProgress``
   (seen on Codex 0.171.0 in about one turn in forty, docs/hosts/codex.md);
4. finish: record the outcome, then :meth:`Runtime.complete`: claim and store the one
   reconcile message, push it when the original is idle and loaded (else it waits in its
   inbox; the codex harness offers waiting mail to idle threads), and archive a completed
   fork only once its reconcile is stored and Codex reports it as this job's fork.

The sweeper (:meth:`Runtime.sweeper_loop`, started in every ``agent-link mcp`` through
``agent_link_server_tasks``) runs shortly after start and then every
``AGENT_LINK_FORKS_SWEEP_MS``: it takes over running jobs whose lease expired and watches or
finishes them (a task turn found by its clientUserMessageId is adopted; a task that never
started fails after ``AGENT_LINK_FORKS_START_TIMEOUT_MS``), and completes reconciles and
archives another process left half done. Nothing happens while no server runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from agent_link_core.envelope import (
    MAX_BODY_BYTES,
    EnvelopeMessage,
    render_envelope,
    sanitize_text,
)
from agent_link_core.errors import AgentLinkError
from agent_link_core.mailbox import new_message_id
from agent_link_core.records import Event, OutgoingMessage
from agent_link_core.model import Caller, address_scheme, is_address
from agent_link_core.store import now_ms
from agent_link_forks.codex import (
    THREAD_SOURCE,
    CodexThreads,
    codex_harness,
    final_answer,
    is_archived,
    turn_usage,
)
from agent_link_forks.jobs import FINISHED, MAX_LEASE_GENERATIONS, Jobs, process_owner

if TYPE_CHECKING:
    from agent_link_core.app import App

log = logging.getLogger(__name__)

POLL_MS = 1_000
POLL_BACKOFF = 1.5
POLL_MAX_MS = 15_000
MAX_POLL_ERRORS = 30
COMPACTION_WAIT_MS = 600_000
FIRST_SWEEP_S = 1.0
COMPACTION_THRESHOLD = 0.5
FORK_TASK_REPLY = ("This is the task of a forked thread. Your final response is the result: agent-link relays it to "
                   "the original thread automatically, so no tool call is needed to answer.")
TOOL_RESULT = "tool-result"

_RUNTIMES: weakref.WeakKeyDictionary[Any, Runtime] = weakref.WeakKeyDictionary()


def runtime(app: App) -> Runtime:
    """The fork job runtime of ``app`` (created on first use)."""
    found = _RUNTIMES.get(app)
    if found is None:
        found = _RUNTIMES[app] = Runtime(app)
    return found


def compaction_decision(mode: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether to compact a fork before its task, and why.

    :param mode: ``never``, ``always`` or ``auto`` (compact when the original's last model
        request used more than half its context window).
    :param records: the original's token counts (``[{last: {inputTokens}, modelContextWindow}]``).
    :returns: ``{mode, compact, compacted: False, reason, threshold, inputTokens,
        modelContextWindow, windowBasis, tokenUsage: None}``; ``reason`` is never, always,
        usage_unknown, over_threshold or under_threshold.
    """
    last = records[-1] if records else None
    input_tokens = (last.get("last") or {}).get("inputTokens") if last else None
    window = last.get("modelContextWindow") if last else None
    out: dict[str, Any] = {"mode": mode, "threshold": COMPACTION_THRESHOLD, "inputTokens": input_tokens,
                           "modelContextWindow": window, "windowBasis": "rollout-token-count" if window else None,
                           "compacted": False, "tokenUsage": None}
    if mode in ("never", "always"):
        return {**out, "compact": mode == "always", "reason": mode}
    if not isinstance(input_tokens, int) or not isinstance(window, int) or window <= 0:
        return {**out, "compact": False, "reason": "usage_unknown"}
    over = input_tokens > COMPACTION_THRESHOLD * window
    return {**out, "compact": over, "reason": "over_threshold" if over else "under_threshold"}


def cut_body(text: str, fork_address: str | None) -> str:
    """A reconcile body within the 64 KiB limit: longer text is cut (never inside a character)
    with a note saying so; nothing is refused."""
    clean = sanitize_text(text)
    data = clean.encode("utf-8")
    if len(data) <= MAX_BODY_BYTES:
        return clean
    where = f" with get_codex_thread on {fork_address}" if fork_address else ""
    note = f"\n[agent-link cut this text: it was {len(data)} bytes, the limit is {MAX_BODY_BYTES}. Read the rest{where}.]"
    keep = MAX_BODY_BYTES - len(note.encode("utf-8"))
    return data[:keep].decode("utf-8", "ignore") + note


def reconcile_body(job: dict[str, Any]) -> str:
    """The reconcile text for a finished job: the fork's final answer when it completed, else
    what happened and that the fork is kept."""
    result = job.get("result") or {}
    fork_address = f"codex:{job['fork_thread']}" if job.get("fork_thread") else None
    output = result.get("output")
    if job["status"] == "completed":
        if output:
            return cut_body(output, fork_address)
        return (f"The fork finished its task without a final answer. Read it with get_codex_thread "
                f"(threadId {job['fork_thread']}).")
    lines = [f"The fork job {job['id']} ended {job['status']}."]
    if result.get("error"):
        lines.append(f"Error: {result['error']}")
    lines.append(f"The fork {fork_address} is kept for inspection (get_codex_thread)." if fork_address
                 else "No fork thread was created.")
    if output:
        lines.append("Its last answer:\n" + output)
    return cut_body("\n".join(lines), fork_address)


def fork_element_data(job: dict[str, Any]) -> dict[str, Any]:
    """What the reconcile's ``<fork/>`` element shows: ``{thread, model, effort, status}``."""
    fork = job.get("fork") or {}
    return {"thread": f"codex:{job['fork_thread']}" if job.get("fork_thread") else None, "model": fork.get("model"),
            "effort": fork.get("effort"), "status": job["status"]}


def job_sender(job: dict[str, Any]) -> Caller:
    """The job's caller, the sender of its task envelope and of its reconcile."""
    by = job["created_by"]
    return Caller(by, job["caller_source"], address_scheme(by) if is_address(by) else None)


class Runtime:
    """Fork jobs of one process: background tasks, the sweeper, and the lease owner name."""

    def __init__(self, app: App) -> None:
        # a proxy: the registry of runtimes is keyed weakly by the App, which must not be kept alive here
        self.app: Any = weakref.proxy(app)
        self.jobs = Jobs(app.store)
        self.owner = process_owner()
        self.lease_ms = int(app.config.get("AGENT_LINK_FORKS_LEASE_MS"))
        self.sweep_ms = int(app.config.get("AGENT_LINK_FORKS_SWEEP_MS"))
        self.start_timeout_ms = int(app.config.get("AGENT_LINK_FORKS_START_TIMEOUT_MS"))
        #: self-forks whose tool call waits in this process: their reconcile is the tool result
        self.waiting: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def threads(self) -> CodexThreads:
        """Codex thread calls (raises ``unsupported`` without the codex plugin)."""
        return CodexThreads(codex_harness(self.app))

    def spawn(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``work`` in the background (kept referenced until done; failures logged)."""
        task = asyncio.get_running_loop().create_task(self._logged(work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    @staticmethod
    async def _logged(work: Coroutine[Any, Any, Any]) -> None:
        try:
            await work
        except Exception:
            log.exception("agent-link: fork job step failed")

    def emit(self, kind: str, message_id: str | None, actor: str, data: dict[str, Any]) -> None:
        """Tell observers (receipts) about a job event (``forked``, ``reconciled``, ``archived``)."""
        self.app.hooks.call("agent_link_on_event", event=Event(kind, message_id, now_ms(), actor, data))

    def next_delay(self, delay: float) -> float:
        """The next poll interval (ms): ×1.5 up to 15 s, and at most a third of the lease, so a
        watcher always renews its lease in time."""
        return min(delay * POLL_BACKOFF, POLL_MAX_MS, self.lease_ms / 3)

    # the task ----------------------------------------------------------------------------
    def task_text(self, job: dict[str, Any], message: str) -> str:
        """The task turn's text: the caller's message inside the envelope, whose reply line says
        the final answer is relayed."""
        caller = job_sender(job)
        envelope = EnvelopeMessage(id=job["id"], from_address=caller.address, from_verified=caller.verified,
                                   to_address=f"codex:{job['fork_thread']}", sent_at_ms=job["created_at"], anticipation="fyi",
                                   body=message)
        return render_envelope(envelope, reply_text=FORK_TASK_REPLY)

    async def start_task(self, job_id: str) -> str | None:
        """Start the task turn on the fork (phase ``starting`` first); a refusal finishes the
        job as failed (the task never started). Returns the turn id."""
        job = self.jobs.get(job_id)
        if job is None or not self.jobs.update(job_id, self.owner, "starting", phase="starting"):
            return None
        request = job["request"]
        try:
            turn_id = await self.threads.start_task(job["fork_thread"], self.task_text(job, request["message"]), job_id,
                                                    request.get("effort"))
        except AgentLinkError as exc:
            if exc.code == "codex_unavailable":
                # the request may have reached Codex: a sweeper looks for the turn by the job id
                self.jobs.release(job_id, self.owner)
                return None
            await self.finish(job_id, "failed", {"error": f"the task never started: {exc.message}", "neverStarted": True})
            return None
        self.jobs.update(job_id, self.owner, "turn_started", {"turnId": turn_id}, phase="turn_started", task_turn_id=turn_id)
        return turn_id

    async def continue_after_compaction(self, job_id: str) -> None:
        """Wait for the fork's compaction turn (bounded), record it, then start and watch the task."""
        job = self.jobs.get(job_id)
        if job is None:
            return
        decision = dict(job["compaction"] or {})
        deadline = now_ms() + COMPACTION_WAIT_MS
        delay: float = POLL_MS
        while now_ms() < deadline:
            if not self.jobs.renew(job_id, self.owner, self.lease_ms):
                return
            with contextlib.suppress(AgentLinkError):
                turns = await self.threads.turns(job["fork_thread"], limit=5, view="full")
                compaction = next((t for t in turns if any(i.get("type") == "contextCompaction" for i in t.get("items") or [])), None)
                if compaction is not None and compaction.get("status") != "inProgress":
                    decision["compacted"] = compaction.get("status") == "completed"
                    decision["turnId"] = compaction.get("id")
                    if compaction.get("status") != "completed":
                        decision["error"] = (compaction.get("error") or {}).get("message")
                    break
            await asyncio.sleep(delay / 1000)
            delay = self.next_delay(delay)
        else:
            decision["error"] = "compaction did not finish in time; the task runs on the uncompacted fork"
        self.jobs.update(job_id, self.owner, "compacted", decision, compaction=decision)
        if await self.start_task(job_id) is not None:
            await self.watch(job_id)

    async def watch(self, job_id: str) -> None:
        """Poll the task turn until it ends, then finish the job (see the module docstring)."""
        delay: float = POLL_MS
        errors = 0
        interrupted_once = False
        while True:
            job = self.jobs.get(job_id)
            if job is None or job["status"] != "running" or job["lease_owner"] != self.owner:
                return
            if not self.jobs.renew(job_id, self.owner, self.lease_ms):
                return
            try:
                # a turn/start that answered without an id: the task is the turn carrying the job id
                turn = await self.threads.find_turn(job["fork_thread"], turn_id=job["task_turn_id"],
                                                    client_id=None if job["task_turn_id"] else job_id)
                errors = 0
            except AgentLinkError as exc:
                if exc.code == "not_found":
                    await self.finish(job_id, "failed", {"error": f"the fork thread is gone: {exc.message}"})
                    return
                errors += 1
                if errors >= MAX_POLL_ERRORS:
                    log.warning("agent-link: fork job %s: %d failed polls in a row; leaving it to a sweeper", job_id, errors)
                    self.jobs.release(job_id, self.owner)
                    return
            else:
                status = turn.get("status") if turn is not None else None
                if turn is not None and status in FINISHED and (status != "interrupted" or interrupted_once):
                    await self.finish_turn(job, turn)
                    return
                interrupted_once = status == "interrupted"
            await asyncio.sleep(delay / 1000)
            delay = self.next_delay(delay)

    async def finish_turn(self, job: dict[str, Any], turn: dict[str, Any]) -> None:
        """Record a task turn's end (status, error, final answer, token usage) and complete."""
        status = str(turn["status"])
        usage: dict[str, Any] = {"task": None}
        compaction = job.get("compaction") or {}
        try:
            fork = await self.threads.read(job["fork_thread"])
            records = await self.threads.token_usage(fork)
            usage["task"] = turn_usage(records, turn.get("id"))
            if compaction.get("turnId"):
                usage["compaction"] = turn_usage(records, compaction["turnId"])
        except AgentLinkError:
            pass  # token usage is reported where Codex gives it
        error = (turn.get("error") or {}).get("message") if isinstance(turn.get("error"), dict) else None
        await self.finish(job["id"], status, {"error": error, "output": final_answer(turn), "turnId": turn.get("id"),
                                              "tokenUsage": usage})

    async def finish(self, job_id: str, status: str, result: dict[str, Any]) -> None:
        """Record the outcome (once) and complete the job."""
        if self.jobs.finish(job_id, self.owner, status, result):
            await self.complete(job_id)

    # reconcile and archive ---------------------------------------------------------------
    async def complete(self, job_id: str) -> None:
        """Store the job's one reconcile (when nobody else holds it), then archive a completed
        fork when asked. Safe to call again: every step is claimed once."""
        job = self.jobs.get(job_id)
        if job is None or job["status"] not in FINISHED:
            return
        stored = self.jobs.reconcile(job_id)
        if stored is None or stored["stored_at"] is None:
            claim = self.jobs.claim_reconcile(job_id, self.owner, new_message_id(), job["status"], reconcile_body(job))
            if claim is None:
                return
            await self.store_reconcile(job, claim)
        stored = self.jobs.reconcile(job_id)
        if job["status"] == "completed" and (job["request"] or {}).get("archiveFork", True) and stored and stored["stored_at"]:
            await self.archive(job)

    async def store_reconcile(self, job: dict[str, Any], claim: dict[str, Any]) -> None:
        """Store the claimed reconcile message (idempotent by its id), hand it to a waiting
        self-fork call or push it to an idle original."""
        request = job["request"] or {}
        labels = request.get("reconcile") or {}
        original = f"codex:{job['original_thread']}"
        sender = job_sender(job)
        metadata: dict[str, Any] = {"fork": fork_element_data(job), "forkJobId": job["id"]}
        if (request.get("receipt") or {}).get("record") is False:
            metadata["receipt"] = {"record": False}
        # A reconcile reports on a job the caller started; it is agent-link's own report, so no
        # before_send policy can refuse it (that would lose the job's outcome).
        message = OutgoingMessage(id=claim["message_id"], sender=sender, to=original, recipient=original, body=claim["body"],
                                  anticipation=labels.get("anticipation") or "fyi", reply_by_ms=labels.get("replyByMs"),
                                  reply_to=None, metadata=metadata)
        row, created = self.app.mailbox.store_message(message)
        via = None
        if job["id"] in self.waiting:
            self.app.mailbox.mark_delivered(row["id"], TOOL_RESULT, {"forkJobId": job["id"]})
            via = TOOL_RESULT
        self.jobs.reconcile_stored(job["id"], self.owner, via)
        if created:
            result = job.get("result") or {}
            self.emit("reconciled", row["id"], job["created_by"], {
                "target": original, "forkJobId": job["id"], "fork": fork_element_data(job), "status": job["status"],
                "tokenUsage": result.get("tokenUsage"), "receipt": request.get("receipt") or {}})
        if via is None:
            await self.push_reconcile(job, row)

    async def push_reconcile(self, job: dict[str, Any], row: Any) -> None:
        """Push the stored reconcile as a turn when the original is loaded and idle; otherwise
        it waits in the original's inbox."""
        try:
            thread = await self.threads.read(job["original_thread"])
        except AgentLinkError:
            return
        if (thread.get("status") or {}).get("type") != "idle":
            return
        delivery = await self.app.push(row, {"resumeIfNeeded": False})
        if delivery is not None and delivery.delivered and delivery.via:
            self.jobs.note_delivery(job["id"], delivery.via)

    async def archive(self, job: dict[str, Any]) -> None:
        """Archive a completed job's fork once, only when Codex reports it as this job's fork."""
        fork_id = job["fork_thread"]
        if not fork_id or not self.jobs.claim_archive(job["id"], fork_id):
            return
        try:
            fork = await self.threads.read(fork_id)
            if fork.get("forkedFromId") != job["original_thread"] or fork.get("threadSource") != THREAD_SOURCE:
                self.jobs.archive_done(job["id"], "kept", "Codex does not report this thread as the job's fork "
                                                          f"(forkedFromId {fork.get('forkedFromId')}, threadSource {fork.get('threadSource')})")
                return
            if not is_archived(fork):
                await self.threads.archive(fork_id)
        except AgentLinkError as exc:
            self.jobs.archive_done(job["id"], "failed", f"{exc.code}: {exc.message}"[:300])
            return
        self.jobs.archive_done(job["id"], "archived")
        self.emit("archived", None, job["created_by"], {"target": f"codex:{fork_id}", "forkJobId": job["id"],
                                                        "reason": "fork job completed", "receipt": (job["request"] or {}).get("receipt") or {}})

    # waiting -----------------------------------------------------------------------------
    async def wait_finished(self, job_id: str, timeout_ms: int, poll_ms: int = 200) -> bool:
        """Wait until the job ended and its reconcile is stored; False on timeout."""
        deadline = now_ms() + timeout_ms
        while True:
            job = self.jobs.get(job_id)
            if job is None or job["status"] == "aborted":
                return True
            if job["status"] in FINISHED:
                stored = self.jobs.reconcile(job_id)
                if stored is not None and stored["stored_at"] is not None:
                    return True
            if now_ms() >= deadline:
                return False
            await asyncio.sleep(poll_ms / 1000)

    # the sweeper -------------------------------------------------------------------------
    async def sweeper_loop(self) -> None:
        """Sweep shortly after start, then every ``AGENT_LINK_FORKS_SWEEP_MS`` (runs until cancelled)."""
        await asyncio.sleep(FIRST_SWEEP_S)
        while True:
            try:
                await self.sweep()
            except Exception:  # one bad pass must not end the sweeper
                log.exception("agent-link: fork job sweep failed")
            await asyncio.sleep(self.sweep_ms / 1000)

    async def sweep(self) -> dict[str, int]:
        """One pass: take over expired leases (watching or finishing those jobs in the
        background) and complete reconciles and archives left half done. Returns counts
        ``{taken, completed}``."""
        counts = {"taken": 0, "completed": 0}
        for job in self.jobs.claimable(self.start_timeout_ms):
            if self.jobs.take_over(job, self.owner, self.lease_ms):
                counts["taken"] += 1
                self.spawn(self.resume(job["id"]))
        for job in self.jobs.unfinished_reconciles():
            counts["completed"] += 1
            await self.complete(job["id"])
        return counts

    async def resume(self, job_id: str) -> None:
        """Finish a job this process took over (see the module docstring)."""
        job = self.jobs.get(job_id)
        if job is None or job["status"] != "running" or job["lease_owner"] != self.owner:
            return
        if job["lease_generation"] > MAX_LEASE_GENERATIONS:
            await self.finish(job_id, "failed", {"error": f"given up after {MAX_LEASE_GENERATIONS} takeovers"})
            return
        if job["task_turn_id"] is None and job["fork_thread"]:
            try:
                turn = await self.threads.find_turn(job["fork_thread"], client_id=job_id)
            except AgentLinkError as exc:
                if exc.code != "not_found":
                    self.jobs.release(job_id, self.owner)
                    return
                turn = None
            if turn is not None:
                self.jobs.update(job_id, self.owner, "task_found", {"turnId": turn.get("id")}, phase="turn_started",
                                 task_turn_id=turn.get("id"))
                job = self.jobs.get(job_id) or job
        if job["task_turn_id"] is None:
            # the turn/start never landed, or the job is past the start timeout
            await self.finish(job_id, "failed", {"error": "the task never started (its agent-link server stopped first)",
                                                 "neverStarted": True})
            return
        await self.watch(job_id)
