"""Connections to every reachable Codex app-server, and what they tell about threads.

:class:`CodexService` probes all candidate endpoints (:mod:`agent_link_codex.endpoints`)
concurrently with bounded timeouts, keeps one warm connection (:class:`Link`) per reachable
app-server, starts the private app-server when none is reachable and that is allowed, and
stops it again after ``AGENT_LINK_CODEX_IDLE_MS`` without requests. An unreachable endpoint
is reported (:meth:`CodexService.endpoint_reports`), never hides the others.

Each link's :class:`ThreadTracker` follows the app-server's notifications (docs/hosts/codex.md §6-7): thread status (broadcast to every connection), the active turn and
userMessage echoes (only for threads this connection subscribed to by starting or resuming
them). Notifications are hints: delivery re-reads state before acting on them.

asyncio only; one event loop at a time (a new loop drops the old loop's connections).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_link_core import __version__
from agent_link_core.errors import AgentLinkError

from agent_link_codex.appserver import (
    AppServerClient,
    AppServerError,
    AppServerUnavailable,
    Notification,
)
from agent_link_codex.endpoints import SOURCES, Endpoint, configured, explicit, read_token, socket_identity
from agent_link_codex.managed import ManagedError, ManagedServer
from agent_link_codex.settings import codex_home, managed_dir

log = logging.getLogger(__name__)
#: how many loaded threads missing from ``thread/list`` one listing reads (:meth:`CodexService.loaded_unlisted`)
UNLISTED_READ_MAX = 50

CLIENT_NAME = "codex-agent-link"
CLIENT_TITLE = "Codex Agent Link"
PROBE_OPEN_MS = 2_000
PROBE_INIT_MS = 5_000
REQUEST_MS = 20_000
#: A failed endpoint is probed again at most this often (seconds).
REPROBE_S = 5.0
ECHO_MEMORY = 512
#: A thread looked up this recently is not read again (the send path looks up its target
#: to validate it, then again to push; the push re-reads state when it acts).
LOCATION_TTL_S = 1.0
#: Every thread source kind of Codex 0.169.0 (``generate-json-schema``, ThreadSourceKind).
SOURCE_KINDS = ("cli", "vscode", "exec", "appServer", "subAgent", "subAgentReview", "subAgentCompact",
                "subAgentThreadSpawn", "subAgentOther", "unknown")
LIST_PAGE = 100
#: How long (ms) a turn on a thread this connection just started or resumed waits for Codex's
#: first start-up report of agent-link's MCP server. Codex sends those reports from the thread's
#: event listener, a task of its own, so they can arrive after the start/resume answer (seen on
#: 0.171.0 under load: 115 ms after it, when a turn started at once was already built without
#: the server's tools).
MCP_REPORT_MS = 3_000
#: the status :meth:`ThreadTracker.wait_mcp_started` gives servers an expected report never came for
UNREPORTED = "unreported"
LIST_MAX_PAGES = 100  # per endpoint: the membership-scan bound agent-session-intercom specifies


def is_not_found(exc: AppServerError) -> bool:
    """Codex's wording for an id it does not know (``thread/read``, ``turn/start``, archive)."""
    text = exc.message
    return any(p in text for p in ("thread not loaded", "thread not found", "no rollout found", "invalid thread id"))


class ThreadTracker:
    """Thread state one connection learned from notifications (no I/O).

    :ivar status: thread id → ``idle`` / ``active`` / ``notLoaded`` / ``systemError``.
    :ivar active_turn: thread id → the turn in progress (subscribed threads only).
    :ivar subscribed: threads this connection started or resumed (it gets their turn/item events).
    :ivar seen_idle: threads seen going idle here (the only ones background work touches).
    :ivar threads: thread id → the last thread object seen (without turns).
    :ivar mcp_status: thread id → {MCP server name → its last start-up status} from
        ``mcpServer/startupStatus/updated`` (``starting``, ``ready``, or a failure state).
    :ivar mcp_expected: threads this connection started, or resumed while not loaded: Codex
        starts their MCP servers and reports each one's start-up here (:meth:`expect_mcp_reports`).
    :ivar mcp_silent: MCP server names a wait on an expected thread got no report of within
        :data:`MCP_REPORT_MS` (likely not configured in this Codex); later waits do not wait for
        their first report again until one of them is reported.
    """

    def __init__(self, on_idle: Callable[[str], None] | None = None) -> None:
        self.status: dict[str, str] = {}
        self.active_turn: dict[str, str] = {}
        self.subscribed: set[str] = set()
        self.seen_idle: set[str] = set()
        self.threads: dict[str, dict[str, Any]] = {}
        self.mcp_status: dict[str, dict[str, str]] = {}
        self.mcp_expected: set[str] = set()
        self.mcp_silent: set[str] = set()
        self._echoes: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._waiters: dict[str, list[asyncio.Future[dict[str, Any]]]] = {}
        self._mcp_changed: asyncio.Event | None = None
        self._on_idle = on_idle

    def remember(self, thread: Mapping[str, Any], *, subscribed: bool = False) -> None:
        """Record a thread object from start/resume/read (``subscribed`` for start/resume)."""
        tid = thread.get("id")
        if not isinstance(tid, str):
            return
        self.threads[tid] = {k: v for k, v in thread.items() if k != "turns"}
        status = (thread.get("status") or {}).get("type")
        if isinstance(status, str):
            self._set_status(tid, status)
        if subscribed:
            self.subscribed.add(tid)

    def _set_status(self, tid: str, status: str) -> None:
        self.status[tid] = status
        if tid in self.threads:
            self.threads[tid]["status"] = {"type": status}
        if status == "idle":
            self.active_turn.pop(tid, None)
            self.seen_idle.add(tid)
            if self._on_idle is not None:
                self._on_idle(tid)
        elif status == "notLoaded":
            self.subscribed.discard(tid)
            self.active_turn.pop(tid, None)
            self.seen_idle.discard(tid)
            self.mcp_status.pop(tid, None)  # a later resume starts its MCP servers afresh
            self.mcp_expected.discard(tid)

    def handle(self, note: Notification) -> None:
        """Update state from one notification."""
        p = note.params
        tid = note.thread_id
        method = note.method
        if tid is None:
            return
        if method == "thread/status/changed":
            status = (p.get("status") or {}).get("type")
            if isinstance(status, str):
                self._set_status(tid, status)
        elif method == "turn/started":
            turn = p.get("turn") or {}
            if isinstance(turn.get("id"), str):
                self.active_turn[tid] = turn["id"]
            self.status[tid] = "active"
        elif method == "turn/completed":
            turn = p.get("turn") or {}
            if self.active_turn.get(tid) == turn.get("id"):
                self.active_turn.pop(tid, None)
        elif method in ("thread/closed", "thread/archived"):
            self._set_status(tid, "notLoaded")
            if method == "thread/archived" and tid in self.threads:
                self.threads[tid]["archivedHint"] = True
        elif method == "mcpServer/startupStatus/updated":
            name, status = p.get("name"), p.get("status")
            if isinstance(name, str) and isinstance(status, str):
                self.mcp_status.setdefault(tid, {})[name] = status
                self.mcp_silent.discard(name)
                if self._mcp_changed is not None:
                    self._mcp_changed.set()
        elif method == "thread/name/updated" and tid in self.threads:
            self.threads[tid]["name"] = p.get("threadName")
        elif method in ("item/started", "item/completed"):
            item = p.get("item") or {}
            cid = item.get("clientId")
            if item.get("type") == "userMessage" and isinstance(cid, str):
                self._echo(cid, {"threadId": tid, "turnId": p.get("turnId"), "itemId": item.get("id")})

    def expect_mcp_reports(self, thread_id: str) -> None:
        """Note that this connection just started ``thread_id``, or resumed it while it was not
        loaded: Codex starts the thread's MCP servers and reports each one's start-up here,
        ``starting`` first, possibly only after the start/resume answer."""
        self.mcp_expected.add(thread_id)

    async def wait_mcp_started(self, thread_id: str, names: frozenset[str], timeout_ms: int,
                               report_ms: int = MCP_REPORT_MS) -> dict[str, str]:
        """Wait up to ``timeout_ms`` until none of the MCP servers ``names`` is ``starting`` on
        ``thread_id`` any more.

        On a thread of :meth:`expect_mcp_reports` that has no report of any of ``names`` yet,
        the reports may still be on their way: wait for the first one too, at most ``report_ms``
        (within ``timeout_ms``), unless an earlier such wait on this connection got none
        (:attr:`mcp_silent`).

        :returns: ``{name: last status}`` of those servers seen on the thread; on an expected
            thread none of them was reported for, ``{name: "unreported"}`` for each of ``names``;
            empty when no report was expected (e.g. the thread was loaded before this
            connection resumed it, so its servers already run).
        """
        start = time.monotonic()
        deadline = start + timeout_ms / 1000
        report_by = start + min(report_ms, timeout_ms) / 1000
        expected = thread_id in self.mcp_expected
        wait_report = expected and not names <= self.mcp_silent
        if self._mcp_changed is None:
            self._mcp_changed = asyncio.Event()
        while True:
            self._mcp_changed.clear()  # before reading, so no update between read and wait is missed
            seen = {n: st for n, st in self.mcp_status.get(thread_id, {}).items() if n in names}
            now = time.monotonic()
            if not seen and expected:
                if not wait_report or now >= report_by:
                    self.mcp_silent |= names
                    return dict.fromkeys(sorted(names), UNREPORTED)
                until = report_by
            elif "starting" in seen.values() and now < deadline:
                until = deadline
            else:
                return seen
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._mcp_changed.wait(), until - now)

    def _echo(self, client_id: str, evidence: dict[str, Any]) -> None:
        self._echoes[client_id] = evidence
        self._echoes.move_to_end(client_id)
        while len(self._echoes) > ECHO_MEMORY:
            self._echoes.popitem(last=False)
        for fut in self._waiters.pop(client_id, []):
            if not fut.done():
                fut.set_result(evidence)

    def echo(self, client_id: str) -> dict[str, Any] | None:
        """The echo seen for ``client_id`` (``{threadId, turnId, itemId}``), or None."""
        return self._echoes.get(client_id)

    async def wait_echo(self, client_id: str, timeout_ms: int) -> dict[str, Any] | None:
        """Wait up to ``timeout_ms`` for a userMessage echoing ``client_id``; None on timeout."""
        seen = self._echoes.get(client_id)
        if seen is not None:
            return seen
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(client_id, []).append(fut)
        try:
            return await asyncio.wait_for(fut, timeout_ms / 1000) or None
        except TimeoutError:
            return None
        finally:
            waiters = self._waiters.get(client_id)
            if waiters is not None and fut in waiters:
                waiters.remove(fut)
                if not waiters:
                    self._waiters.pop(client_id, None)

    def fail_waiters(self) -> None:
        """Wake every echo waiter with no result (the connection ended)."""
        for futs in self._waiters.values():
            for fut in futs:
                if not fut.done():
                    fut.set_result({})
        self._waiters.clear()


@dataclass(eq=False)
class Link:
    """One live connection to an app-server.

    :ivar info: the ``initialize`` result (``codexHome``, ``userAgent``, ...).
    :ivar last_activity: monotonic seconds of the last foreground request.
    :ivar hooks: the last ``hooks/list`` answer (for health), or None.
    """

    endpoint: Endpoint
    client: AppServerClient
    info: dict[str, Any]
    tracker: ThreadTracker
    managed: bool = False
    last_activity: float = field(default_factory=time.monotonic)
    hooks: dict[str, Any] | None = None
    pid: int | None = None

    @property
    def alive(self) -> bool:
        """Whether the connection is still open."""
        return not self.client.closed

    @property
    def codex_home(self) -> str | None:
        """The server's ``CODEX_HOME`` as it reported at ``initialize``."""
        home = self.info.get("codexHome")
        return home if isinstance(home, str) else None

    async def call(self, method: str, params: Mapping[str, Any] | None = None, *, timeout_ms: int | None = None,
                   background: bool = False) -> Any:
        """One request, bounded by ``timeout_ms`` (default: the client's, :data:`REQUEST_MS`).

        Foreground requests count as activity; background ones never keep the private
        app-server from its idle stop.

        :raises AppServerError: the server refused it. :raises AppServerUnavailable: transport.
        """
        if not background:
            self.last_activity = time.monotonic()
        try:
            return await self.client.request(method, params, timeout_ms=timeout_ms)
        finally:
            if not background:
                self.last_activity = time.monotonic()

    def view(self) -> dict[str, Any]:
        """Health view of the connection."""
        return {**self.endpoint.view(), "connected": self.alive, "managed": self.managed,
                "codexHome": self.codex_home, "userAgent": self.info.get("userAgent"), "pid": self.pid}


@dataclass
class Location:
    """Where a thread is, as seen from every live connection.

    :ivar thread: the thread object (from the link that has it loaded, else any).
    :ivar link: the link that has it loaded (None when loaded nowhere reachable).
    :ivar status: ``idle`` / ``active`` / ``notLoaded`` / ``systemError``.
    :ivar archived: its rollout lies in ``archived_sessions``.
    :ivar readers: links that know the thread at all (to resume it on).
    """

    thread_id: str
    thread: dict[str, Any]
    link: Link | None
    status: str
    archived: bool
    readers: list[Link]


class CodexService:
    """Connections, the private app-server and thread lookups for one agent-link process.

    :param values: parsed settings (see :mod:`agent_link_codex.settings`).
    :param env: the process environment (``CODEX_HOME``, ``PATH``, ...).
    :param state_dir: agent-link's state directory.
    :param registered: returns the registered endpoints (read on every cold connect).
    """

    def __init__(self, values: Mapping[str, Any], env: Mapping[str, str], state_dir: Path,
                 registered: Callable[[], list[Endpoint]]) -> None:
        self.values = dict(values)
        self.env = dict(env)
        self.registered = registered
        # ``--socket PATH``: this one endpoint and no other (never a private app-server).
        self.only: Endpoint | None = None
        self.links: dict[str, Link] = {}
        self.reports: dict[str, dict[str, Any]] = {}
        self._probed_at: dict[str, float] = {}
        self.managed = ManagedServer(managed_dir(values, state_dir), values, env)
        self.managed_error: dict[str, Any] | None = None
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Future[Any]] = set()
        self._probing: set[str] = set()
        self.idle_event: asyncio.Event | None = None
        self._located: dict[str, tuple[float, Location]] = {}
        self._loop_guard: asyncio.Task[None] | None = None  # held here: the loop keeps tasks only weakly

    @property
    def codex_home(self) -> Path:
        """This process's ``CODEX_HOME`` (for the transcript fallback)."""
        return codex_home(self.env)

    # connecting -----------------------------------------------------------------------------
    def _check_loop(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # Connections belong to the loop that made them; a new loop (a second CLI
            # command in one process) starts afresh. The private server keeps running.
            self._loop = loop
            self.links.clear()
            self._lock = asyncio.Lock()
            self.idle_event = asyncio.Event()
            self._idle_task = None
            self._tasks = set()
            self._probing = set()
            self._loop_guard = loop.create_task(self._cut_links_at_loop_end())
        assert self._lock is not None
        return self._lock

    async def _cut_links_at_loop_end(self) -> None:
        # Waits until its event loop shuts down (asyncio.run cancels every task at its end):
        # the connections made in that loop are cut then, as no later loop can close them
        # and they would keep the app-server's threads subscribed until the process exits.
        try:
            await asyncio.get_running_loop().create_future()
        finally:
            for link in list(self.links.values()):
                link.client.abort()

    def live_links(self) -> list[Link]:
        """The connections that are open now, in preference order (no I/O, never spawns)."""
        if self._loop is not None:
            try:
                if asyncio.get_running_loop() is not self._loop:
                    return []
            except RuntimeError:
                return []
        order = {s: i for i, s in enumerate(SOURCES)}
        live = [ln for ln in self.links.values() if ln.alive]
        return sorted(live, key=lambda ln: order.get(ln.endpoint.source, 9))

    def candidates(self) -> tuple[list[Endpoint], list[dict[str, Any]]]:
        """Every endpoint to try now (settings, control socket, registry, running private one),
        or only :attr:`only` when a command was restricted to one socket."""
        if self.only is not None:
            return [self.only], []
        found, problems = configured(self.values, self.env)
        try:
            sockets = {socket_identity(e) for e in found} - {None}
            for ep in self.registered():
                identity = socket_identity(ep)
                # one app-server once, whichever path (a symlink) it was registered by
                if all(e.id != ep.id for e in found) and (identity is None or identity not in sockets):
                    found.append(ep)
                    sockets.add(identity)
        except Exception as exc:  # a broken registry must not hide the other endpoints
            problems.append({"source": "registered", "reason": "registry-unreadable", "detail": type(exc).__name__})
        if self.managed.running and self.managed.endpoint is not None:
            found.append(self.managed.endpoint)
        return found, problems

    async def connect(self, *, spawn: bool) -> list[Link]:
        """Live links after probing every candidate that is not connected yet.

        :param spawn: start the private app-server when nothing is reachable (autostart on,
            no explicit endpoint). Background work passes False.
        :raises AgentLinkError: ``codex_unavailable`` (details: ``endpoint``, ``reason``,
            ``searched``, ``endpoints``) when ``spawn`` is set and no app-server can be had.
        """
        lock = self._check_loop()
        async with lock:
            candidates, problems = self.candidates()
            for problem in problems:
                self.reports[problem["source"]] = {**problem, "ok": False}
            now = time.monotonic()
            todo = [ep for ep in candidates if not (ep.id in self.links and self.links[ep.id].alive) and ep.id not in self._probing
                    and (self.reports.get(ep.id, {}).get("ok") or now - self._probed_at.get(ep.id, -1e9) >= REPROBE_S)]
            if todo and self.live_links():
                # A warm call does not wait for endpoints that were down: probe them aside.
                self._spawn(asyncio.gather(*(self._probe(ep) for ep in todo)))
            elif todo:
                await asyncio.gather(*(self._probe(ep) for ep in todo))
            live = self.live_links()
            if live or not spawn:
                return live
            if explicit(self.values) or self.only is not None:
                raise self._unavailable("explicit-endpoint-unreachable")
            if not self.values.get("AGENT_LINK_CODEX_AUTOSTART", True):
                raise self._unavailable("autostart-disabled")
            try:
                endpoint = await self.managed.start()
            except ManagedError as exc:
                self.managed_error = {"reason": exc.reason, "detail": exc.detail[:500], "searched": exc.searched}
                raise self._unavailable(exc.reason, exc.detail, exc.searched) from None
            self.managed_error = None
            link = await self._probe(endpoint, managed=True)
            if link is None:
                self.managed.stop()
                raise self._unavailable("open-failed", str(self.reports.get(endpoint.id, {}).get("detail", "")))
            self._start_idle_watch(link)
            return self.live_links()

    def _unavailable(self, reason: str, detail: str = "", searched: list[str] | None = None) -> AgentLinkError:
        reports = self.endpoint_reports()
        first = next((r for r in reports if r.get("source") in ("env-url", "env-sock")), reports[0] if reports else {})
        return AgentLinkError(
            "codex_unavailable",
            f"No Codex app-server could be reached ({reason}).",
            {"endpoint": first.get("target"), "reason": reason, "searched": searched or [r.get("target") for r in reports],
             "endpoints": reports, **({"detail": detail[:500]} if detail else {})},
            hint=_UNAVAILABLE_HINTS.get(reason, "Start Codex (codex app-server --listen unix://PATH) and set AGENT_LINK_CODEX_SOCK, or allow AGENT_LINK_CODEX_AUTOSTART."),
        )

    async def _probe(self, endpoint: Endpoint, managed: bool = False) -> Link | None:
        self._probing.add(endpoint.id)
        try:
            return await self._open(endpoint, managed)
        finally:
            self._probing.discard(endpoint.id)

    async def _open(self, endpoint: Endpoint, managed: bool) -> Link | None:
        self._probed_at[endpoint.id] = time.monotonic()
        report: dict[str, Any] = {**endpoint.view(), "ok": False}
        if endpoint.kind == "unix" and not os.path.exists(os.path.realpath(endpoint.target)):
            self.reports[endpoint.id] = {**report, "reason": "absent", "detail": "no socket at this path"}
            return None
        client: AppServerClient | None = None
        tracker = ThreadTracker(self._thread_went_idle)
        try:
            options = {"refuse_server_requests": managed, "default_timeout_ms": REQUEST_MS}
            if endpoint.kind == "unix":
                client = await AppServerClient.connect_unix(endpoint.target, open_timeout_ms=PROBE_OPEN_MS, **options)
            else:
                client = await AppServerClient.connect_ws(endpoint.target, read_token(endpoint), open_timeout_ms=PROBE_OPEN_MS, **options)
            client.subscribe(tracker.handle)
            info = await client.initialize(CLIENT_NAME, __version__, title=CLIENT_TITLE, timeout_ms=PROBE_INIT_MS)
        except (AppServerUnavailable, AppServerError, OSError) as exc:
            if client is not None:
                await client.close()
            reason = getattr(exc, "reason", None) or ("rejected" if isinstance(exc, AppServerError) else "open-failed")
            self.reports[endpoint.id] = {**report, "reason": reason, "detail": str(exc)[:300]}
            return None
        link = Link(endpoint, client, info or {}, tracker, managed=managed,
                    pid=client.peer_pid or (self.managed.record.pid if managed and self.managed.record else None))
        self.links[endpoint.id] = link
        self.reports[endpoint.id] = {**report, "ok": True, "reason": None, "codexHome": link.codex_home}
        self._spawn(self._hooks_of(link))
        self._spawn(self._on_close(link))
        return link

    async def _on_close(self, link: Link) -> None:
        # A push waiting for its echo goes straight to checking the thread when the
        # connection drops, instead of waiting out its timeout.
        await link.client.wait_closed()
        link.tracker.fail_waiters()
        if self.reports.get(link.endpoint.id, {}).get("ok"):
            self.reports[link.endpoint.id] = {**self.reports[link.endpoint.id], "connected": False}

    def _thread_went_idle(self, thread_id: str) -> None:
        if self.idle_event is not None:
            self.idle_event.set()

    def spawn(self, work: Any) -> None:
        """Run a coroutine beside the current work; :meth:`aclose` cancels what is left."""
        self._spawn(work)

    def _spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _hooks_of(link: Link) -> None:
        with contextlib.suppress(AppServerError, AppServerUnavailable):
            link.hooks = await link.call("hooks/list", {"cwds": [os.getcwd()]}, timeout_ms=5_000, background=True)

    async def refresh_hooks(self) -> None:
        """Re-read ``hooks/list`` on every live link now (health shows the result)."""
        for link in self.live_links():
            await self._hooks_of(link)

    def endpoint_reports(self) -> list[dict[str, Any]]:
        """The last probe result per endpoint (reachable or not, with the reason)."""
        return list(self.reports.values())

    # private server idle stop -----------------------------------------------------------------
    def _start_idle_watch(self, link: Link) -> None:
        idle_ms = int(self.values.get("AGENT_LINK_CODEX_IDLE_MS") or 0)
        if idle_ms <= 0:
            return
        self._idle_task = asyncio.get_running_loop().create_task(self._idle_watch(link, idle_ms / 1000))

    async def _idle_watch(self, link: Link, idle_s: float) -> None:
        step = min(max(idle_s / 4, 0.05), 5.0)
        while link.alive:
            await asyncio.sleep(step)
            if time.monotonic() - link.last_activity >= idle_s and link.client.pending_count == 0:
                log.info("stopping the private Codex app-server after %.0f s idle", idle_s)
                self.links.pop(link.endpoint.id, None)
                await link.client.close()
                await asyncio.to_thread(self.managed.stop)
                return

    # shutdown -----------------------------------------------------------------------------------
    async def aclose(self) -> None:
        """Close every connection and stop the private app-server.

        Connections made under another event loop (a CLI command runs each step in its own
        ``asyncio.run``) are only dropped: that loop is gone, and so are they.
        """
        if self._loop is asyncio.get_running_loop():
            if self._idle_task is not None:
                self._idle_task.cancel()
            for task in list(self._tasks):
                task.cancel()
            for link in list(self.links.values()):
                link.tracker.fail_waiters()
                with contextlib.suppress(Exception):
                    await link.client.close(timeout_ms=500)
        self.links.clear()
        self._tasks = set()
        self._idle_task = None
        self.managed.stop()

    def stop_managed(self) -> None:
        """Stop the private app-server now (synchronous; safe at interpreter exit)."""
        self.managed.stop()

    # thread lookups -------------------------------------------------------------------------------
    async def locate(self, thread_id: str, links: list[Link], *, fresh: bool = False) -> Location | None:
        """Find a thread across ``links``: where it is loaded, its status, whether archived.

        Unless ``fresh``, a thread this process is subscribed to is answered from the
        tracker, and one looked up in the last :data:`LOCATION_TTL_S` seconds from that
        lookup (no request).

        :returns: None when no app-server knows the id.
        :raises AgentLinkError: ``codex_unavailable`` when every app-server failed to answer.
        """
        known = None if fresh else self._known(thread_id, links)
        if known is not None:
            return known

        async def read(link: Link) -> tuple[Link, dict[str, Any] | None, Exception | None]:
            try:
                result = await link.call("thread/read", {"threadId": thread_id, "includeTurns": False})
                return link, result.get("thread") if isinstance(result, dict) else None, None
            except AppServerError as exc:
                return link, None, None if is_not_found(exc) else exc
            except AppServerUnavailable as exc:
                return link, None, exc

        answers = await asyncio.gather(*(read(link) for link in links))
        found = [(ln, t) for ln, t, _ in answers if t]
        failures = [e for _, _, e in answers if e is not None]
        if not found:
            if failures and len(failures) == len(answers):
                first = failures[0]
                raise (first.to_agent_link_error() if hasattr(first, "to_agent_link_error") else AgentLinkError(
                    "codex_unavailable", str(first), {"endpoint": None, "reason": "request-failed"}))
            return None
        loaded = [(ln, t) for ln, t in found if (t.get("status") or {}).get("type") not in (None, "notLoaded")]
        for ln, t in found:
            ln.tracker.remember(t)
        holder: Link | None
        holder, thread = loaded[0] if loaded else (None, found[0][1])
        status = (thread.get("status") or {}).get("type") or "notLoaded"
        path = thread.get("path") or ""
        archived = "/archived_sessions/" in path.replace(os.sep, "/")
        location = Location(thread_id, thread, holder, status, archived, [ln for ln, _ in found])
        if len(self._located) > 1000:
            self._located.clear()
        self._located[thread_id] = (time.monotonic(), location)
        return location

    def _known(self, thread_id: str, links: list[Link]) -> Location | None:
        """Where ``thread_id`` is, without a request: a thread this process is subscribed to (from its tracker), else one
        located in the last :data:`LOCATION_TTL_S` seconds through ``links`` still alive; else None."""
        for link in links:
            tracker = link.tracker
            if thread_id in tracker.subscribed and thread_id in tracker.threads and tracker.status.get(thread_id) in ("idle", "active"):
                return Location(thread_id, tracker.threads[thread_id], link, tracker.status[thread_id], False, [link])
        recent = self._located.get(thread_id)
        if recent is not None and time.monotonic() - recent[0] < LOCATION_TTL_S \
                and all(ln.alive for ln in recent[1].readers) and set(recent[1].readers) <= set(links):
            return recent[1]
        return None

    async def list_threads(
        self, links: list[Link], *, archived: bool = False, search: str | None = None, cwd: str | list[str] | None = None,
        source_kinds: tuple[str, ...] = (), limit: int = 200, to_end: bool = False,
    ) -> tuple[list[tuple[Link, dict[str, Any]]], dict[str, Any]]:
        """``thread/list`` paged with explicit source kinds and all model providers, from one
        link per distinct ``codexHome``, merged newest first.

        :param to_end: page until ``nextCursor`` is null (ceiling :data:`LIST_MAX_PAGES`
            pages) instead of stopping at ``limit`` threads.
        :returns: ``([(link, thread)], paging)`` with ``paging = {complete, pages,
            nextCursor, errors: [{endpoint, reason, rpcCode?, rpcMessage?}]}`` (``reason``
            ``rejected``, ``cursor-cycle`` or a transport reason); a scan stopped by the
            ceiling, a cursor cycle or an error is ``complete: false``.
        """
        by_home: dict[str, Link] = {}
        for link in links:
            by_home.setdefault(link.codex_home or link.endpoint.id, link)
        params: dict[str, Any] = {"limit": LIST_PAGE, "sourceKinds": list(source_kinds or SOURCE_KINDS),
                                  "modelProviders": [], "archived": archived}
        if search:
            params["searchTerm"] = search
        if cwd:
            params["cwd"] = cwd
        paging: dict[str, Any] = {"complete": True, "pages": 0, "nextCursor": None, "errors": []}

        async def scan(link: Link) -> list[tuple[Link, dict[str, Any]]]:
            out: list[tuple[Link, dict[str, Any]]] = []
            cursor: str | None = None
            seen: set[str] = set()
            for _ in range(LIST_MAX_PAGES):
                try:
                    page = await link.call("thread/list", {**params, "cursor": cursor})
                except AppServerError as exc:
                    paging["complete"] = False
                    paging["errors"].append({"endpoint": link.endpoint.id, "reason": "rejected", "rpcCode": exc.code,
                                             "rpcMessage": exc.message[:300]})
                    return out
                except AppServerUnavailable as exc:  # its text names the socket path: keep only the reason
                    paging["complete"] = False
                    paging["errors"].append({"endpoint": link.endpoint.id, "reason": exc.reason})
                    return out
                paging["pages"] += 1
                out.extend((link, t) for t in page.get("data") or [] if isinstance(t, dict))
                cursor = page.get("nextCursor")
                if not cursor:
                    return out
                if cursor in seen:
                    paging["complete"] = False
                    paging["errors"].append({"endpoint": link.endpoint.id, "reason": "cursor-cycle"})
                    return out
                seen.add(cursor)
                if not to_end and len(out) >= limit:
                    paging["nextCursor"] = cursor
                    return out
            paging["complete"] = False
            paging["nextCursor"] = cursor
            return out

        results = await asyncio.gather(*(scan(link) for link in by_home.values()))
        merged: dict[str, tuple[Link, dict[str, Any]]] = {}
        for link, thread in (pair for batch in results for pair in batch):
            tid = thread.get("id")
            if isinstance(tid, str) and tid not in merged:
                merged[tid] = (link, thread)
        ordered = sorted(merged.values(), key=lambda p: -(p[1].get("recencyAt") or p[1].get("updatedAt") or 0))
        return ordered, paging

    async def loaded_unlisted(self, links: list[Link], listed: set[str], loaded: dict[str, Link] | None = None,
                              limit: int = UNLISTED_READ_MAX) -> list[tuple[Link, dict[str, Any]]]:
        """Threads the app-servers have loaded that ``thread/list`` left out (``listed``): a
        thread started with no turn yet is not listed (Codex 0.171.0) though it is there, can
        be named and messaged. Each is read (``thread/read``), at most ``limit``; one that
        cannot be read is left out.

        :param loaded: :meth:`loaded_ids` when the caller has it already.
        """
        loaded = await self.loaded_ids(links) if loaded is None else loaded
        missing = [(tid, link) for tid, link in loaded.items() if tid not in listed][:limit]

        async def read(tid: str, link: Link) -> tuple[Link, dict[str, Any]] | None:
            try:
                thread = (await link.call("thread/read", {"threadId": tid, "includeTurns": False})).get("thread")
            except (AppServerError, AppServerUnavailable):
                return None
            return (link, thread) if isinstance(thread, dict) and thread.get("id") == tid else None

        found = await asyncio.gather(*(read(tid, link) for tid, link in missing))
        return [pair for pair in found if pair is not None]

    async def loaded_ids(self, links: list[Link]) -> dict[str, Link]:
        """Thread id → the link that has it loaded (``thread/loaded/list`` on every link)."""
        out: dict[str, Link] = {}

        async def scan(link: Link) -> None:
            cursor = None
            for _ in range(LIST_MAX_PAGES):
                try:
                    page = await link.call("thread/loaded/list", {"cursor": cursor} if cursor else {})
                except (AppServerError, AppServerUnavailable):
                    return
                for tid in page.get("data") or []:
                    out.setdefault(tid, link)
                cursor = page.get("nextCursor")
                if not cursor:
                    return

        await asyncio.gather(*(scan(link) for link in links))
        return out


_UNAVAILABLE_HINTS = {
    "autostart-disabled": "Start Codex's app-server yourself and set AGENT_LINK_CODEX_SOCK, or unset AGENT_LINK_CODEX_AUTOSTART=0.",
    "codex-binary-not-found": "Install the Codex CLI or point AGENT_LINK_CODEX_BIN at it.",
    "explicit-endpoint-unreachable": "Check that the app-server named by AGENT_LINK_CODEX_URL / AGENT_LINK_CODEX_SOCK is running.",
    "startup-failure-cached": "Starting Codex failed less than a minute ago; fix the cause shown in health, then try again.",
    "state-dir-unsafe": "Make the managed app-server directory (AGENT_LINK_MANAGED_DIR, default <state dir>/managed-app-servers) a private (0700) directory you own, or point AGENT_LINK_MANAGED_DIR at one.",
}
