"""The ``claude`` harness: Claude Code and Claude Desktop sessions as agents (``claude:<id>``).

* Identity: a Claude Code process gives its MCP servers and hooks ``CLAUDE_CODE_SESSION_ID``
  (``CLAUDE_SESSION_ID`` is read too, though 2.1.197 never sets it). After ``/clear`` the
  session id changes but the MCP server keeps its old environment, so the harness looks for the
  live-session file of the claude process among its ancestors (``<config dir>/sessions/<pid>.json``,
  written by that very process -- start time checked) and takes the id from there. Claude
  Code's tool-call ``_meta`` carries only ``claudecode/toolUseId`` (verified on 2.1.197), which
  becomes the caller's tool call id; nothing else is guessed.
* Discovery: :mod:`agent_link_claude.sessions`.
* Delivery: a live session that has an inbox socket (Claude Code 2.1.224+) is pushed from the
  sender's process through that socket (:mod:`agent_link_claude.native`) and counts as
  delivered only when its transcript shows the message. Otherwise the recipient's own
  agent-link server pushes through its channel (:mod:`agent_link_claude.channel`), the hooks
  nudge it, and it can always pull with ``read_agent_link_inbox``; :meth:`deliver` then only
  says which of those will reach the target (the ``delivery`` states below).

Delivery states (``Delivery.state``; ``message_claude_session``'s ``delivery``):

* ``delivered-inbox`` -- written to the session's inbox socket and seen in its transcript;
* ``held`` / ``refused`` / ``dropped`` / ``denied`` / ``expired`` -- the session's host said so
  in a receipt (``held``: someone must approve it in that session); the message stays queued;
* ``pushed-inbox`` -- written to the inbox socket, but no evidence within
  ``AGENT_LINK_CLAUDE_INBOX_WAIT_MS``; reported as ``unknown`` and never written again blindly;
* ``queued-channel`` -- the target's agent-link server has an open channel, so the message
  arrives as a new turn within about two seconds;
* ``queued-online`` -- the target runs (a live Claude process) without an open channel: it
  sees a note at its next prompt (hook) and reads the message with the inbox tool;
* ``queued-offline`` -- the target is not running: the note appears when it is resumed;
* ``queued`` -- the sender asked for mailbox-only delivery: never pushed, only announced by
  the hooks and read from the inbox (the name every harness gives a message that only waits
  in the mailbox).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from agent_link_core.harness import Delivery, Harness, OutputBudget, SessionListing
from agent_link_core.json_files import read_json_object
from agent_link_core.mailbox import iso
from agent_link_hostkit.hook_runs import last_runs
from agent_link_hostkit.procs import lineage
from agent_link_core.model import Caller, Session

from agent_link_claude.channel import (
    CAPABILITY,
    CHANNEL_BUDGET_BYTES,
    PLUGIN_NAME,
    BridgeStatus,
    ChannelBridge,
    GateState,
    GlobalConfigReader,
    PeerGone,
    active_bridges,
    connection_gate,
    evaluate_gate,
)
from agent_link_claude.procs import command_line, parent_pid, proc_start, same_process
from agent_link_claude.sessions import (
    ID_RE,
    SessionIndex,
    config_dir,
    desktop_roots,
    global_config_path,
    host_session,
)

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App
    from agent_link_core.mailbox import Mailbox

    from agent_link_claude import native  # annotations only: native loads in the methods that push
    from agent_link_claude.connection import McpPeer

T = TypeVar("T")
NAME = "claude"
ANCESTOR_DEPTH = 6  # claude -> MCP server is 1; claude -> shell -> ... -> agent-link CLI is deeper
ANCESTOR_RETRY_S = 2.0
DELIVERY_STATES = ("delivered-inbox", "held", "refused", "dropped", "denied", "expired", "pushed-inbox",
                   "queued-channel", "queued-online", "queued-offline", "queued")
INBOX_VIA = "claude-inbox"
#: what the sender is told for each receipt the host can send back
PROBLEM_TEXT = {
    "held": "held: approve it in that session (its permission settings hold peer messages for review)",
    "refused": "refused: that session does not take messages from other sessions (crossSessionInbound)",
    "dropped": "dropped by that session's host",
    "denied": "denied in that session",
    "expired": "expired in that session before anyone approved it",
}


def _env_session_id(env: Mapping[str, str]) -> str | None:
    for name in ("CLAUDE_CODE_SESSION_ID", "CLAUDE_SESSION_ID"):
        value = (env.get(name) or "").strip()
        if value and ID_RE.match(value):
            return value
    return None


IDLE_CHECK_S = 2.0  # how often a wait looks whether a running session has stopped


async def _to_thread(fn: Callable[[], T]) -> T:
    """``anyio.to_thread.run_sync`` (anyio loads when a harness method first does I/O)."""
    import anyio.to_thread

    return await anyio.to_thread.run_sync(fn)


class ClaudeHarness(Harness):
    """The harness registered as ``claude``.

    The core calls :meth:`attach` before anything else; from then on discovery reads
    ``CLAUDE_CONFIG_DIR`` / ``HOME`` from the App's environment and the channel registry lives
    in the App's state dir. Identity uses the environment the core passes per call.

    :param env: where discovery reads before :meth:`attach` (default ``os.environ``); only a
        harness used outside an App (tests of identity and discovery) relies on it. Such a
        harness sees no running channel bridges.
    """

    # Measured on Claude Code 2.1.197: the model gets JSON.stringify(structuredContent) of an MCP
    # result; above about 50,000 characters it gets a 2 KB preview and a file path instead
    # ("Output too large … Preview (first 2KB)"), and near 100,000 an error. 50,000 passed whole.
    # Channel events: see channel.CHANNEL_BUDGET_BYTES (measured separately).
    output_budget = OutputBudget(tool_result_bytes=45_000, json_indent=None, push_bytes=CHANNEL_BUDGET_BYTES)

    name = NAME
    session_kind = "claude_session"
    #: the surfaces of :data:`agent_link_claude.sessions.SIDECAR_DIRS`
    source_kinds = ("desktop", "code")
    # Claude Code sets CLAUDE_PROJECT_DIR in every process it starts (hooks, MCP servers)
    host_variables = ("CLAUDE_PROJECT_DIR", "CLAUDE_PLUGIN_ROOT", "CLAUDE_SESSION_ID", "CLAUDE_CODE_SESSION_ID")
    host_priority = 10
    # the config dir (sessions, transcripts), the Desktop root on Linux, the inbox socket dir
    env_variables = ("CLAUDE_CONFIG_DIR", "XDG_CONFIG_HOME", "XDG_RUNTIME_DIR")
    archived_sessions_take_mail = True  # a Claude session can be resumed from its archive

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self.app: App | None = None
        self.env: Mapping[str, str] = os.environ if env is None else env
        self.index = SessionIndex(self.env)
        self.bridge = BridgeStatus()
        self.channel_declared = False
        self.peer: McpPeer | None = None  # the MCP connection while serving
        self._lock = threading.Lock()
        # (config dir, pid) of the claude process among our ancestors, and when we last looked
        self._ancestor: tuple[str, int | None, float] | None = None

    def attach(self, app: App) -> None:
        """Take the App's environment and settings (called once, before any other method)."""
        self.app = app
        self.env = app.env
        self.index = SessionIndex(self.env)

    # -- identity ------------------------------------------------------------------------

    def _claude_ancestor(self, cfg: str) -> int | None:
        """The pid of the nearest ancestor that is a Claude Code process with its own
        live-session record in ``cfg`` (:func:`~agent_link_claude.sessions.host_session`;
        cached, a miss for :data:`ANCESTOR_RETRY_S`)."""
        cached = self._ancestor
        if cached is not None and cached[0] == cfg and (cached[1] is not None or time.monotonic() - cached[2] < ANCESTOR_RETRY_S):
            return cached[1]
        found = None
        for pid in lineage(os.getppid(), ANCESTOR_DEPTH):
            if os.path.exists(os.path.join(cfg, "sessions", f"{pid}.json")) and host_session(cfg, pid) is not None:
                found = pid
                break
        self._ancestor = (cfg, found, time.monotonic())
        return found

    def current_session_id(self, env: Mapping[str, str]) -> tuple[str, str, str | None] | None:
        """``(session id, source, evidence)`` of the Claude session this process serves, or None
        outside Claude Code (no session variable).

        Source ``current_session`` with evidence when an ancestor is a Claude Code process whose
        own live-session record names the session (it follows ``/clear``); source ``env`` and no
        evidence when only the variable names it (anyone can set it).
        """
        from_env = _env_session_id(env)
        if from_env is None:
            return None
        cfg = config_dir(env)
        pid = self._claude_ancestor(cfg)
        if pid is not None:
            live = host_session(cfg, pid)
            if live is not None:
                return live.session_id, "current_session", f"pid {pid}, an ancestor of this process, is the Claude Code process of that session"
            self._ancestor = None  # the claude process is gone or rewrote its file
        return from_env, "env", None

    def identify_caller(self, meta: Mapping[str, Any], env: Mapping[str, str]) -> Caller | None:
        """The calling Claude session (see the module docstring); None outside Claude Code
        or when ``AGENT_LINK_HOST`` names another host."""
        host = (env.get("AGENT_LINK_HOST") or "").strip().lower()
        if host and host != NAME:
            return None
        found = self.current_session_id(env)
        if found is None:
            return None
        tool_use = meta.get("claudecode/toolUseId") if isinstance(meta, Mapping) else None
        return Caller(
            f"{NAME}:{found[0]}", found[1], NAME,
            tool_call_id=tool_use if isinstance(tool_use, str) and len(tool_use) <= 300 else None, evidence=found[2],
        )

    # -- discovery -----------------------------------------------------------------------

    def state_dir(self) -> str | None:
        """The App's agent-link state dir (None before :meth:`attach`)."""
        return os.fspath(self.app.config.state_dir) if self.app is not None else None

    def channel_sessions(self) -> frozenset[str]:
        """Session ids that a running agent-link channel bridge serves."""
        state = self.state_dir()
        return frozenset(active_bridges(state)) if state is not None else frozenset()

    async def _in_thread(self, fn: Callable[[], T]) -> T:
        def locked() -> T:
            with self._lock:  # the index caches are not thread-safe
                return fn()

        return await _to_thread(locked)

    async def list_sessions(self, *, include_archived: bool = False, limit: int = 200) -> SessionListing:
        """Every Claude session; the newest ``limit`` transcripts are read for titles and cwd,
        older ones are listed from their file entry (so exact ids of any age resolve)."""
        channels = self.channel_sessions()
        sessions = await self._in_thread(lambda: self.index.sessions(limit, channels))
        if not include_archived:
            sessions = [s for s in sessions if not s.archived]
        cfg = self.index.config_dir
        searched = [cfg, *desktop_roots(self.env)]
        provider: dict[str, Any] = {"available": True, "reason": None, "source": "claude-local", "searched": searched}
        if not sessions and not any(os.path.isdir(p) for p in searched):
            provider.update(available=False, reason="no_claude_data")
        return SessionListing(sessions=sessions, provider=provider, complete=True)

    async def get_session(self, session_id: str) -> Session | None:
        """A session by CLI id, former CLI id, ``local_<id>`` sidecar id or ``local_<cli>``."""
        channels = self.channel_sessions()
        return await self._in_thread(lambda: self.index.find(session_id, channels))

    # -- delivery ------------------------------------------------------------------------

    async def deliver(self, message: dict[str, Any], envelope: str, options: Mapping[str, Any]) -> Delivery:
        """Say how a stored message will reach its Claude session; nothing is pushed here.

        ``options["deliveryPreference"]`` (``auto`` | ``channel`` | ``mailbox``) comes from
        message_claude_session. Asking for ``channel`` when the target has none adds a
        ``channel_unavailable`` warning; the message is queued either way.
        """
        from agent_link_claude import native

        ident = message["recipient"].split(":", 1)[1]
        preference = options.get("deliveryPreference", "auto")
        self.confirm_late()
        session = await self.get_session(ident)
        claude_meta = (message.get("metadata") or {}).get("claude")
        mailbox_only = preference == "mailbox" or (isinstance(claude_meta, dict) and claude_meta.get("push") is False)
        if not mailbox_only and session is not None and session.loaded and self.inbox_enabled():
            inbox = await _to_thread(lambda: native.find_inbox(self.index.config_dir, session.id))
            if inbox is not None:
                return await self._deliver_inbox(message, envelope, inbox)
        if preference == "mailbox":
            state = "queued"
        elif ident in self.channel_sessions():
            state = "queued-channel"
        elif session is not None and session.loaded:
            state = "queued-online"
        else:
            state = "queued-offline"
        warnings = []
        if preference == "channel" and state != "queued-channel":
            warnings.append({
                "code": "channel_unavailable",
                "message": f"{message['recipient']} has no open agent-link channel; the message waits for its hooks and inbox.",
                "details": {"state": state},
            })
        return Delivery(state=state, warnings=warnings)

    def confirm_late(self, limit: int = 50) -> int:
        """Mark delivered the messages pushed to an inbox socket whose transcript shows them
        only now (their send reported ``unknown``, or ``held`` and someone approved it in the
        session since); returns how many. Cheap when there are none:
        one query. Called at every send to a Claude session and by health."""
        from agent_link_claude import native

        if self.app is None:
            return 0
        # undelivered Claude mail whose last push outcome was unknown, or that a session held (inbox_held), newest first
        rows = self.app.store.conn.execute(
            "SELECT m.id, m.recipient FROM messages m WHERE m.first_delivered_at IS NULL AND m.recipient LIKE 'claude:%'"
            " AND ((SELECT kind FROM message_events e WHERE e.message_id = m.id AND e.kind IN"
            " ('delivery_unknown', 'delivery_settled', 'delivered', 'released') ORDER BY seq DESC LIMIT 1)"
            " = 'delivery_unknown' OR EXISTS (SELECT 1 FROM message_events h WHERE h.message_id = m.id"
            " AND h.kind = 'inbox_held')) ORDER BY m.sent_at DESC LIMIT ?", (limit,)).fetchall()
        confirmed = 0
        for row in rows:
            sid = row["recipient"].split(":", 1)[1]
            kind = native.transcript_shows(self.index.config_dir, sid, row["id"])
            if kind is not None and self.app.mailbox.mark_delivered(row["id"], INBOX_VIA, {"transcript": kind, "late": True}):
                confirmed += 1
        return confirmed

    def inbox_enabled(self) -> bool:
        """False when ``AGENT_LINK_DISABLE_CLAUDE_INBOX`` is set."""
        return not (self.app is not None and self.app.config.get("AGENT_LINK_DISABLE_CLAUDE_INBOX"))

    async def _deliver_inbox(self, message: dict[str, Any], envelope: str, inbox: native.Inbox) -> Delivery:
        """Push through the session's inbox socket and wait for evidence (see the module
        docstring), at most once per message: the write happens under the message's push
        claim, and a push that an earlier attempt may have made (its process died holding
        the claim, or it ended without evidence) is looked for in the session first
        (:meth:`_earlier_push`)."""
        from agent_link_claude import native

        wait_ms = self.app.config.get("AGENT_LINK_CLAUDE_INBOX_WAIT_MS") if self.app is not None else None
        wait_s = (wait_ms if isinstance(wait_ms, int) else 20000) / 1000
        cfg = self.index.config_dir
        fields = {"inbox": {"name": inbox.name, "status": inbox.status}}
        mailbox = self.app.mailbox if self.app is not None else None
        if mailbox is not None:
            earlier = await _to_thread(lambda: self._earlier_push(mailbox, cfg, inbox, message, wait_s))
            if earlier is not None:
                return earlier
        # settled however the push ends (an error: perhaps written, so a resend looks first);
        # only a killed process leaves its claim open
        state = "pushed"
        try:
            outcome = await _to_thread(lambda: native.push_native(
                cfg, inbox, envelope, message["id"], message.get("anticipation") or "fyi", wait_s))
            state = outcome.state
        finally:
            if mailbox is not None:
                settle_push(mailbox, message["id"], state)
        return self._inbox_delivery(message, inbox, outcome, fields)

    def _earlier_push(self, mailbox: Any, cfg: str, inbox: native.Inbox, message: dict[str, Any],
                      wait_s: float) -> Delivery | None:
        """Take the message's push claim, finishing what an earlier push left; None when the
        caller should write the message now (the claim is then ours).

        * the transcript already shows the message: delivered, nothing written;
        * another live process holds the claim: it is pushing now, nothing written;
        * the claim's process died, or the last push ended without evidence: when the
          session's transcript has the message at all (a ``queue-operation`` line: its host
          took it), wait for the evidence instead of writing it again; when it has no trace
          of it, the earlier write never landed and it is written now;
        * the last push was held by the session: it stays held there, not written again.

        Blocking (runs in a worker thread).
        """
        from agent_link_claude import native

        mid = message["id"]
        pushed_before = mailbox.has_event(mid, "push_claimed")
        if pushed_before:
            kind = native.transcript_shows(cfg, inbox.session_id, mid)
            if kind is not None:
                return Delivery(delivered=True, via=INBOX_VIA, state="delivered-inbox",
                                evidence={"transcript": kind, "session": inbox.session_id, "earlierPush": True},
                                fields={"inbox": {"name": inbox.name, "status": inbox.status, "state": "already_delivered"}})
        me = {"pid": os.getpid(), "procStart": proc_start(os.getpid()), "via": INBOX_VIA, "session": inbox.session_id}
        held = claim_push(mailbox, mid, me)
        landed = False
        if held is not None:
            holder = held["holder"]
            pid = holder.get("pid")
            if isinstance(pid, int) and same_process(pid, holder.get("procStart")):
                return Delivery(state="queued-online", fields={"inbox": {"name": inbox.name, "state": "claimed_elsewhere"}},
                                warnings=[{"code": "push_in_progress",
                                           "message": "Another agent-link process is pushing this message right now; "
                                                      "it is not written twice.", "details": {"pid": pid}}])
            if claim_push(mailbox, mid, me, replacing=held["seq"]) is not None:
                return Delivery(state="queued-online", fields={"inbox": {"name": inbox.name, "state": "claimed_elsewhere"}},
                                warnings=[{"code": "push_in_progress",
                                           "message": "Another agent-link process took over this message's push; "
                                                      "it is not written twice."}])
            landed = True  # the dead process may have written it before it died
        elif pushed_before:
            last = last_push_settled(mailbox, mid) or {}
            if last.get("outcome") == "held":
                settle_push(mailbox, mid, "held")
                return Delivery(state="held", fields={"inbox": {"name": inbox.name, "state": "already_held"}}, warnings=[{
                    "code": "held", "message": f"{PROBLEM_TEXT['held']}. It was held there by an earlier push and is not "
                                               "written again; it stays in the mailbox, not delivered.",
                    "details": {"state": "held", "session": inbox.name}}])
            landed = last.get("outcome") in ("pushed", "orphaned")
        if landed and native.transcript_shows(cfg, inbox.session_id, mid, queued=True) is not None:
            outcome = native.await_evidence(cfg, inbox, mid, wait_s)
            settle_push(mailbox, mid, outcome.state, {"earlierPush": True})
            delivery = self._inbox_delivery(message, inbox, outcome,
                                            {"inbox": {"name": inbox.name, "status": inbox.status}})
            delivery.evidence["earlierPush"] = True
            delivery.fields["inbox"]["earlierPush"] = True
            return delivery
        return None

    def _inbox_delivery(self, message: dict[str, Any], inbox: native.Inbox, outcome: native.NativeOutcome,
                        fields: dict[str, Any]) -> Delivery:
        """The :class:`Delivery` a native push came to."""
        fields = {"inbox": {**fields["inbox"], "state": outcome.state}}
        if outcome.state == "delivered":
            return Delivery(delivered=True, via=INBOX_VIA, state="delivered-inbox", evidence=outcome.evidence, fields=fields)
        if outcome.state == "pushed":
            return Delivery(state="pushed-inbox", evidence=outcome.evidence, unknown=True, fields=fields, warnings=[{
                "code": "inbox_unconfirmed",
                "message": f"written to {message['recipient']}'s inbox socket; {outcome.detail}. It stays in the mailbox.",
                "details": {"state": outcome.state},
            }])
        if outcome.state == "failed":
            return Delivery(state="queued-online", evidence=outcome.evidence, warnings=[{
                "code": "inbox_unavailable",
                "message": f"{message['recipient']}'s inbox socket did not take the message ({outcome.detail}); "
                           "it waits for the session's hooks and inbox.",
                "details": {"state": outcome.state},
            }])
        # a receipt from the host: held, refused, dropped, denied or expired
        if self.app is not None:
            self.app.mailbox.record_event(message["id"], f"inbox_{outcome.state}", message["recipient"], INBOX_VIA,
                                          outcome.evidence)
        return Delivery(state=outcome.state, evidence=outcome.evidence, fields=fields, warnings=[{
            "code": outcome.state,
            "message": f"{PROBLEM_TEXT.get(outcome.state, outcome.state)}. It stays in the mailbox, not delivered.",
            "details": {"state": outcome.state, "reason": outcome.detail, "session": inbox.name},
        }])

    # -- live channel --------------------------------------------------------------------

    def channel_wanted(self, app: App) -> bool:
        """Declare the channel only inside Claude Code and unless ``AGENT_LINK_DISABLE_CHANNEL``."""
        if app.config.get("AGENT_LINK_DISABLE_CHANNEL"):
            return False
        host = app.config.get("AGENT_LINK_HOST")
        if host:
            return str(host).strip().lower() == NAME
        return self.identify_caller({}, app.env) is not None

    def declare_channel(self, app: App) -> dict[str, dict[str, Any]]:
        """At an MCP connection's start (``agent_link_mcp_connection``): the experimental capabilities its ``initialize``
        answer adds, ``{"claude/channel": {}}`` when :meth:`channel_wanted`, else nothing."""
        self.channel_declared = self.channel_wanted(app)
        return {CAPABILITY: {}} if self.channel_declared else {}

    async def serve(self, app: App, peer: McpPeer | None) -> None:
        """Run the channel bridge from server start (only when the capability was declared and
        this plugin watches the connection: ``agent_link_mcp_connection``); it pushes once the
        connection can carry a channel notification (:func:`connection_gate`), until the client is gone."""
        from agent_link_claude import native
        from agent_link_claude.connection import McpPeer

        self.peer = watched = peer if isinstance(peer, McpPeer) else None
        if not self.channel_declared or watched is None:
            # wanted, but another plugin watches the connection (or none: this one's hook was skipped or faulted), so no
            # capability was sent
            reason = ("channel_disabled" if app.config.get("AGENT_LINK_DISABLE_CHANNEL") else
                      "connection_not_watched" if watched is None and self.channel_wanted(app) else "channel_not_declared")
            self.channel_declared = False
            self.bridge.gate = GateState(False, reason)
            return
        parent = parent_pid(os.getpid())
        argv = command_line(parent) if parent else None
        config = GlobalConfigReader(global_config_path(app.env))

        def current() -> str | None:
            found = self.current_session_id(app.env)
            return found[0] if found else None

        def gate() -> GateState:
            closed = connection_gate(watched)
            if closed is not None:
                return closed
            # senders push into a session with an inbox socket themselves; a channel push too
            # would show the model every message twice
            sid = current()
            if sid is not None and self.inbox_enabled() and native.find_inbox(self.index.config_dir, sid) is not None:
                return GateState(False, "native_inbox")
            return evaluate_gate(app.env, argv, config.read(), watched.client_info.get("name"))

        with contextlib.suppress(PeerGone):
            await ChannelBridge(gate, current, self.bridge).run(app, watched)

    # -- health --------------------------------------------------------------------------

    def activity_check(self, session_id: str) -> Any:
        """wait_for_agent without replyToMessageId on a session: the rule of
        wait_for_claude_session, outcome ``idle`` once a session that was running when the
        wait began has stopped (its process list looked at every 2 s at most)."""
        import time

        state: dict[str, Any] = {"running": None, "checked": 0.0}

        async def check() -> dict[str, Any] | None:
            now = time.monotonic()
            if state["running"] is not None and now - state["checked"] < IDLE_CHECK_S:
                return None
            state["checked"] = now
            session = await self.get_session(session_id)
            loaded = bool(session is not None and session.loaded)
            if state["running"] is None:
                state["running"] = loaded
                return None
            return {"outcome": "idle"} if state["running"] and not loaded else None

        return check

    def mailbox_counts(self) -> dict[str, Any]:
        """The mailbox of the Claude session this process serves: ``{path, session, queued (not
        delivered yet), open (undelivered, or reply/action still to resolve)}``; ``session`` null
        outside a session (never raises)."""
        if self.app is None:
            return {"error": "not attached"}
        try:
            found = self.current_session_id(self.env)
            out: dict[str, Any] = {"path": os.fspath(self.app.config.db_path), "session": None, "queued": None, "open": None}
            if found is not None:
                address = f"{NAME}:{found[0]}"
                out.update(session=address, queued=self.app.mailbox.count_open(address, undelivered_only=True),
                           open=self.app.mailbox.count_open(address))
            return out
        except Exception as exc:  # health must answer even with a broken database
            return {"error": f"{type(exc).__name__}: {exc}"[:200]}

    def _session_paths(self, cfg: str, channels: frozenset[str]) -> list[dict[str, Any]] | dict[str, str]:
        """Per live Claude session: which path agent-link mail takes (``native-inbox``,
        ``channel``, ``hook-only``) and why."""
        from agent_link_claude import native

        try:
            out = []
            for record in native.live_records(cfg):
                sid = record.get("sessionId")
                path, reason = native.path_of(record, disabled=not self.inbox_enabled(), channel=sid in channels)
                out.append({"sessionId": sid, "name": record.get("name"), "pid": record.get("pid"),
                            "status": record.get("status"), "version": record.get("version"),
                            "delivery": path, "reason": reason})
            return out
        except Exception as exc:  # health must answer
            return {"error": f"{type(exc).__name__}: {exc}"[:200]}

    def health(self) -> dict[str, Any]:
        """Channel state, hook heartbeats, mailbox counts and session-index statistics (never raises)."""
        try:
            state = self.state_dir()
            runs = last_runs(state) if state is not None else {}
            beats = {k.split("-", 1)[1]: iso(v) for k, v in runs.items() if k.startswith(f"{NAME}-")}
            bridges = active_bridges(state) if state is not None else {}
        except Exception as exc:  # health must answer even with a broken state dir
            beats, bridges = {"error": f"{type(exc).__name__}: {exc}"[:200]}, {}
        stats = self.index.stats
        cfg = self.index.config_dir
        sessions = self._session_paths(cfg, frozenset(bridges))
        late: int | str
        try:
            late = self.confirm_late()
        except Exception as exc:  # health must answer even with a broken database
            late = f"{type(exc).__name__}: {exc}"[:200]
        peer = self.peer
        return {
            "configDir": cfg,
            "configDirExists": os.path.isdir(cfg),
            "plugin": {**plugin_status(cfg), "root": self.env.get("CLAUDE_PLUGIN_ROOT")},
            "channel": {
                "declared": self.channel_declared,
                # the revision Claude Code opened this server's connection with (None outside one)
                "protocolVersion": peer.protocol_version if peer is not None else None,
                "bridge": self.bridge.view(),
                "activeBridges": sorted(bridges),
            },
            "hooks": {"lastRun": beats},
            "mailbox": self.mailbox_counts(),
            "sessions": sessions,
            # inbox pushes whose transcript evidence arrived after the send returned
            "lateConfirmed": late,
            "index": {
                "transcripts": stats.transcripts_seen, "transcriptsRead": stats.transcripts_read,
                "cached": stats.cached, "live": stats.live, "sidecars": stats.sidecars, "lastScanMs": stats.last_scan_ms,
            },
        }



def plugin_status(cfg: str) -> dict[str, list[str]]:
    """Which ``agent-link@<marketplace>`` plugins Claude Code has installed
    (``plugins/installed_plugins.json``) and enabled (``settings.json`` ``enabledPlugins``)."""

    def load(*parts: str) -> dict[str, Any]:
        return read_json_object(os.path.join(cfg, *parts)) or {}

    installed = load("plugins", "installed_plugins.json").get("plugins")
    enabled = load("settings.json").get("enabledPlugins")
    ours = f"{PLUGIN_NAME}@"
    return {
        "installed": sorted(k for k in installed if k.startswith(ours)) if isinstance(installed, dict) else [],
        "enabled": sorted(k for k, v in enabled.items() if k.startswith(ours) and v is True) if isinstance(enabled, dict) else [],
    }


# The push claim: message events the mailbox records (docs/claude-native-inbox.md), read here.
def claim_push(mailbox: Mailbox, message_id: str, holder: dict[str, Any], *, replacing: int | None = None) -> dict[str, Any] | None:
    """Take the message's push claim before writing it to a session's inbox, so two processes (or a
    resend after a crash) never push it at once. Atomic across processes: ``push_claimed`` with
    ``holder`` (JSON-able, e.g. ``{"pid", "procStart"}``) is recorded only when no claim is open, or
    when the open one is ``replacing`` (its ``seq``: a claim whose process the caller found dead;
    settled as ``orphaned`` first).

    :returns: None when the claim is now ours; else the open claim's ``{"seq", "at" (ms), "holder"}``
        (the caller decides from ``holder`` whether its process lives).
    """
    with mailbox.store.write() as conn:
        last = conn.execute(
            "SELECT seq, kind, at, data FROM message_events WHERE message_id = ?"
            " AND kind IN ('push_claimed', 'push_settled') ORDER BY seq DESC LIMIT 1", (message_id,)).fetchone()
        if last is not None and last["kind"] == "push_claimed":
            if replacing is None or last["seq"] != replacing:
                return {"seq": last["seq"], "at": last["at"], "holder": json.loads(last["data"] or "{}")}
            mailbox.record_event(message_id, "push_settled", None, None, {"outcome": "orphaned", "claim": replacing})
        mailbox.record_event(message_id, "push_claimed", None, None, holder)
    return None


def settle_push(mailbox: Mailbox, message_id: str, outcome: str, data: dict[str, Any] | None = None) -> None:
    """Close the open push claim with what the push came to (``outcome``: ``delivered``, ``pushed``,
    ``failed``, ``held`` ...); a later :func:`claim_push` may take it again."""
    mailbox.record_event(message_id, "push_settled", None, None, {"outcome": outcome, **(data or {})})


def last_push_settled(mailbox: Mailbox, message_id: str) -> dict[str, Any] | None:
    """The data of the message's newest ``push_settled`` event (``{"outcome", ...}``), or None when none was."""
    row = mailbox.store.conn.execute(
        "SELECT data FROM message_events WHERE message_id = ? AND kind = 'push_settled' ORDER BY seq DESC LIMIT 1",
        (message_id,)).fetchone()
    return json.loads(row["data"] or "{}") if row is not None else None
