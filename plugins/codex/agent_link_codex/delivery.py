"""Pushing a stored message into a Codex thread as a turn, exactly once, on evidence.

The message row already exists (the core stores it first). Then (docs/behaviour.md §16.4-16.6, docs/hosts/codex.md §6-7):

1. find the thread on every live app-server; archived → ``archived``; unknown → ``not_found``;
2. loaded nowhere reachable: if another process holds its rollout open (a desktop app's
   private app-server), mail only, with warning ``codex_desktop_push_disabled``; otherwise
   ``thread/resume`` it first when ``resumeIfNeeded`` (default) allows;
3. take the push claim (one row per message, :mod:`agent_link_codex.schema`): a message whose
   earlier push may have landed is never pushed again before the thread was checked;
4. idle → ``turn/start {input: envelope, clientUserMessageId: message id}`` (plus the allowed
   ``model`` / ``effort`` / ``cwd`` overrides, :mod:`agent_link_codex.overrides`); active →
   ``turn/steer {expectedTurnId}`` (falling back to ``turn/start`` once when the turn ended
   meanwhile, which Codex turns into a steer of whatever turn is active);
5. delivered only when a userMessage item echoes the message id as ``clientId``; an answer
   that never came is checked against the thread's items (then the rollout file) before
   anything else happens: found → delivered (``codex_push_response_lost``), verifiably absent
   → queued again (``codex_push_failed``), unknowable → ``unknown`` (rechecked later, and by
   a push of the same message, e.g. ``agent-link send --retry-unknown``, before it resends).

Only failures known to happen before Codex accepted a turn are ``retryable``: no app-server
answered before the turn request (``codex_unavailable``), or one refused with JSON-RPC
:data:`OVERLOADED`. Their claim is given back without counting as an attempt.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from agent_link_core.errors import AgentLinkError
from agent_link_core.harness import Delivery
from agent_link_core.store import Store, now_ms

from agent_link_codex import rollouts
from agent_link_codex.appserver import AppServerError, AppServerUnavailable
from agent_link_codex.managed import pid_alive
from agent_link_codex.overrides import turn_params
from agent_link_codex.service import CodexService, Link, Location, is_not_found

log = logging.getLogger(__name__)

VIA = "codex-turn"
CONFIRM_MS = 10_000
CONFIRM_POLL_MS = 100
STALE_CLAIM_MS = 180_000
#: How long a turn waits for agent-link's MCP server to finish starting on the thread.
MCP_READY_MS = 20_000
#: How long this process keeps listening for the echo of an accepted push (later: rechecks).
ACCEPTED_WATCH_MS = 3_600_000
ACCEPTED_NOTE = "accepted, awaiting the thread"
MAX_ATTEMPTS = 3
ITEMS_CHECKED = 200
#: Codex's documented retryable error: "Server overloaded; retry later." (nothing was accepted).
OVERLOADED = -32001
_FOUND_TURN_RE = re.compile(r"but found `([^`]+)`")


def text_input(text: str) -> list[dict[str, Any]]:
    """Codex ``UserInput`` for plain text."""
    return [{"type": "text", "text": text, "text_elements": []}]


class PushClaims:
    """The ``codex_pushes`` table: one push claim per message (see :mod:`agent_link_codex.schema`)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def get(self, message_id: str) -> Any:
        """The claim row of ``message_id`` (``sqlite3.Row``), or None."""
        return self.store.conn.execute("SELECT * FROM codex_pushes WHERE message_id = ?", (message_id,)).fetchone()

    def claim(self, message_id: str, thread_id: str, endpoint_id: str | None) -> bool:
        """Claim the push of ``message_id``; True for the one caller that wins.

        A new message is claimed by inserting its row; a verifiably failed push (state
        ``failed``, fewer than :data:`MAX_ATTEMPTS` attempts) by a conditional update.
        """
        at = now_ms()
        with self.store.write() as conn:
            cur = conn.execute(
                "INSERT OR IGNORE INTO codex_pushes (message_id, thread_id, endpoint_id, state, owner_pid, claimed_at, updated_at)"
                " VALUES (?, ?, ?, 'pushing', ?, ?, ?)",
                (message_id, thread_id, endpoint_id, os.getpid(), at, at),
            )
            if cur.rowcount == 1:
                return True
            cur = conn.execute(
                "UPDATE codex_pushes SET state = 'pushing', endpoint_id = ?, owner_pid = ?, attempts = attempts + 1,"
                " error = NULL, claimed_at = ?, updated_at = ? WHERE message_id = ? AND state = 'failed' AND attempts < ?",
                (endpoint_id, os.getpid(), at, at, message_id, MAX_ATTEMPTS),
            )
            return cur.rowcount == 1

    def release(self, message_id: str, error: str) -> None:
        """Give back a claim whose turn request never reached Codex (refused as overloaded):
        state ``failed`` and the attempt uncounted, so ``attempts`` counts only pushes that
        may have landed."""
        with self.store.write() as conn:
            conn.execute(
                "UPDATE codex_pushes SET state = 'failed', attempts = attempts - 1, error = ?, updated_at = ?"
                " WHERE message_id = ? AND state = 'pushing'",
                (error[:300], now_ms(), message_id),
            )

    def reclaimable(self, message_id: str) -> bool:
        """Whether a push of ``message_id`` may be tried (never claimed, or failed with tries left)."""
        row = self.get(message_id)
        return row is None or (row["state"] == "failed" and row["attempts"] < MAX_ATTEMPTS)

    def settle(self, message_id: str, state: str, **fields: Any) -> None:
        """Record a push outcome (``confirmed``, ``failed``, ``unknown``) and its facts."""
        columns = {k: v for k, v in fields.items() if k in ("action", "turn_id", "item_id", "error", "endpoint_id")}
        sets = ", ".join(f"{k} = ?" for k in columns)
        extra = ", checks = checks + 1" if fields.get("unreadable") else ""
        with self.store.write() as conn:
            conn.execute(
                f"UPDATE codex_pushes SET state = ?, updated_at = ?{', ' + sets if sets else ''}{extra} WHERE message_id = ?",
                (state, now_ms(), *columns.values(), message_id),
            )

    def stale(self, older_than_ms: int = STALE_CLAIM_MS, limit: int = 20) -> list[Any]:
        """Open outcomes (``pushing``/``unknown``, and ``accepted`` ones awaiting their echo)
        untouched for ``older_than_ms``, oldest first."""
        return self.store.conn.execute(
            "SELECT * FROM codex_pushes WHERE (state IN ('pushing', 'unknown') AND checks < 5 OR state = 'accepted')"
            " AND updated_at < ?"
            " ORDER BY updated_at LIMIT ?",
            (now_ms() - older_than_ms, limit),
        ).fetchall()


def orphaned(claim: Any) -> bool:
    """Whether a ``pushing`` claim belongs to a process that is gone (it died mid-push, so
    nobody will settle it). A live owner, this process included, keeps its claim."""
    owner = claim["owner_pid"]
    return claim["state"] == "pushing" and owner != os.getpid() and not pid_alive(owner)


def warning(code: str, message: str, **details: Any) -> dict[str, Any]:
    """A result warning ``{code, message, details?}``."""
    out: dict[str, Any] = {"code": code, "message": message}
    if details:
        out["details"] = details
    return out


def not_sent(exc: AgentLinkError) -> Delivery | None:
    """A ``retryable`` :class:`Delivery` for an error raised before any turn request left:
    ``codex_unavailable``, or ``upstream_error`` with JSON-RPC :data:`OVERLOADED`. None for
    anything else (a definite refusal). Warning details carry reasons, never socket paths."""
    if exc.code == "codex_unavailable":
        return Delivery(retryable=True, warnings=[warning(
            "codex_unavailable", "No Codex app-server answered before anything was sent; the message waits in the mailbox.",
            reason=exc.details.get("reason"))])
    if exc.code == "upstream_error" and exc.details.get("rpcCode") == OVERLOADED:
        return overloaded(exc.details.get("method"))
    return None


def overloaded(method: str | None, fields: dict[str, Any] | None = None) -> Delivery:
    """The retryable outcome of an app-server refusing with :data:`OVERLOADED` (``fields``:
    the send result fields known so far)."""
    return Delivery(retryable=True, fields=dict(fields or {}), warnings=[warning(
        "codex_overloaded", "The Codex app-server is overloaded and accepted nothing; the message waits in the mailbox.",
        method=method)])


def accepted(fields: dict[str, Any]) -> Delivery:
    """The outcome of a push Codex accepted whose echo has not come yet."""
    return Delivery(accepted=True, state="accepted_awaiting_thread", note=ACCEPTED_NOTE, fields=fields, warnings=[warning(
        "codex_push_accepted",
        "Codex accepted the message, but the thread has not taken it in yet (a tool call or model request may still be "
        "running). It is not pushed again and counts as delivered once the thread shows it.")])


class Deliverer:
    """Pushes messages through a :class:`CodexService`, recording claims in ``claims``.

    :param desktop_push: ``mailbox-only`` or ``shared-daemon`` (honoured only together with
        an explicit endpoint).
    :param explicit_endpoint: whether AGENT_LINK_CODEX_URL / _SOCK is set.
    """

    def __init__(self, service: CodexService, claims: PushClaims, *, desktop_push: str = "mailbox-only",
                 explicit_endpoint: bool = False, mcp_servers: frozenset[str] = frozenset({"agent-link"}),
                 mcp_ready_ms: int = MCP_READY_MS,
                 on_confirmed: Callable[[str, dict[str, Any]], None] | None = None) -> None:
        self.service = service
        #: called with (message id, evidence) when an accepted push's echo arrives later
        self.on_confirmed = on_confirmed
        self.claims = claims
        self.desktop_push = desktop_push
        self.explicit_endpoint = explicit_endpoint
        self.mcp_servers = mcp_servers
        self.mcp_ready_ms = mcp_ready_ms
        #: holder checks before pushes in this process: ``checked`` (ran), ``held`` (found a
        #: foreign holder), ``skipped`` (reason → count: ``no_rollout_path``,
        #: ``holder_check_unavailable``)
        self.rollout_checks: dict[str, Any] = {"checked": 0, "held": 0, "skipped": {}}

    async def push(
        self, message_id: str, thread_id: str, text: str, options: Mapping[str, Any], *,
        background: bool = False, trigger: str = "agent-link",
    ) -> Delivery:
        """Push one stored message (see the module docstring for the rules).

        :param background: never start an app-server and always re-read the thread first.
        :returns: a :class:`Delivery` (``fields``: action, threadId, turnId, evidence and
            ``target {threadId, address, previousStatus, endpoint}``); ``retryable`` when
            nothing reached Codex (see the module docstring), ``unknown`` when the turn
            request may have landed and the thread could not be checked (both when nothing
            new was sent but an earlier push of the message is still unsettled).
        :raises AgentLinkError: ``not_found``, ``archived``, ``active_turn_conflict``,
            ``upstream_error`` (a definite refusal).
        """
        try:
            return await self._push(message_id, thread_id, text, options, background=background, trigger=trigger)
        except AgentLinkError as exc:
            retry = not_sent(exc)
            if retry is None:
                raise
            earlier = self.claims.get(message_id)
            if earlier is not None and earlier["state"] == "unknown":
                # nothing new was sent, but an earlier push whose answer was lost is still unsettled
                retry.unknown, retry.state = True, "unknown"
            return retry

    async def _push(self, message_id: str, thread_id: str, text: str, options: Mapping[str, Any], *,
                    background: bool, trigger: str) -> Delivery:
        links = self.service.live_links() if background else await self.service.connect(spawn=True)
        if not links:
            return Delivery(warnings=[warning("codex_unavailable", "No Codex app-server is connected; the message waits in the mailbox.")])
        location = await self._locate(thread_id, links, fresh=background)
        if location is None:
            raise AgentLinkError("not_found", f"No Codex thread {thread_id} is known.", {"id": thread_id, "candidates": []})
        if location.archived:
            raise AgentLinkError("archived", f"codex:{thread_id} is archived and cannot receive turns.", {"address": f"codex:{thread_id}"})
        # result fields of the send (keys of the core's send result schema)
        fields: dict[str, Any] = {"threadId": thread_id, "target": {"threadId": thread_id, "address": f"codex:{thread_id}",
                                                                    "previousStatus": location.status}}
        warnings: list[dict[str, Any]] = []
        link, resumed = location.link, location.link is None
        if link is None:
            link, held = await self._resume_to_push(location, links, thread_id, options, background, fields, warnings)
            if held is not None:
                return held
        elif thread_id not in link.tracker.subscribed:
            await self._subscribe(link, thread_id)
        fields["target"]["endpoint"] = link.endpoint.id
        claimed = self.claims.claim(message_id, thread_id, link.endpoint.id)
        earlier = None if claimed else self.claims.get(message_id)
        if earlier is not None and (earlier["state"] == "unknown" or orphaned(earlier)):
            # an earlier answer was lost, or the process that took the claim died mid-push:
            # the thread says whether it landed before anything is resent
            checked = await self._check(link, links, message_id, thread_id, dict(fields), lost=True)
            if checked.delivered or checked.unknown:
                checked.fields["action"] = "already_delivered" if checked.delivered else "unverified"
                return checked
            claimed = self.claims.claim(message_id, thread_id, link.endpoint.id)  # verifiably absent: push it now
        if not claimed:
            return self._claimed_before(message_id, thread_id, fields)
        status = link.tracker.status.get(thread_id, location.status)
        if status != "active":
            warnings += await self._tools_ready(link, thread_id)
        try:
            turn_id, action = await self._send(link, thread_id, text, message_id, status, options, trigger)
        except AgentLinkError:
            self.claims.settle(message_id, "failed", error="refused")
            raise
        except AppServerError as exc:
            if exc.code == OVERLOADED:
                self.claims.release(message_id, str(exc))
                return overloaded(exc.method, {**fields, "action": "not_sent"})
            self.claims.settle(message_id, "failed", error=str(exc)[:300])
            if is_not_found(exc):
                raise AgentLinkError("not_found", f"Codex no longer knows thread {thread_id}.", {"id": thread_id, "candidates": []}) from None
            raise exc.to_agent_link_error() from None
        except AppServerUnavailable:
            return await self._check(link, links, message_id, thread_id, fields, lost=True)
        if resumed:
            action = "resumed+" + action
        fields.update({"action": action, "turnId": turn_id})
        evidence = await self._confirm(link, thread_id, message_id)
        if evidence is None:
            return await self._check(link, links, message_id, thread_id, fields, lost=False)
        self.claims.settle(message_id, "confirmed", action=action, turn_id=evidence.get("turnId") or turn_id, item_id=evidence.get("itemId"))
        proof = {"clientId": message_id, **evidence, "endpoint": link.endpoint.id}
        return Delivery(delivered=True, via=VIA, state="accepted_by_app_server", warnings=warnings,
                        fields={**fields, "evidence": proof}, evidence=proof)

    async def _resume_to_push(self, location: Any, links: list[Link], thread_id: str, options: Mapping[str, Any], background: bool,
                              fields: dict[str, Any], warnings: list[dict[str, Any]]) -> tuple[Any, Delivery | None]:
        """A thread loaded in no reachable app-server: ``(the link that resumed it, None)``, or ``(None, the queued
        delivery)`` when another program holds it open (the desktop app), in the background, or without ``resumeIfNeeded``.
        Adds its warnings to ``warnings``."""
        held = self._held_elsewhere(location, links)
        if held:
            if self.desktop_push == "shared-daemon" and self.explicit_endpoint:
                warnings.append(warning("desktop_push_unverified", "The thread is open in another app-server; pushing anyway as AGENT_LINK_CODEX_DESKTOP_PUSH=shared-daemon asks."))
            else:
                if self.desktop_push == "shared-daemon":
                    warnings.append(warning("desktop_push_override_refused", "AGENT_LINK_CODEX_DESKTOP_PUSH=shared-daemon needs an explicit endpoint (AGENT_LINK_CODEX_URL or _SOCK)."))
                warnings.append(warning(
                    "codex_desktop_push_disabled",
                    "Another program (such as the Codex desktop app) has this thread open, so agent-link does not start turns in it; the message waits in the mailbox and the thread's prompt hook will announce it.",
                    signal="rollout-open-elsewhere", holders=held,
                ))
                return None, Delivery(state="queued", warnings=warnings, fields={**fields, "action": "held_elsewhere"})
        if background or not options.get("resumeIfNeeded", True):
            return None, Delivery(state="queued", fields={**fields, "action": "not_loaded"}, warnings=[
                warning("codex_thread_not_loaded", "The thread is not loaded in any reachable app-server and was not resumed; the message waits in the mailbox.")])
        link = location.readers[0]
        try:
            result = await link.call("thread/resume", {"threadId": thread_id, "excludeTurns": True})
        except (AppServerError, AppServerUnavailable) as exc:
            raise exc.to_agent_link_error() from None
        link.tracker.remember(result.get("thread") or {"id": thread_id, "status": {"type": "idle"}}, subscribed=True)
        link.tracker.expect_mcp_reports(thread_id)
        return link, None

    @staticmethod
    async def _subscribe(link: Link, thread_id: str) -> None:
        """Resume a thread loaded in ``link`` to subscribe to it: only subscribers get item notifications. A thread without a
        turn yet cannot be resumed ("no rollout found"); its echo is then read from the thread instead."""
        try:
            result = await link.call("thread/resume", {"threadId": thread_id, "excludeTurns": True})
            link.tracker.remember(result.get("thread") or {"id": thread_id}, subscribed=True)
        except AppServerError:
            pass
        except AppServerUnavailable as exc:
            raise exc.to_agent_link_error() from None

    def _claimed_before(self, message_id: str, thread_id: str, fields: dict[str, Any]) -> Delivery:
        """What a push of a message another push claimed answers: accepted or delivered already, else still in progress."""
        row = self.claims.get(message_id)
        if row is not None and row["state"] == "accepted":
            return accepted({**fields, "action": "already_accepted"})
        if row is not None and row["state"] == "confirmed":
            return Delivery(delivered=True, via=VIA, state="accepted_by_app_server", fields={**fields, "action": "already_delivered"},
                            evidence={"clientId": message_id, "threadId": thread_id, "turnId": row["turn_id"], "itemId": row["item_id"]})
        return Delivery(state="queued", fields={**fields, "action": "claimed_elsewhere"}, warnings=[
            warning("codex_push_claimed_elsewhere", "Another push of this message is in progress or unsettled; it is not sent twice.")])

    async def _tools_ready(self, link: Link, thread_id: str) -> list[dict[str, Any]]:
        """Before a turn is started: wait (up to ``mcp_ready_ms``) while agent-link's MCP
        server is still starting on the thread, or its start-up report is still on its way
        after a resume or a ``thread/start`` (:meth:`ThreadTracker.wait_mcp_started`). Codex
        builds a turn's tools from the servers ready when it starts, so a turn started during
        start-up could not reply through agent-link. Returns warnings."""
        seen = await link.tracker.wait_mcp_started(thread_id, self.mcp_servers, self.mcp_ready_ms)
        stuck = {name: state for name, state in seen.items() if state != "ready"}
        if not stuck:
            return []
        return [warning("codex_tools_not_ready",
                        "agent-link's MCP server was not ready on the thread when the turn started (still starting, failed, or "
                        "never reported: perhaps not configured in this Codex); the model may not be able to reply with "
                        "agent-link's tools in this turn (read_agent_link_inbox still works later).",
                        servers=stuck, waitedMs=self.mcp_ready_ms)]

    async def _confirm(self, link: Link, thread_id: str, message_id: str) -> dict[str, Any] | None:
        """Wait up to :data:`CONFIRM_MS` for the echo: from notifications when subscribed,
        else by reading the thread's newest items every :data:`CONFIRM_POLL_MS`."""
        if thread_id in link.tracker.subscribed:
            return await link.tracker.wait_echo(message_id, CONFIRM_MS)
        deadline = time.monotonic() + CONFIRM_MS / 1000
        while time.monotonic() < deadline:
            seen = await link.tracker.wait_echo(message_id, CONFIRM_POLL_MS)
            if seen is not None:
                return seen
            found, _ = await self.find_echo(thread_id, message_id, [link], rollout=False)
            if found is not None:
                return found
        return None

    async def _locate(self, thread_id: str, links: list[Link], fresh: bool) -> Location | None:
        try:
            return await self.service.locate(thread_id, links, fresh=fresh)
        except AppServerUnavailable as exc:
            raise exc.to_agent_link_error() from None

    def _held_elsewhere(self, location: Location, links: list[Link]) -> list[int]:
        """Pids of foreign processes holding the thread's rollout open (none when unknown).

        Our own process and the app-servers we are connected to do not count, nor members of
        a process group one of those app-servers leads (the private one runs that way).
        """
        path = location.thread.get("path")
        if not isinstance(path, str) or not path:
            self._skipped_check("no_rollout_path")
            return []
        servers = {ln.pid for ln in links if ln.pid}
        led_groups = set()
        for pid in servers:
            try:
                if os.getpgid(pid) == pid:
                    led_groups.add(pid)
            except OSError:
                continue
        holders = rollouts.rollout_holders(path, {os.getpid(), *servers})
        if holders is None:  # never blocks: the push goes ahead as if nobody held it
            self._skipped_check("holder_check_unavailable")
            return []
        foreign = []
        for pid in holders:
            try:
                if os.getpgid(pid) in led_groups:
                    continue
            except OSError:
                continue
            foreign.append(pid)
        self.rollout_checks["checked"] += 1
        self.rollout_checks["held"] += bool(foreign)
        return foreign

    def _skipped_check(self, reason: str) -> None:
        skipped = self.rollout_checks["skipped"]
        skipped[reason] = skipped.get(reason, 0) + 1

    async def _send(self, link: Link, thread_id: str, text: str, message_id: str, status: str,
                    options: Mapping[str, Any], trigger: str) -> tuple[str | None, str]:
        """Start or steer a turn; returns ``(turn id, action)``."""
        mode = options.get("mode", "auto")
        expected = options.get("expectedTurnId")
        overrides = turn_params(options)
        if overrides and status == "active":
            # turn/steer carries no model/effort/cwd, and turn/start joins the running turn
            raise AgentLinkError("active_turn_conflict",
                                 f"codex:{thread_id} is running a turn; turn/steer cannot change its {', '.join(overrides)}.",
                                 {"status": "active", "activeTurnId": link.tracker.active_turn.get(thread_id), "settings": list(overrides)},
                                 hint="Wait until the thread is idle, then send again with the change.")
        if mode == "steer_active" and status != "active":
            raise AgentLinkError("active_turn_conflict", f"codex:{thread_id} has no active turn to steer.",
                                 {"status": status, "activeTurnId": None}, hint="Use mode auto or start_turn.")
        if status == "active" and mode != "start_turn":
            turn = expected or link.tracker.active_turn.get(thread_id) or await self._active_turn(link, thread_id)
            for _ in range(2):
                if not turn:
                    break
                try:
                    result = await link.call("turn/steer", {"threadId": thread_id, "expectedTurnId": turn,
                                                            "input": text_input(text), "clientUserMessageId": message_id})
                    return result.get("turnId") or turn, "steered_active_turn"
                except AppServerError as exc:
                    found = _FOUND_TURN_RE.search(exc.message)
                    if found and expected:
                        raise AgentLinkError("active_turn_conflict", f"The active turn of codex:{thread_id} is not {expected}.",
                                             {"status": "active", "activeTurnId": found.group(1)}) from None
                    if found:
                        turn = found.group(1)
                        continue
                    if "no active turn" in exc.message:
                        break  # it ended meanwhile: start a turn instead
                    raise
        active_before = link.tracker.active_turn.get(thread_id)
        params = {"threadId": thread_id, "input": text_input(text), "clientUserMessageId": message_id, "turnTrigger": trigger,
                  **overrides}
        result = await link.call("turn/start", params)
        turn_id = (result.get("turn") or {}).get("id")
        # turn/start on a thread that just became active joins that turn (Codex steers it)
        action = "steered_active_turn" if status == "active" or (active_before and active_before == turn_id) else "started_turn"
        return turn_id, action

    @staticmethod
    async def _active_turn(link: Link, thread_id: str) -> str | None:
        """The in-progress turn of a thread whose turn started before we subscribed."""
        try:
            page = await link.call("thread/turns/list", {"threadId": thread_id, "limit": 1, "itemsView": "notLoaded"})
        except AppServerError:
            return None
        turns = page.get("data") or []
        return turns[0].get("id") if turns and turns[0].get("status") == "inProgress" else None

    def _watch(self, link: Link, message_id: str, thread_id: str) -> None:
        """Record delivery of an accepted push when its echo arrives on this connection, for
        as long as the connection (and this process) lives; later processes recheck."""
        if self.on_confirmed is None or thread_id not in link.tracker.subscribed:
            return
        on_confirmed = self.on_confirmed

        async def watch() -> None:
            seen = await link.tracker.wait_echo(message_id, ACCEPTED_WATCH_MS)
            if not seen:
                return
            try:
                self.claims.settle(message_id, "confirmed", turn_id=seen.get("turnId"), item_id=seen.get("itemId"))
                on_confirmed(message_id, {"clientId": message_id, **seen, "endpoint": link.endpoint.id})
            except Exception:  # the claim stays accepted: a later recheck confirms it
                log.exception("agent-link: recording the late echo of %s failed", message_id)

        self.service.spawn(watch())

    async def _check(self, link: Link, links: list[Link], message_id: str, thread_id: str,
                     fields: dict[str, Any], *, lost: bool) -> Delivery:
        """The answer (``lost``) or the echo never came: look for the message in the thread
        first. An answered request whose echo is late is ``accepted``, never sent again."""
        found, readable = await self.find_echo(thread_id, message_id, [link, *links])
        if found is not None:
            self.claims.settle(message_id, "confirmed", turn_id=found.get("turnId"), item_id=found.get("itemId"),
                               action=fields.get("action"))
            proof = {"clientId": message_id, **found}
            return Delivery(delivered=True, via=VIA, state="accepted_by_app_server", fields={**fields, "evidence": proof},
                            evidence=proof,
                            warnings=[warning("codex_push_response_lost", "The app-server's answer was lost, but the thread shows the message arrived.")])
        if not lost:
            # Codex answered the turn request: the input is in the thread's queue (e.g. behind a
            # running tool call) and shows up later. Pushing it again would make it two turns.
            self.claims.settle(message_id, "accepted", action=fields.get("action"), turn_id=fields.get("turnId"))
            self._watch(link, message_id, thread_id)
            return accepted(fields)
        if readable:
            self.claims.settle(message_id, "failed", error="no echo in the thread")
            return Delivery(state="queued", fields=fields, warnings=[warning(
                "codex_push_failed", "The thread shows no sign of the message; it stays in the mailbox and is offered again when the thread is idle.",
                verified=True)])
        self.claims.settle(message_id, "unknown", error="lost" if lost else "no echo", unreadable=True)
        return Delivery(state="unknown", unknown=True, fields=fields, warnings=[warning(
            "codex_push_unverified", "The app-server stopped answering and the thread could not be checked; the message is not sent again until it can be.",
        )])

    async def find_echo(self, thread_id: str, message_id: str, links: list[Link], *,
                        rollout: bool = True) -> tuple[dict[str, Any] | None, bool]:
        """Look for the userMessage echoing ``message_id`` in the thread.

        Tries the trackers, then ``thread/items/list`` (newest :data:`ITEMS_CHECKED` items) on
        the first live link that answers, then (with ``rollout``) the rollout file.

        :returns: ``(evidence or None, whether the thread could be read)``.
        """
        for link in links:
            seen = link.tracker.echo(message_id)
            if seen is not None:
                return seen, True
        readable = False
        for link in dict.fromkeys(ln for ln in links if ln.alive):
            try:
                page = await link.call("thread/items/list", {"threadId": thread_id, "limit": ITEMS_CHECKED, "sortDirection": "desc"},
                                       background=True)
            except (AppServerError, AppServerUnavailable):
                continue
            readable = True
            for entry in page.get("data") or []:
                item = entry.get("item") or {}
                if item.get("type") == "userMessage" and item.get("clientId") == message_id:
                    return {"threadId": thread_id, "turnId": entry.get("turnId"), "itemId": item.get("id")}, True
            return None, True
        path = rollouts.find_rollout(self.service.codex_home, thread_id) if rollout else None
        if path is not None:
            item = rollouts.client_id_seen(path, message_id)
            if item is not None:
                return {"threadId": thread_id, "turnId": item.get("turnId"), "itemId": item.get("id"), "source": "rollout"}, True
        return None, readable
