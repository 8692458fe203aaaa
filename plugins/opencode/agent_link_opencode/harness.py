"""The ``opencode`` harness: sessions of running opencode servers (docs/plugins.md §5).

How it finds servers: opencode keeps its sessions behind an HTTP server, ``opencode serve``
(and the one the TUI runs when started with ``--port``), listening on 127.0.0.1 port 4096 by default. The harness asks each
base URL of ``AGENT_LINK_OPENCODE_SERVERS`` (comma-separated; default
``http://127.0.0.1:4096``) for ``GET /session`` (id, title, directory, time) and
``GET /session/status`` (``{"<id>": {"type": "busy"}}`` for sessions in a turn; idle ones are
absent). A server that a caller's proof showed to be the opencode process running this MCP
server (:mod:`agent_link_opencode.proof`) is asked too, whatever its port, and so is every
opencode server running as this user with this ``HOME`` (:mod:`agent_link_opencode.discover`;
``AGENT_LINK_OPENCODE_DISCOVER=0`` turns that off). Basic auth (:meth:`OpencodeHarness._auth`):
the ``OPENCODE_SERVER_PASSWORD`` of the server's own process when it could be read, else
``AGENT_LINK_OPENCODE_PASSWORD``, else this process's ``OPENCODE_SERVER_PASSWORD``.

A server that does not answer, refuses the password or answers something else than JSON makes
the listing incomplete with a provider report naming it, never an empty list. A session two
servers list (servers sharing one data folder) is listed once, from the first server named.

Identity: :mod:`agent_link_opencode.proof` (the argument agent-link's opencode plugin adds,
proven by the opencode server). Delivery: :mod:`agent_link_opencode.delivery` (``prompt_async``,
delivered on the session's own record of the user message).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping
from typing import Any

from agent_link_core.errors import AgentLinkError
from agent_link_core.harness import Delivery, Harness, SessionListing
from agent_link_core.model import Caller, Session
from agent_link_hostkit.titles import retitled

from agent_link_opencode.client import ServerError, call_api, fetch_json, parse_servers, read_server

VIA = "opencode-prompt"

NAME = "opencode"
SESSION_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,128}\Z")
#: seconds the identity check may wait for the server (it runs inline on every tool call; an
#: opencode server busy with a turn on a loaded machine answered after 2 s, and a late answer
#: leaves a true caller unproven)
PROOF_TIMEOUT_S = 5.0
#: seconds a session's server, as a listing or push found it, is pushed to without a new look-up
LOCATED_TTL_S = 30.0


def to_session(entry: dict[str, Any], status: Any, server: str) -> Session | None:
    """A :class:`Session` from one ``GET /session`` entry; None when its id is unusable.

    :param status: the session's ``/session/status`` value (absent: idle).
    :param server: the base URL that listed it (``extra["server"]``).
    """
    sid = entry.get("id")
    if not isinstance(sid, str) or not SESSION_ID_RE.match(sid):
        return None
    times = entry.get("time") if isinstance(entry.get("time"), dict) else {}
    updated = times.get("updated", times.get("created"))
    state = status.get("type") if isinstance(status, dict) and isinstance(status.get("type"), str) else "idle"
    extra = {"server": server, "status": state}
    for key in ("slug", "projectID", "version", "parentID"):
        if isinstance(entry.get(key), str):
            extra[key] = entry[key]
    title, extra = retitled(entry["title"] if isinstance(entry.get("title"), str) else None, extra)
    return Session(
        address=f"{NAME}:{sid}", harness=NAME, id=sid, title=title,
        cwd=entry["directory"] if isinstance(entry.get("directory"), str) else None,
        surface=("server",), loaded=True, archived=bool(times.get("archived")),
        last_activity_ms=updated if isinstance(updated, int) else None,
        receive={"push": None if times.get("archived") else VIA, "nudge": None, "pull": True}, extra=extra,
    )


class OpencodeHarness(Harness):
    """Sessions listed by the opencode servers named in ``AGENT_LINK_OPENCODE_SERVERS``."""

    name = NAME
    session_kind = "opencode_session"
    source_kinds = ("server",)
    #: added to every call of agent-link's tools by agent-link's opencode plugin (:mod:`agent_link_opencode.proof`)
    caller_arguments = ("_agentLinkCaller",)
    #: opencode's config file, which install and health read (agent_link_opencode.install), and the
    #: other variables of opencode's config layers, which the approvals health section judges
    #: (agent_link_approvals.opencode_layers)
    env_variables = ("OPENCODE_CONFIG", "OPENCODE_SERVER_PASSWORD", "OPENCODE_SERVER_USERNAME", "OPENCODE_CONFIG_DIR",
                     "OPENCODE_CONFIG_CONTENT", "OPENCODE_PERMISSION", "OPENCODE_DISABLE_PROJECT_CONFIG")

    def attach(self, app: Any) -> None:
        """Keep ``app``; start with no servers proven by callers and no sessions located."""
        super().attach(app)
        #: servers a caller's proof showed to be the opencode process running this one
        self._proven_servers: list[str] = []
        #: their basic auth, from the opencode process's own environment
        self._proven_auth: dict[str, tuple[str, str]] = {}
        #: session id -> (server, time.monotonic() when found there, not archived)
        self._located: dict[str, tuple[str, float]] = {}
        self._pusher_obj: Any = None
        #: base URL -> its event stream (agent_link_opencode.watch), opened on first use
        self._watches: dict[str, Any] = {}
        #: running servers found by their processes (agent_link_opencode.discover)
        self._scanner: Any = None
        self._found: dict[str, Any] = {}

    async def aclose(self) -> None:
        """Stop following the servers' event streams."""
        for watch in self._watches.values():
            watch.close()
        self._watches.clear()

    def _mark(self, url: str) -> tuple[int, int] | None:
        """Where the event stream of ``url`` is (``ServerWatch.mark``); None before it was started."""
        watch = self._watches.get(url)
        return watch.mark() if watch is not None else None

    def _watch(self, url: str) -> Any:
        """The event stream of ``url``, started on first use (:mod:`agent_link_opencode.watch`):
        when the server first answered with a session, so no stream is opened to a port that is
        not an opencode server."""
        from agent_link_opencode.watch import ServerWatch

        watch = self._watches.get(url)
        if watch is None:
            watch = self._watches[url] = ServerWatch(url, self._auth(url))
        watch.start()
        return watch

    def _servers(self) -> tuple[list[str], list[str]]:
        """``(urls, bad)``: the configured servers, then the ones callers proved, then the ones
        found running (:mod:`agent_link_opencode.discover`, unless
        ``AGENT_LINK_OPENCODE_DISCOVER`` is off); ``bad`` the unusable configured entries."""
        urls, bad = parse_servers(self.app.config.get("AGENT_LINK_OPENCODE_SERVERS"))
        # a server proven to be the opencode process running this one (any port) is listed too
        urls += [u for u in self._proven_servers if u not in urls]
        if self.app.config.get("AGENT_LINK_OPENCODE_DISCOVER"):
            from agent_link_opencode.discover import Scanner

            self._scanner = self._scanner or Scanner(self.app.env.get("HOME"))
            self._found = {f.url: f for f in self._scanner.servers()}
            urls += [u for u in self._found if u not in urls]
        return urls, bad

    def _discovered_only(self, url: str) -> bool:
        """True for a server known only from the process table (neither configured nor proven)."""
        configured, _ = parse_servers(self.app.config.get("AGENT_LINK_OPENCODE_SERVERS"))
        return url in self._found and url not in configured and url not in self._proven_servers

    def _auth(self, url: str) -> str | tuple[str, str] | None:
        """The basic auth for ``url``: the server's own ``OPENCODE_SERVER_USERNAME`` /
        ``OPENCODE_SERVER_PASSWORD`` when its process was found (or proven a caller's) with
        one, else
        ``AGENT_LINK_OPENCODE_PASSWORD``, else ``OPENCODE_SERVER_PASSWORD`` of this process's
        environment (user its ``OPENCODE_SERVER_USERNAME``, default ``opencode``); None for none."""
        found = self._found.get(url)
        if found is not None and found.password is not None:
            return found.username, found.password
        if url in self._proven_auth:
            return self._proven_auth[url]
        password = self.app.config.get("AGENT_LINK_OPENCODE_PASSWORD") or self.app.env.get("OPENCODE_SERVER_PASSWORD") or None
        if password is None:
            return None
        return self.app.env.get("OPENCODE_SERVER_USERNAME") or "opencode", str(password)

    async def list_sessions(self, *, include_archived: bool = False, limit: int = 200) -> SessionListing:
        urls, bad = self._servers()
        marks = [self._mark(url) for url in urls]
        answers = await asyncio.gather(*(asyncio.to_thread(read_server, url, self._auth(url)) for url in urls), return_exceptions=True)
        found: dict[str, Session] = {}
        servers: list[dict[str, Any]] = [{"url": entry, "available": False, "reason": "bad_url"} for entry in bad]
        # Nothing listening at the default address nobody configured is no opencode running, not
        # a failure: people without opencode must not see a broken listing everywhere.
        unset = self.app.config.sources.get("AGENT_LINK_OPENCODE_SERVERS", "default") == "default"
        for url, mark, answer in zip(urls, marks, answers):
            if isinstance(answer, ServerError) and self._discovered_only(url) and answer.reason != "unauthorized":
                # a port opencode's process listens on that is not its API (or it just stopped)
                servers.append({"url": url, "available": True, "reason": "not_opencode_api", "discovered": True, "sessions": 0})
                continue
            if isinstance(answer, ServerError) and unset and answer.reason == "unreachable":
                servers.append({"url": url, "available": True, "reason": "not_running", "sessions": 0})
                continue
            if isinstance(answer, ServerError):
                servers.append({"url": url, "available": False, "reason": answer.reason, "error": answer.detail})
                continue
            if isinstance(answer, BaseException):
                raise answer
            entries, statuses = answer
            servers.append({"url": url, "available": True, "reason": None, "sessions": len(entries),
                            **({"discovered": True} if url in self._found else {})})
            for entry in entries:
                session = to_session(entry, statuses.get(str(entry.get("id"))), url)
                if session is not None:
                    self._watch(url).seed(mark, entry, str(session.extra["status"]))
                if session is not None and session.id not in found:
                    self._remember(session, url)
                    if include_archived or not session.archived:
                        found[session.id] = session
        failed = [s for s in servers if not s["available"]]
        sessions = sorted(found.values(), key=lambda s: -(s.last_activity_ms or 0))
        # An empty server list (configured so, nothing proven or found) is "no opencode here": a
        # complete, empty listing, so a bare id is still resolved from the other hosts' sessions.
        reason = "no_server_configured" if not servers else (failed[0]["reason"] if failed else None)
        provider = {"available": not servers or len(failed) < len(servers), "reason": reason,
                    "source": "opencode server API", "servers": servers}
        return SessionListing(sessions[:limit], provider, complete=not failed and len(sessions) <= limit)

    async def get_session(self, session_id: str) -> Session | None:
        """The session from the first configured server that has it (archived ones too):
        from a server's event stream when that knows it (:mod:`agent_link_opencode.watch`),
        else asked for."""
        if not SESSION_ID_RE.match(session_id):
            return None
        for url, watch in list(self._watches.items()):  # no process scan on this path
            known = watch.get(session_id)
            if known is not None:
                session = to_session(known[0], {"type": known[1]}, url)
                if session is not None:
                    self._remember(session, url)
                    return session
        located = await self._locate(session_id)
        return located[0] if located is not None else None

    def identify_caller(self, meta: Mapping[str, Any], env: Mapping[str, str]) -> Caller | None:
        """The session named by agent-link's opencode plugin in the call's arguments, with
        evidence only when opencode proves it (:mod:`agent_link_opencode.proof`); None when the
        call names no opencode session (``OPENCODE=1`` alone never names one)."""
        from agent_link_opencode import proof

        named = proof.claimed(meta)
        if named is None:
            return None
        from agent_link_opencode.discover import credentials

        own: dict[str, tuple[str, str] | None] = {}

        def fetch(url: str, path: str, pid: int) -> Any:
            own[url] = credentials(pid)  # the password of the opencode process listening there
            return fetch_json(url, path, own[url] or self._auth(url), timeout_s=PROOF_TIMEOUT_S)

        found = proof.evidence(meta, fetch)
        if found is not None and named[2] not in self._proven_servers:
            self._proven_servers.append(named[2])
        auth = own.get(named[2])
        if found is not None and auth is not None:
            self._proven_auth[named[2]] = auth
        return Caller(f"{NAME}:{named[0]}", "runtime_context", NAME, evidence=found)

    def _pusher(self) -> Any:
        from agent_link_opencode.delivery import PushClaims, Pusher

        pusher = self._pusher_obj
        if pusher is None:
            pusher = self._pusher_obj = Pusher(
                lambda url, method, path, body: call_api(url, method, path, body, self._auth(url)), PushClaims(self.app.store))
        return pusher

    async def _locate(self, session_id: str) -> tuple[Session, str] | None:
        """The session and the first configured server that has it: every server is asked for
        ``GET /session/{id}`` and ``GET /session/status`` at once (no whole listing)."""
        urls, _bad = self._servers()

        def ask(url: str, path: str) -> Any:
            try:
                return call_api(url, "GET", path, None, self._auth(url))
            except ServerError:
                return None

        marks = [self._mark(url) for url in urls]  # a look-up while a stream is open teaches it
        answers = await asyncio.gather(*(asyncio.to_thread(ask, url, path) for url in urls
                                         for path in (f"/session/{session_id}", "/session/status")))
        for n, url in enumerate(urls):
            entry, statuses = answers[2 * n], answers[2 * n + 1]
            if isinstance(entry, dict) and entry.get("id") == session_id:
                session = to_session(entry, statuses.get(session_id) if isinstance(statuses, dict) else None, url)
                if session is not None:
                    self._watch(url).seed(marks[n], entry, str(session.extra["status"]))
                    self._remember(session, url)
                    return session, url
        return None

    def _remember(self, session: Session, server: str) -> None:
        if session.archived:
            self._located.pop(session.id, None)
        else:
            self._located[session.id] = (server, time.monotonic())

    async def deliver(self, message: dict[str, Any], envelope: str, options: Any) -> Delivery:
        """Push the envelope as a user prompt (:mod:`agent_link_opencode.delivery`).

        The session's server is the one a listing or push of this process found it on in the
        last :data:`LOCATED_TTL_S` seconds (not archived then), else it is looked up; a push
        refused there is tried once more after a fresh look-up.

        :raises AgentLinkError: ``not_found`` (no configured server has the session),
            ``archived``.
        """
        session_id = str(message["recipient"]).split(":", 1)[1]
        known = self._located.get(session_id)
        cached = known is not None and time.monotonic() - known[1] < LOCATED_TTL_S
        if known is not None and cached:
            server = known[0]
        else:
            located = await self._locate(session_id) if SESSION_ID_RE.match(session_id) else None
            if located is None:
                raise AgentLinkError("not_found", f"No opencode server has session {session_id}.", {"query": message["recipient"]})
            session, server = located
            if session.archived:
                raise AgentLinkError("archived", f"{message['recipient']} is archived.", {"address": message["recipient"]})
        delivery: Delivery = await self._pusher().deliver(message["id"], session_id, server, envelope)
        if cached and any(w["code"] == "opencode_push_refused" for w in delivery.warnings):
            self._located.pop(session_id, None)  # moved or gone: nothing was accepted, look again
            return await self.deliver(message, envelope, options)
        return await self._archived_after(delivery, message, session_id, server)

    async def _archived_after(self, delivery: Delivery, message: dict[str, Any], session_id: str, server: str) -> Delivery:
        """The push judged again for a session archived just before it (the window between
        opencode archiving it and the event saying so, :mod:`agent_link_opencode.watch`).

        opencode stores a prompt into an archived session and runs its turn, so a push that
        landed stays delivered (or accepted), with the warning ``opencode_session_archived``.
        Whether the session was archived is the push's own look, asked together with it
        (``evidence.sessionArchived``, :mod:`agent_link_opencode.delivery`), else (that look
        failed, or an earlier push was found) ``GET /session/{id}`` now. A push that did not
        land is looked at again: an archived session raises ``archived`` (the message waits in
        the mailbox, as for a send refused before storing).

        :raises AgentLinkError: ``archived``, for a push that did not land into a session now archived.
        """
        landed = delivery.delivered or delivery.accepted
        archived = delivery.evidence.get("sessionArchived") if landed else None
        if archived is None:
            located = await self._locate(session_id)
            archived = located is not None and located[0].archived
            if landed:
                delivery.evidence["sessionArchived"] = archived
        if not archived:
            return delivery
        self._located.pop(session_id, None)
        watch = self._watches.get(server)
        if watch is not None:
            watch.forget(session_id)  # the stream has not said so yet: the next send looks it up
        if not landed:
            raise AgentLinkError("archived", f"{message['recipient']} is archived.", {"address": message["recipient"]})
        delivery.warnings.append({"code": "opencode_session_archived", "message": (
            f"{message['recipient']} was archived in opencode just before the push. opencode still stored the message and "
            "runs the session's turn, but an archived session is out of its user's sight: message another session, "
            "or unarchive this one."), "details": {"address": message["recipient"]}})
        return delivery

    async def recheck(self, message: dict[str, Any]) -> Delivery | None:
        """Late evidence for an accepted push (the model was handed the queued message)."""
        row = self._pusher().claims.get(message["id"])
        if row is None or row["state"] not in ("accepted", "unknown"):
            return None
        found: Delivery | None = await self._pusher().recheck(message["id"], row["session_id"], row["server"])
        return found

    def health(self) -> dict[str, Any]:
        """The configured servers, the ones proven by callers, and whether ``agent-link install
        opencode`` is in opencode's config (its MCP server and the plugin that proves callers):
        ``install.config`` is the file install edits; ``mcpServer`` and ``callerPlugin`` read
        what opencode's global files and ``$OPENCODE_CONFIG`` hold together, merged as opencode
        merges them (``install.read``: those files; a project's own config is not read)."""
        from agent_link_opencode.install import PLUGIN_FILE, SERVER_NAME, config_path, effective_config

        urls, bad = self._servers()
        path = config_path(self.app.env)
        config, read = effective_config(self.app.env)
        mcp = config.get("mcp")
        plugins = config.get("plugin")
        mcp = mcp if isinstance(mcp, dict) else {}
        plugins = plugins if isinstance(plugins, list) else []
        return {
            "servers": urls, "badServers": bad, "passwordSet": self.app.config.get("AGENT_LINK_OPENCODE_PASSWORD") is not None,
            "discovered": [{"url": f.url, "pid": f.pid, "passwordFromProcess": f.password is not None} for f in self._found.values()],
            "provenServers": list(self._proven_servers),
            "install": {"config": str(path), "mcpServer": SERVER_NAME in mcp,
                        "callerPlugin": any(isinstance(p, str) and p.endswith("/" + PLUGIN_FILE) for p in plugins),
                        "read": [str(p) for p in read]},
        }
