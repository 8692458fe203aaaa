"""The ``codex`` harness: Codex threads as agent-link sessions (address ``codex:<threadId>``).

* Caller identity comes from the MCP tool call's ``_meta`` (Codex 0.169.0 sends
  ``threadId``, ``callId`` and ``x-codex-turn-metadata.turn_id``; it gives MCP servers no
  ``CODEX_THREAD_ID``). ``CODEX_THREAD_ID`` in the environment is used only when there is no
  ``_meta`` thread (a shell command Codex ran, e.g. the CLI).
* Sessions come from the reachable app-servers, else from rollout transcripts.
* Delivery is :class:`~agent_link_codex.delivery.Deliverer`'s turn push.
* While an MCP client is connected, :meth:`CodexHarness.serve` offers queued mail and
  :meth:`CodexHarness.remind_every` due reminders to threads an already open connection has
  seen idle; neither opens a connection or starts an app-server for that. :meth:`CodexHarness.aclose` (called by the
  App at shutdown) closes the connections and stops the private app-server.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_link_core.errors import AgentLinkError
from agent_link_core.harness import Delivery, Harness, OutputBudget, SessionListing
from agent_link_core.model import Caller, Session
from agent_link_core.store import Store, now_ms

from agent_link_codex.endpoints import EndpointRegistry, explicit
from agent_link_codex.proof import Prover
from agent_link_codex.settings import SENDER_OPTIONS
from agent_link_codex.settings import codex_home
from agent_link_codex.threads import (
    CALL_KEYS,
    ID_RE,
    NAMED_SENDER_KEYS,
    THREAD_KEYS,
    TURN_KEYS,
    meta_value,
    send_facets,
    session_from_thread,
    status_of,
)

if TYPE_CHECKING:  # annotations only: these modules load in the methods that use them
    from agent_link_codex.delivery import Deliverer, PushClaims
    from agent_link_codex.overrides import Launches
    from agent_link_codex.service import CodexService, Link

log = logging.getLogger(__name__)

BACKGROUND_INTERVAL_S = 5.0
QUEUED_MIN_AGE_MS = 5_000
QUEUED_MAX_AGE_MS = 3_600_000
REMINDER_VIA = "codex-turn"
#: how often (s) an MCP server offers idle Codex threads their due reminders as a turn
REMINDER_SWEEP_S = 15.0


class CodexHarness(Harness):
    """Codex threads as agent-link sessions. One instance per :class:`~agent_link_core.app.App`."""

    name = "codex"
    session_kind = "codex_thread"
    #: the thread source kinds of ``agent_link_codex.service.SOURCE_KINDS`` and the surfaces of
    #: :func:`agent_link_codex.threads.surface_of` (a test keeps them equal)
    source_kinds = ("cli", "vscode", "exec", "appServer", "subAgent", "subAgentReview", "subAgentCompact",
                    "subAgentThreadSpawn", "subAgentOther", "unknown", "app")
    host_variables = ("CODEX_THREAD_ID",)
    host_priority = 20
    env_variables = ("CODEX_HOME",)  # transcripts, config, the app-server's control socket
    # ``added`` / ``updated`` / ``registry-full`` once ``--socket PATH`` registered its endpoint
    # in this process (reported by ``sessions`` and ``send``, as agent-session-intercom does).
    endpoint_registration: str | None = None
    # `agent-link send --from-thread T [--from-endpoint E]`: identify_caller gets exactly these keys
    sender_options = SENDER_OPTIONS
    wait_result_fields = {"turn": {"type": ["object", "null"]}}
    # Measured on Codex 0.169.0: an MCP tool's output reaches the model as "Wall time: …\nOutput:\n"
    # plus structuredContent as JSON with indent 2; above about 12,000 characters Codex keeps the
    # head and tail and cuts the middle ("…N tokens truncated…"); 10,233 passed whole. A turn's
    # input text reached the model whole at 400,000 characters, far above any envelope: no push limit.
    output_budget = OutputBudget(tool_result_bytes=10_000, json_indent=2, push_bytes=None)

    def __init__(self) -> None:
        self._values: dict[str, Any] | None = None
        self._env: dict[str, str] | None = None
        self._state_dir: Path | None = None
        self._store: Store | None = None
        self._service: CodexService | None = None
        self._deliverer: Deliverer | None = None
        #: thread id → the last thread object get_session saw (for the override check)
        self._seen: dict[str, dict[str, Any]] = {}
        #: thread id → overrides this process applied since (model, effort, cwd)
        self._applied: dict[str, dict[str, str]] = {}
        #: what the last agent_link_health asked for and found (prepare_health)
        self._health_options: dict[str, Any] | None = None
        self._version_probe: dict[str, Any] | None = None
        self._health_connect_error: str | None = None
        self._prover = Prover()

    # context ---------------------------------------------------------------------------
    def attach(self, app: Any) -> None:
        """Use ``app``'s settings, environment and database (called by the App at creation)."""
        super().attach(app)
        self._values = dict(app.config.values)
        self._env = dict(app.env)
        self._state_dir = Path(app.config.state_dir)
        self._store = app.store

    def _bound(self) -> None:
        if self._values is None:
            raise RuntimeError("the codex harness is used before an App attached it")

    @property
    def values(self) -> dict[str, Any]:
        """Parsed settings (the App's)."""
        self._bound()
        assert self._values is not None
        return self._values

    @property
    def env(self) -> dict[str, str]:
        """The App's environment."""
        self._bound()
        assert self._env is not None
        return self._env

    @property
    def store(self) -> Store:
        """The App's agent-link database."""
        self._bound()
        assert self._store is not None
        return self._store

    @property
    def registry(self) -> EndpointRegistry:
        """The registered-endpoint registry (usable by the CLI)."""
        return EndpointRegistry(self.store)

    @property
    def service(self) -> CodexService:
        """Connections and the private app-server (created on first use)."""
        from agent_link_codex.service import CodexService

        if self._service is None:
            self._bound()
            assert self._state_dir is not None
            self._service = CodexService(self.values, self.env, self._state_dir, self.registry.list)
            # The App stops it through aclose(); this covers a process that never closes its App.
            atexit.register(self._service.stop_managed)
        return self._service

    @property
    def deliverer(self) -> Deliverer:
        """The turn pusher (created on first use)."""
        from agent_link_codex.delivery import Deliverer, MCP_READY_MS, PushClaims

        if self._deliverer is None:
            self._deliverer = Deliverer(self.service, PushClaims(self.store),
                                        desktop_push=self.values.get("AGENT_LINK_CODEX_DESKTOP_PUSH") or "mailbox-only",
                                        explicit_endpoint=explicit(self.values),
                                        mcp_servers=frozenset({self.values["AGENT_LINK_CODEX_MCP_SERVER"]} if self.values.get("AGENT_LINK_CODEX_MCP_SERVER")
                                                    else {"codex-agent-link", "agent-link"}),
                                        mcp_ready_ms=int(self.values.get("AGENT_LINK_CODEX_MCP_READY_MS", MCP_READY_MS)),
                                        on_confirmed=self._confirmed_late)
        return self._deliverer

    def _confirmed_late(self, message_id: str, evidence: dict[str, Any]) -> None:
        """The echo of an accepted push arrived: the message is delivered now."""
        from agent_link_codex.delivery import VIA

        self.app.mailbox.mark_delivered(message_id, VIA, evidence)

    @property
    def launches(self) -> Launches:
        """The ``codex_launches`` table (who launched which thread)."""
        from agent_link_codex.overrides import Launches

        return Launches(self.store)

    def thread_settings(self, thread_id: str) -> tuple[dict[str, Any], str | None]:
        """``({model, effort, cwd}, status)`` of a thread as last seen, without I/O: overrides
        this process applied, then the thread object (open connections' trackers, then the
        last :meth:`get_session` lookup), then what its launch recorded. Missing values are
        absent (unknown)."""
        from agent_link_codex.overrides import THREAD_FIELDS

        thread: dict[str, Any] = {}
        status: str | None = None
        if self._service is not None:
            for link in self._service.live_links():
                if thread_id in link.tracker.threads:
                    thread = link.tracker.threads[thread_id]
                    status = link.tracker.status.get(thread_id)
                    break
        thread = thread or self._seen.get(thread_id, {})
        out = {s: thread.get(f) for s, f in THREAD_FIELDS.items() if isinstance(thread.get(f), str)}
        if self._values is not None:
            launch = self.launches.get(thread_id)
            if launch is not None:
                for setting in THREAD_FIELDS:
                    if setting not in out and launch[setting]:
                        out[setting] = launch[setting]
        out.update(self._applied.get(thread_id, {}))
        return out, status or (status_of(thread) if thread else None)

    @property
    def claims(self) -> PushClaims:
        """The push claims table."""
        return self.deliverer.claims

    # identity --------------------------------------------------------------------------
    def identify_caller(self, meta: Mapping[str, Any], env: Mapping[str, str]) -> Caller | None:
        """The calling thread from ``_meta`` (source ``runtime_context``), else from
        ``CODEX_THREAD_ID`` (source ``env``); None when neither names a valid thread id. Either
        only names the thread; ``evidence`` is set when Codex proves it
        (:class:`agent_link_codex.proof.Prover`).

        ``meta`` of exactly ``{"threadId"[, "endpointId"]}`` is the CLI's ``--from-thread
        [--from-endpoint]`` (``agent_link_core.identity.named_sender``): that thread is checked against
        the app-servers first (:func:`agent_link_codex.lookup.named_sender`, which may raise
        ``not_found``, ``ambiguous`` or ``codex_unavailable``). Codex's own tool calls always
        carry more keys (``callId``, turn metadata).
        """
        if meta and "threadId" in meta and set(meta) <= NAMED_SENDER_KEYS:
            return self._named_sender(meta.get("threadId"), meta.get("endpointId"))
        thread = meta_value(meta, THREAD_KEYS) if meta else None
        if thread is not None and ID_RE.match(thread):
            return Caller(f"codex:{thread}", "runtime_context", "codex", meta_value(meta, TURN_KEYS), meta_value(meta, CALL_KEYS),
                          evidence=self._prover.evidence(thread))
        env_thread = (env.get("CODEX_THREAD_ID") or "").strip()
        if env_thread and ID_RE.match(env_thread):
            return Caller(f"codex:{env_thread}", "env", "codex", env.get("CODEX_TURN_ID") or None, env.get("CODEX_TOOL_CALL_ID") or None,
                          evidence=self._prover.evidence(env_thread))
        return None

    def _named_sender(self, thread: Any, endpoint: Any) -> Caller | None:
        if not isinstance(thread, str) or not ID_RE.match(thread.strip()):
            return None
        if endpoint is not None and not (isinstance(endpoint, str) and endpoint.startswith("ep_")):
            return None  # another harness's endpoint naming
        from agent_link_codex.lookup import named_sender

        if endpoint is None:  # the intercom variable picks the source endpoint when several know the thread
            endpoint = self.values.get("AGENT_LINK_CODEX_SOURCE_ENDPOINT") or None
        return named_sender(self, thread.strip(), endpoint)

    # discovery -------------------------------------------------------------------------
    def endpoint_states(self) -> list[dict[str, Any]]:
        """Every candidate endpoint as the last connect found it, in preference order:
        ``{id, label, source, reachable, reason}`` (no socket paths). The default control
        socket is left out while no socket file exists there: no daemon runs, nothing failed.
        """
        live = {ln.endpoint.id for ln in self.service.live_links()}
        candidates, _ = self.service.candidates()
        states = []
        for ep in candidates:
            report = self.service.reports.get(ep.id, {})
            reason = None if ep.id in live else report.get("reason") or ("connection-lost" if report.get("ok") else "not-probed")
            if ep.source == "control-socket" and reason == "absent":
                continue
            states.append({"id": ep.id, "label": ep.label, "source": ep.source, "reachable": reason is None, "reason": reason})
        return states

    async def links_or_error(self, *, spawn: bool = True) -> tuple[list[Link], AgentLinkError | None]:
        """Live links, or ``([], error)`` when no app-server can be had."""
        try:
            return await self.service.connect(spawn=spawn), None
        except AgentLinkError as exc:
            return [], exc

    async def list_sessions(self, *, include_archived: bool = False, limit: int = 200) -> SessionListing:
        """Threads of every source kind newest first (app-servers, else rollout transcripts).

        The provider is ``{available, reason, source, endpoints: [{id, label, source,
        reachable, reason}], errors?}`` (:meth:`endpoint_states`; ``errors`` are failed
        ``thread/list`` pages). The listing is incomplete when an endpoint did not answer, a
        page failed, or threads were left beyond ``limit``. At most ``limit`` sessions, the
        newest.
        """
        from agent_link_codex import rollouts
        from agent_link_codex.service import SOURCE_KINDS

        links, error = await self.links_or_error()
        if links:
            # Every source kind (interactive, app-server, exec, sub-agents): a thread started by
            # `codex exec` or spawned as a sub-agent can be messaged like any other.
            threads, paging = await self.service.list_threads(links, source_kinds=SOURCE_KINDS, limit=limit)
            if include_archived:
                archived, more = await self.service.list_threads(links, archived=True, source_kinds=SOURCE_KINDS, limit=limit)
                threads += archived
                paging["complete"] = paging["complete"] and more["complete"]
            loaded = await self.service.loaded_ids(links)
            threads += await self.service.loaded_unlisted(links, {t["id"] for _, t in threads}, loaded)  # blank threads
            sessions = [session_from_thread(t, loaded.get(t["id"], link), loaded=t["id"] in loaded) for link, t in threads]
            # at most ``limit``, the newest (the core reports more as this plugin's fault): thread/list
            # answers in whole pages from every endpoint, and archived and blank threads come besides
            over = len(sessions) > limit
            if over:
                sessions = sorted(sessions, key=lambda s: -(s.last_activity_ms or 0))[:limit]
            states = self.endpoint_states()
            provider = {"available": True, "reason": None, "source": "app-server", "endpoints": states, "errors": paging["errors"]}
            if self.endpoint_registration is not None:
                provider["registration"] = self.endpoint_registration
            # stopping at ``limit`` with more threads left is an incomplete scan too, and so is
            # one that could not ask every endpoint
            complete = paging["complete"] and not paging["nextCursor"] and not over and all(s["reachable"] for s in states)
            return SessionListing(sessions, provider, complete)
        home = codex_home(self.env)
        files = await asyncio.to_thread(rollouts.rollout_files, home, "all" if include_archived else "active")
        names = rollouts.thread_names(home)
        sessions = []
        for path in files[:limit]:
            summary = rollouts.summary(home, path, names)
            # every source kind, as from an app-server: a listing that left exec runs or
            # sub-agents out could not call itself complete
            if summary is not None:
                sessions.append(session_from_thread(summary, None, loaded=None))
        reason = error.details.get("reason") if error is not None else None
        states = self.endpoint_states()
        # available = there is something to list: Codex's transcripts folder (a machine with no
        # Codex at all is not "available" because agent-link can fall back to nothing)
        readable = bool(files) or any((home / d).is_dir() for d in ("sessions", "archived_sessions"))
        provider = {"available": readable, "reason": reason, "source": "local-jsonl-fallback", "endpoints": states}
        # the transcripts are this CODEX_HOME's only: an endpoint that did not answer may serve another
        return SessionListing(sessions, provider, complete=len(files) <= limit and all(s["reachable"] for s in states))

    async def get_session(self, session_id: str) -> Session | None:
        """One thread by id, archived ones included; None when nobody knows it."""
        from agent_link_codex import rollouts

        if not ID_RE.match(session_id):
            return None
        links, _ = await self.links_or_error()
        if links:
            try:
                location = await self.service.locate(session_id, links)
            except AgentLinkError:
                location = None
            else:
                if location is None:
                    return None
                thread = dict(location.thread)
                self._seen[session_id] = thread
                if location.archived:
                    thread["archived"] = True
                return session_from_thread(thread, location.link, loaded=location.link is not None)
        home = codex_home(self.env)
        path = rollouts.find_rollout(home, session_id)
        summary = rollouts.summary(home, path) if path is not None else None
        return session_from_thread(summary, None, loaded=None) if summary else None

    # delivery --------------------------------------------------------------------------
    async def deliver(self, message: dict[str, Any], envelope: str, options: Mapping[str, Any]) -> Delivery:
        """Push a stored message into its thread as a turn (see :mod:`agent_link_codex.delivery`)."""
        from agent_link_codex.appserver import AppServerError, AppServerUnavailable
        from agent_link_codex.overrides import turn_params

        thread_id = str(message["recipient"]).split(":", 1)[1]
        try:
            text = await self.model_text(message, envelope)
            delivery = await self.deliverer.push(message["id"], thread_id, text, options)
        except (AppServerError, AppServerUnavailable) as exc:
            raise exc.to_agent_link_error() from None
        if self.endpoint_registration is not None:
            delivery.fields["endpointRegistration"] = self.endpoint_registration
        applied = turn_params(options)
        if applied and delivery.fields.get("turnId") is not None:
            # the turn/start carrying them was accepted: they persist for the thread
            self._applied.setdefault(thread_id, {}).update(applied)
        delivery.fields.update(send_facets(message, delivery))
        return delivery

    async def model_text(self, message: Mapping[str, Any], envelope: str) -> str:
        """What the thread's model reads: the agent-link envelope, or intercom's v2 text for
        a message sent with ``--envelope intercom-v2`` (:mod:`agent_link_codex.intercom`),
        built with the endpoints that have the sender's and the target's threads.

        :raises AgentLinkError: ``not_found`` when no reachable app-server has one of the two
            threads, ``invalid_arguments`` when the envelope would break a v2 rule.
        """
        from agent_link_codex.intercom import FORMAT, build_envelope_v2, serialize_envelope_v2

        if (message.get("metadata") or {}).get("envelopeFormat") != FORMAT:
            return envelope
        sender = await self._endpoint_of(str(message["from_addr"]).split(":", 1)[-1],
                                         self.values.get("AGENT_LINK_CODEX_SOURCE_ENDPOINT"))
        target = await self._endpoint_of(str(message["recipient"]).split(":", 1)[-1], None)
        return serialize_envelope_v2(build_envelope_v2(dict(message), sender_endpoint=sender, target_endpoint=target))

    async def _endpoint_of(self, thread_id: str, preferred: str | None) -> str:
        from agent_link_codex import lookup

        candidates, _ = self.service.candidates()
        holders = [s.endpoint.id for s in await lookup.probe_all(candidates, thread_id) if s.thread is not None]
        if not holders:
            raise AgentLinkError("not_found", f"No reachable Codex app-server has thread {thread_id}.",
                                 {"query": thread_id, "candidates": []}, hint="Check the thread, or send without --envelope intercom-v2.")
        return preferred if preferred is not None and preferred in holders else str(holders[0])

    # for plugins building on Codex threads -------------------------------------------------
    async def thread_request(self, thread_id: str, method: str, params: Mapping[str, Any], *,
                             timeout_ms: int | None = None) -> Any:
        """Send one app-server request about the thread ``thread_id`` and return its result.

        The public way for other plugins (fork jobs) to use Codex's thread API
        (``thread/read``, ``thread/turns/list``, ``thread/fork``, ``thread/compact/start``,
        ``turn/start``, ``thread/archive``, ...) without holding connections themselves. The
        request goes to the app-server that has the thread loaded, else to the first one that
        knows it; a private app-server is started when none is reachable and that is allowed.

        :param params: the method's parameters (passed as given; include ``threadId``).
        :param timeout_ms: the request's bound (default: the client's, 20 s).
        :raises AgentLinkError: ``not_found`` (no reachable app-server knows the thread),
            ``codex_unavailable`` (none answers), ``upstream_error`` (Codex refused it; details
            ``method``, ``rpcCode``, ``rpcMessage``).
        """
        from agent_link_codex.appserver import AppServerError, AppServerUnavailable
        from agent_link_codex.service import is_not_found

        links, error = await self.links_or_error()
        if not links:
            assert error is not None
            raise error
        missing = AgentLinkError("not_found", f"No Codex thread {thread_id} is known.", {"id": thread_id, "candidates": []})
        try:
            location = await self.service.locate(thread_id, links)
        except AppServerUnavailable as exc:
            raise exc.to_agent_link_error() from None
        if location is None:
            raise missing
        link = location.link or location.readers[0]
        try:
            return await link.call(method, dict(params), timeout_ms=timeout_ms)
        except AppServerError as exc:
            if is_not_found(exc):
                raise missing from None
            raise exc.to_agent_link_error() from None
        except AppServerUnavailable as exc:
            raise exc.to_agent_link_error() from None

    def switch_cost_basis(self, thread_id: str) -> tuple[int | None, str | None]:
        """What an override's expected cost is figured from: ``(the input tokens of the
        thread's last model request, the version of the Codex app-server that holds the
        thread)``, each None when unknown (no recorded token counts; no live connection or
        no version in its ``userAgent``). Reads the thread's rollout (see
        :meth:`thread_token_usage`)."""
        from agent_link_codex.health import VERSION_RE

        thread: Mapping[str, Any] = self._seen.get(thread_id, {})
        version: str | None = None
        if self._service is not None:
            for link in self._service.live_links():
                if thread_id in link.tracker.threads:
                    thread = link.tracker.threads[thread_id]
                found = VERSION_RE.search(str(link.info.get("userAgent") or ""))
                if found and (version is None or thread_id in link.tracker.threads):
                    version = found.group(1)
        counts = self.thread_token_usage({**thread, "id": thread_id})
        last = counts[-1]["last"]["inputTokens"] if counts else None
        return (last if last else None), version

    def thread_token_usage(self, thread: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The token counts Codex recorded for a thread, oldest first, from its rollout (the
        thread object's ``path``, else the one found in ``CODEX_HOME``):
        ``[{turnId, total, last, modelContextWindow}]`` as :func:`agent_link_codex.rollouts.token_counts`
        gives them; ``[]`` when the rollout cannot be read. Reads a file: call it off the loop
        for big threads (``asyncio.to_thread``)."""
        from agent_link_codex import rollouts

        path = thread.get("path")
        found = Path(path) if isinstance(path, str) and path else rollouts.find_rollout(codex_home(self.env), str(thread.get("id")))
        return rollouts.token_counts(found) if found is not None else []
    async def recheck(self, message: dict[str, Any]) -> Delivery | None:
        """Look for the echo of an earlier push of ``message`` that Codex accepted (or whose
        answer was lost): the trackers, the thread's items on a reachable app-server, then the
        rollout file. Never pushes and never starts an app-server."""
        from agent_link_codex.delivery import VIA

        claim = self.claims.get(message["id"])
        if claim is None or claim["state"] not in ("accepted", "unknown", "pushing"):
            return None
        links = self.service.live_links() or (await self.links_or_error(spawn=False))[0]
        found, _ = await self.deliverer.find_echo(claim["thread_id"], message["id"], links)
        if found is None:
            return None
        self.claims.settle(message["id"], "confirmed", turn_id=found.get("turnId"), item_id=found.get("itemId"))
        proof = {"clientId": message["id"], **found}
        return Delivery(delivered=True, via=VIA, state="accepted_by_app_server", evidence=proof)

    # background ------------------------------------------------------------------------
    async def serve(self, app: Any, peer: Any) -> None:
        """Background delivery while the MCP client is connected (the App's ``aclose`` then
        stops what this harness holds). Starts by reaping private app-servers whose
        agent-link owner died."""
        from agent_link_codex.appserver import AppServerError, AppServerUnavailable
        from agent_link_codex.managed import reap_orphans

        managed = self.service.managed
        if managed.directory.is_dir():
            managed.last_reap = await asyncio.to_thread(reap_orphans, managed.directory)
        while True:
            event = self.service.idle_event
            if event is None:
                await asyncio.sleep(BACKGROUND_INTERVAL_S)
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), BACKGROUND_INTERVAL_S)
                event.clear()
            try:
                await self.background_pass(app)
            except (AgentLinkError, AppServerError, AppServerUnavailable) as exc:
                log.info("codex background pass: %s", exc)
            except Exception:  # one bad pass must not end background delivery
                log.exception("agent-link: codex background pass failed")

    async def aclose(self) -> None:
        """Close the app-server connections and stop the private app-server (idempotent)."""
        if self._service is not None:
            await self._service.aclose()

    async def background_pass(self, app: Any, *, stale_after_ms: int | None = None) -> dict[str, int]:
        """One pass: per thread seen idle on an open connection, at most one turn (the
        oldest queued message aged 5 s to 1 h); then recheck up to 20 pushes left unsettled
        for ``stale_after_ms`` (default 180 s). Never connects or spawns. Reminder turns come
        from :meth:`remind`.

        :returns: counts ``{pushed, rechecked}``.
        """
        from agent_link_codex.delivery import STALE_CLAIM_MS, VIA

        counts = {"pushed": 0, "rechecked": 0}
        links = self.service.live_links()
        if not links:
            return counts
        now = now_ms()
        for link in links:
            for thread_id in sorted(link.tracker.seen_idle):
                if link.tracker.status.get(thread_id) != "idle":
                    continue
                address = f"codex:{thread_id}"
                rows = [r for r in app.mailbox.open_for(address, 20, undelivered_only=True)
                        if QUEUED_MIN_AGE_MS <= now - r["sent_at"] <= QUEUED_MAX_AGE_MS and self.claims.reclaimable(r["id"])]
                held = app.hooks.held_messages(address, rows) if rows else set()
                rows = [r for r in rows if r["id"] not in held]  # a running wait returns it: never both
                if rows:
                    row = rows[0]
                    # Overrides the policy granted at send time travel with the queued message.
                    granted = json.loads(row["metadata"] or "{}").get("codexSwitches") or []
                    options = {s["setting"]: s["current"] for s in granted if s.get("current") is not None}
                    text = await self.model_text(app.mailbox.row_dict(row), app.mailbox.envelope(row))
                    delivery = await self.deliverer.push(row["id"], thread_id, text, options,
                                                         background=True)
                    if delivery.delivered:
                        app.mailbox.mark_delivered(row["id"], VIA, delivery.evidence)
                        counts["pushed"] += 1
                    continue
        counts["rechecked"] = await self._recheck(app, links, STALE_CLAIM_MS if stale_after_ms is None else stale_after_ms)
        return counts

    async def remind_every(self, app: Any) -> None:
        """Every :data:`REMINDER_SWEEP_S` while the MCP server serves: :meth:`remind` (a failing pass is logged)."""
        while True:
            await asyncio.sleep(REMINDER_SWEEP_S)
            try:
                await self.remind(app)
            except Exception:  # a failing pass (e.g. the database busy) must not end the loop
                log.exception("agent-link: codex reminder sweep failed")

    async def remind(self, app: Any) -> int:
        """Offer each Codex thread with reminders due a reminder turn (:meth:`push_reminders`); one that raises is
        logged (what it claimed stays claimed). Returns how many threads got one."""
        reminded = 0
        for address in app.mailbox.reminder_recipients():
            if not address.startswith("codex:") or not app.mailbox.due_reminders(address):
                continue
            try:
                reminded += await self.push_reminders(app, address)
            except Exception:
                log.exception("agent-link: pushing reminders to %s failed", address)
        return reminded

    async def push_reminders(self, app: Any, address: str) -> bool:
        """Show the reminders due for ``address`` (``codex:<thread id>``) as a turn (``turnTrigger:
        agent-link-reminder``), only in a thread an open connection has seen idle and that is idle now; never connects
        or spawns. Off with ``AGENT_LINK_CODEX_REMINDERS=0`` (the prompt hook still reminds).

        :returns: True when a reminder turn was started.
        """
        from agent_link_core.hook import claim_reminders

        if not self.values.get("AGENT_LINK_CODEX_REMINDERS", True):
            return False
        thread_id = address.split(":", 1)[1]
        link = next((lk for lk in self.service.live_links()
                     if thread_id in lk.tracker.seen_idle and lk.tracker.status.get(thread_id) == "idle"), None)
        if link is None:
            return False
        location = await self.service.locate(thread_id, [link], fresh=True)
        if location is None or location.link is not link or location.status != "idle":
            return False
        claimed = claim_reminders(app.mailbox, address, REMINDER_VIA)
        if claimed is None:
            return False
        await link.call("turn/start", {"threadId": thread_id, "input": [{"type": "text", "text": claimed[1], "text_elements": []}],
                                       "turnTrigger": "agent-link-reminder"}, background=True)
        return True

    async def _recheck(self, app: Any, links: list[Link], older_than_ms: int) -> int:
        from agent_link_codex.delivery import VIA

        checked = 0
        for row in self.claims.stale(older_than_ms):
            message = app.mailbox.get_row(row["message_id"])
            if row["state"] == "accepted" and message is not None and message["first_delivered_at"] is None:
                # accepted by Codex: it will show up; look, and never resend
                found, _ = await self.deliverer.find_echo(row["thread_id"], row["message_id"], links)
                checked += 1
                if found is None:
                    self.claims.settle(row["message_id"], "accepted")  # looked at now
                else:
                    self.claims.settle(row["message_id"], "confirmed", turn_id=found.get("turnId"), item_id=found.get("itemId"))
                    app.mailbox.mark_delivered(row["message_id"], VIA, {"clientId": row["message_id"], **found})
                continue
            if message is None or message["first_delivered_at"] is not None or now_ms() - message["sent_at"] > QUEUED_MAX_AGE_MS:
                self.claims.settle(row["message_id"], "failed" if message is None or message["first_delivered_at"] is None else "confirmed")
                continue
            found, readable = await self.deliverer.find_echo(row["thread_id"], row["message_id"], links)
            checked += 1
            if found is not None:
                self.claims.settle(row["message_id"], "confirmed", turn_id=found.get("turnId"), item_id=found.get("itemId"))
                app.mailbox.mark_delivered(row["message_id"], VIA, {"clientId": row["message_id"], **found})
            elif readable:
                self.claims.settle(row["message_id"], "failed", error="no echo after recheck")
            else:
                self.claims.settle(row["message_id"], "unknown", unreadable=True)
        return checked

    # health ----------------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        """Endpoints (last probe), connections, the private app-server, the prompt hook's
        trust (from ``hooks/list`` on an open connection) and last run; never raises."""
        from agent_link_codex.health import health_view

        try:
            return health_view(self)
        except Exception as exc:  # health must always answer
            return {"error": f"{type(exc).__name__}: {exc}"[:300]}

    def activity_check(self, session_id: str) -> Any:
        """wait_for_agent without replyToMessageId on a thread: the rule of
        wait_for_codex_thread (``turn_completed`` once a turn seen running is over, ``idle``
        when none runs), checked every poll through the app-server or the transcript."""
        from agent_link_codex.activity import thread_activity

        return thread_activity(self, session_id)

    async def prepare_health(self, options: Mapping[str, Any]) -> None:
        """Before health: probe ``codex --version`` unless ``startAppServer`` is false, and
        with ``startAppServer: true`` connect (starting the private app-server if needed) so
        that the prompt hook's trust can be read from Codex."""
        start = options.get("startAppServer")
        self._health_options = dict(options)
        if start is False:
            self._version_probe = {"probed": False, "installed": None, "reason": "startAppServer_false"}
            return
        from agent_link_codex.health import probe_version

        self._version_probe = await asyncio.to_thread(probe_version, self.values, self.env)
        if start is True:
            try:
                await self.service.connect(spawn=True)
                await self.service.refresh_hooks()
                self._health_connect_error = None
            except Exception as exc:  # health reports, never fails
                self._health_connect_error = f"{type(exc).__name__}: {exc}"[:300]
