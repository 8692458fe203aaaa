"""The application object: settings, plugins, database, harnesses, and the operations that
the MCP tools and the CLI share (send, reply, wait, inbox, status, list, resolve, health).

Both entry points call these methods, so an MCP tool and its CLI command cannot drift apart.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import sqlite3
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from agent_link_core import __version__, problem_log, state_dirs
from agent_link_core.boundary import MAX_HEALTH_BYTES, interrupts, oversize, plugin_fault
from agent_link_core.config import Config, load_config
from agent_link_core.envelope import MAX_ENVELOPE_BODY_CHARS, MAX_ESCAPED_CHARS, escape_text, render_inbox
from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.harness import Delivery, Harness, HarnessDeclaration, HarnessTable, McpPeer
from agent_link_core.identity import prove_sender
from agent_link_core.mailbox import (
    Mailbox,
    Visibility,
    check_body,
    check_labels,
    iso,
    new_message_id,
    parse_iso_ms,
)
from agent_link_core.model import EXTERNAL, Caller, Session, address_scheme, is_address, is_ulid
from agent_link_core.records import OutgoingMessage, SendContext
from agent_link_core.plugins import Hooks, PluginReport, build_plugin_manager, trace_hook_calls
from agent_link_core.settings_file import with_settings
from agent_link_core.tool_profiles import settings_warnings
from agent_link_core.store import Store, ensure_private_dir, now_ms
from agent_link_core.wake import Wakeup

log = logging.getLogger(__name__)

# MCP clients cut tool calls at 60 s or more (hosts have used 60, 120 and 300 s); a single
# wait never holds a call longer than this, and says so, so the caller can simply wait again.
MAX_WAIT_PER_CALL_MS = 50_000
#: ``async (progress, total, message) -> None``: sends one MCP progress notification for
#: the tool call being served (progress and total in ms for waits)
Progress = Callable[[float, "float | None", "str | None"], Awaitable[None]]
#: how often a wait whose client sent a progress token reports progress (keeps the call alive)
PROGRESS_EVERY_MS = 10_000
#: What status says of a push the host accepted but has not shown the model yet.
ACCEPTED_NOTE = "accepted, awaiting the session"


@dataclass
class SendOutcome:
    """What a send did: the stored row, whether it is new, the push attempt, warnings."""

    message: dict[str, Any]
    created: bool
    delivery: Delivery | None
    warnings: list[dict[str, Any]] = field(default_factory=list)
    via: str | None = None
    result_fields: dict[str, Any] = field(default_factory=dict)
    # ``unknown_address`` for a never-served plain address; kept apart from the plugins'
    # warnings, added to the result's ``warnings`` by :func:`message_summary` and the CLI.
    address_warning: dict[str, Any] | None = None


#: A push may take this many hook budgets (AGENT_LINK_HOOK_TIMEOUT_MS, 30 s by default) before
#: its outcome counts as unknown: pushes wait on a host, which may be slow but must not hang a send.
PUSH_BUDGETS = 4




class App:
    """One agent-link process's view of the world.

    Build with :meth:`create`. Not thread-safe; the MCP server uses one per process.

    :param config: parsed settings.
    :param hooks: the plugin facade.
    :param report: what plugin loading found (for health).
    :param env: the environment the process runs in (identity, host detection).
    """

    def __init__(self, config: Config, hooks: Hooks, report: PluginReport, env: Mapping[str, str],
                 read_only_ok: bool = False) -> None:
        self.config = config
        self.hooks = hooks
        self.plugin_report = report
        self.env = env
        hooks.app = self
        if hooks.report is not report:  # one report: what loading found and what failed since
            report.boundary = hooks.boundary
            hooks.report = report
        hooks.boundary.sink = partial(problem_log.append, config.state_dir)
        #: harnesses by name; a declared one is built (its host's modules imported) when first used
        self.harnesses = HarnessTable(hooks.harnesses(), self._build_harness)
        #: why this App only reads (its state dir is not writable), else None: see ``read_only_ok``
        self.read_only: AgentLinkError | None = None
        try:
            self.store = self._open_store(config.db_path, hooks.migrations())
        except AgentLinkError as exc:
            state_dir = os.path.dirname(os.path.abspath(config.db_path))
            if not read_only_ok or os.access(state_dir, os.W_OK | os.X_OK) or not os.path.isfile(config.db_path):
                raise _name_the_setting(exc, config) from exc
            self.store = Store.open_read_only(config.db_path)
            self.read_only = read_only_error(state_dir)
        self.mailbox = Mailbox(self.store, config, hooks)
        # "reply:<message id>" / "from:<address>" -> waits running in this process, so push
        # loops can leave a message to the wait that is about to return it.
        self.waiting: dict[str, int] = {}
        # plain addresses a plugin's resolve_address said are served elsewhere ("served": true)
        self.served_elsewhere: set[str] = set()
        # the MCP client connection when this process is an MCP server (set by the server)
        self.mcp_peer: McpPeer | None = None
        for harness in self.harnesses.built():
            self._attach_harness(harness)

    def _attach_harness(self, harness: Harness) -> bool:
        """Attach a harness to this App; one that cannot attach leaves its plugin out (reported)."""
        plugin = self.hooks.owner("harness", harness.name)
        if not self.hooks.guard_harness(harness, "attach", partial(_attach, harness, self), False) and plugin:
            self.hooks.boundary.fault(plugin, f"harness.{harness.name}.attach", "the harness could not attach", disable=True)
            return False
        return True

    def _build_harness(self, declared: HarnessDeclaration) -> Harness | None:
        """Build and attach a declared harness (its module imported now); None when it cannot
        be built (reported as its plugin's problem: the harness is gone from this process, the
        plugin's other contributions stay) or attached (its plugin is left out, as for a
        registered harness)."""
        plugin = self.hooks.owner("harness", declared.name) or f"harness {declared.name}"
        try:
            harness = declared.build()
        except (Exception, SystemExit) as exc:  # the plugin's fault: its harness is gone, the rest stays
            from agent_link_core.boundary import describe

            self.hooks.boundary.fault(plugin, f"harness.{declared.name}.build", f"cannot load: {describe(exc)}",
                                      exc=exc if isinstance(exc, Exception) else None)
            return None
        return harness if self._attach_harness(harness) else None

    def _open_store(self, path: str, migrations: list[Any]) -> Store:
        """Open the database with the core's migrations, then each plugin's: a plugin whose
        migration fails is left out (reported), the mailbox and the other plugins stay.

        :raises AgentLinkError: ``state_io_error`` when the database itself is unusable.
        """
        plugins = set(self.plugin_report.loaded)  # a plugin's migrations carry its name
        store = Store(path, [m for m in migrations if m.owner not in plugins],
                      busy_timeout_ms=self.config.get("AGENT_LINK_BUSY_TIMEOUT_MS"))
        by_owner: dict[str, list[Any]] = {}
        for m in migrations:
            if m.owner in plugins:
                by_owner.setdefault(m.owner, []).append(m)
        for owner, batch in by_owner.items():
            try:
                store.migrate(batch)
            except sqlite3.OperationalError as exc:  # the plugin's SQL; a damaged file is not its fault
                self.hooks.boundary.fault(owner, "agent_link_schema", f"migration failed: {type(exc).__name__}: {exc}"[:300],
                                          fix="Fix the migration's SQL.", disable=True)
            except sqlite3.DatabaseError as exc:
                store.close()
                raise store.failure(exc) from exc
        return store

    @classmethod
    def create(cls, env: Mapping[str, str] | None = None, extra_plugins: tuple[Any, ...] = (),
               read_only_ok: bool = False, hooks: Hooks | None = None) -> App:
        """Load plugins and settings and open the database.

        :param read_only_ok: when the database exists but its state dir is not writable, open it
            read-only instead of failing (``health``: report what can be read); ``read_only``
            then holds the refusal, and every write fails.
        :param hooks: plugins already loaded by :func:`~agent_link_core.plugins.load_plugins` for the same ``env``
            (the CLI looks its plugin commands up before it opens the database).
        :raises AgentLinkError: ``invalid_arguments`` for a bad setting (naming the
            variable), ``state_io_error`` when the state dir or database is unusable.
        """
        env = with_settings(dict(os.environ if env is None else env))
        if hooks is None:
            hooks = Hooks(*build_plugin_manager(env=env, extra_plugins=extra_plugins))
        report, pm = hooks.report, hooks.pm
        config = load_config(env, hooks.settings())
        state_dirs.record(config.state_dir, env)
        configure_logging(config)
        if config.get("AGENT_LINK_DEBUG"):
            trace_hook_calls(pm, log.debug)
        return cls(config, hooks, report, env, read_only_ok)

    async def aclose(self) -> None:
        """Shut the harnesses down (each failure logged), then close the database."""
        for harness in self.harnesses.built():
            try:
                await harness.aclose()
            except Exception:
                log.exception("harness %s failed to close", harness.name)
        self.store.close()

    def close(self) -> None:
        """:meth:`aclose` for code without a running event loop (the CLI, scripts). Inside a
        running loop it can only close the database: await :meth:`aclose` there."""
        if not self.harnesses.built():  # nothing to shut down: no event loop (nor asyncio) needed
            self.store.close()
            return
        import asyncio

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(self.aclose())
            return
        log.warning("App.close() called inside an event loop: harnesses not closed; use aclose()")
        self.store.close()

    def held_by_wait(self, row: Any) -> bool:
        """True when a running wait of the message's recipient, in this process or another
        (:mod:`agent_link_core.handoff`), is about to return this message."""
        from agent_link_core import handoff

        if f"reply:{row['reply_to']}" in self.waiting or f"from:{row['from_addr']}" in self.waiting:
            return True
        return handoff.held(self.store, row)

    # -- identity ----------------------------------------------------------------------

    def caller(self, meta: Mapping[str, Any] | None = None) -> Caller:
        """Who is calling: the host's harness first, then the others, then
        ``AGENT_LINK_ADDRESS``, else ``external``."""
        meta = meta or {}
        preferred = self.config.get("AGENT_LINK_HOST")
        for name in sorted(self.harnesses, key=lambda n: (n != preferred, n)):
            entry = self.harnesses.declared().get(name)
            if isinstance(entry, HarnessDeclaration) and not entry.may_identify(meta, self.env):
                continue  # it could not name the caller: not built for nothing
            harness = self.harnesses.get(name)
            if harness is None:
                continue
            # A harness that fails here loses its own callers only (reported); the next one is asked.
            found = self.hooks.guard_harness(harness, "identify_caller", partial(harness.identify_caller, meta, self.env))
            if found is not None and not isinstance(found, Caller):
                plugin = self.hooks.owner("harness", harness.name) or harness.name
                self.hooks.boundary.fault(plugin, f"harness.{harness.name}.identify_caller",
                                          f"returned {type(found).__name__}; expected a Caller or None")
                continue
            if found is not None and found.known:
                return found
        configured = self.config.get("AGENT_LINK_ADDRESS")  # validated by load_config
        if configured:
            return Caller(configured, "config", address_scheme(configured))
        return Caller(EXTERNAL, "fallback", None)

    def host_detection(self, caller: Caller) -> dict[str, Any]:
        """Which host this process serves and what decided it: ``AGENT_LINK_HOST``, else the
        first harness (by ``host_priority``) whose ``host_variables`` are set, else the
        caller's harness. ``{"host", "source": "AGENT_LINK_HOST"|"environment"|"caller"|"none",
        "variable"}`` (the variable's name only, never its value)."""
        configured = self.config.get("AGENT_LINK_HOST")
        if configured:
            return {"host": configured, "source": "AGENT_LINK_HOST", "variable": "AGENT_LINK_HOST"}
        for harness in sorted(self.harnesses.declared().values(), key=lambda h: (h.host_priority, h.name)):
            for variable in harness.host_variables:
                if self.env.get(variable):
                    return {"host": harness.name, "source": "environment", "variable": variable}
        if caller.host:
            return {"host": caller.host, "source": "caller", "variable": None}
        return {"host": None, "source": "none", "variable": None}

    def _harness_failed(self, harness: Harness, exc: BaseException, method: str = "list_sessions") -> None:
        """Report a harness method's failure as its plugin's problem (the caller carries on)."""
        plugin = self.hooks.owner("harness", harness.name) or f"harness {harness.name}"
        self.hooks.boundary.fault(plugin, f"harness.{harness.name}.{method}", f"{type(exc).__name__}: {exc}"[:300], exc=exc)

    async def _get_session(self, harness: Harness, session_id: str) -> Any:
        """``harness.get_session``; a failure (other than AgentLinkError) is reported and counts
        as "not found there"."""
        # a lookup that fails (SystemExit too) or never ends is reported, and finds nothing
        return await self.hooks.boundary.acall(
            self.hooks.owner("harness", harness.name) or f"harness {harness.name}", f"harness.{harness.name}.get_session",
            lambda: harness.get_session(session_id), bound_s=self.hooks.boundary.timeout_ms / 1000 or None,
            check=_check_session, passing=(AgentLinkError,))

    def require_caller(self, caller: Caller) -> Caller:
        """The caller when it has an address; else ``no_current_session``."""
        if caller.known:
            return caller
        raise AgentLinkError(
            "no_current_session",
            "agent-link cannot tell which session is calling, so it has no mailbox to use.",
            {"host": self.config.get("AGENT_LINK_HOST"), "sources": ["harness", "AGENT_LINK_ADDRESS"]},
            hint="Run inside a supported host session, or set AGENT_LINK_ADDRESS (e.g. test:alice).",
        )

    # -- directory ---------------------------------------------------------------------

    async def list_agents(
        self, *, harness: str = "all", loaded: bool | None = None, surface: str | None = None,
        include_archived: bool = False, limit: int = 20, cursor: str | None = None,
    ) -> dict[str, Any]:
        """Sessions of every harness, newest first, filtered, one page at a time; with
        provider reports.

        ``complete`` is true only when this answer holds every session the sources hold for
        the filters given (every provider complete, the first page and nothing after it); a
        page with more after it says ``hasMore`` and gives ``nextCursor`` (pass it back as
        ``cursor``). ``filters`` names the filters applied and ``filteredOut`` counts what
        each left out (``archived``: archived sessions a harness listed anyway).

        :raises AgentLinkError: ``invalid_arguments`` (path ``cursor``) for a cursor this
            method did not give.
        """
        from agent_link_core.directory import decode_cursor, gather_listings, listing_depth, page_of, providers_view, session_view, was_cut

        position = decode_cursor(cursor, "list_agents")
        depth = listing_depth(position, limit)
        listings = await gather_listings(self.harnesses, only=harness, include_archived=include_archived,
                                         limit=depth, on_error=self._harness_failed)
        sessions = [s for listing in listings.values() for s in listing.sessions] + self.present_sessions(harness)
        filters: list[tuple[str, Callable[[Session], bool]]] = []
        if not include_archived:
            filters.append(("archived", lambda s: not s.archived))
        if loaded is not None:
            filters.append(("loaded", lambda s: bool(s.loaded) == loaded))
        if surface:
            filters.append(("surface", lambda s: surface in s.surface))
        page = page_of(sessions, position, limit, filters, cut=was_cut(listings, depth))
        titled = [{"address": s.address, "title": s.title} for listing in listings.values() for s in listing.sessions if s.title]
        if titled:
            self.hooks.sessions_listed(titled)
        providers = providers_view(listings)
        return {
            "sessions": [session_view(s) for s in page.sessions], "providers": providers,
            "complete": page.first and not page.has_more and all(p["complete"] for p in providers.values()),
            "hasMore": page.has_more, "nextCursor": page.next_cursor,
            "filters": {"harness": harness, "loaded": loaded, "surface": surface, "includeArchived": include_archived},
            "filteredOut": page.filtered_out,
        }

    async def resolve_agent(self, query: str, *, harness: str = "all", limit: int = 10, caller: Caller | None = None) -> dict[str, Any]:
        """Resolve an address, a bare id or fuzzy text; ``status`` is resolved, ambiguous or
        not_found (a verdict, not an error)."""
        from agent_link_core.directory import gather_listings, providers_view, rank, session_view, split_address
        caller = caller or Caller()
        query = query.strip()
        out: dict[str, Any] = {"query": query, "best": None, "candidates": [], "via": None}
        if is_address(query):
            scheme, ident = split_address(query)
            owner = self.harnesses.get(scheme)  # None too when its harness cannot be built (reported)
            if owner is not None:
                session = await self._get_session(owner, ident)
                if session is None:
                    return {**out, "status": "not_found"}
                view = session_view(session)
                return {**out, "status": "resolved", "best": view, "candidates": [view]}
            try:
                routed = await self.hooks.aresolve_address(query, caller.address)
            except AgentLinkError as exc:
                # "Not found" from a resolve tool is a verdict, not an error (docs/behaviour.md §3).
                if exc.code not in ("not_found", "ambiguous"):
                    raise
                return {**out, "status": exc.code, "candidates": exc.details.get("candidates", []),
                        "via": query if scheme == "role" else None}
            if routed is not None:
                best = {"address": routed["address"], "harness": address_scheme(routed["address"])}
                return {**out, "status": "resolved", "best": best, "candidates": [best], "via": routed.get("via")}
            if scheme == "role":
                return {**out, "status": "not_found"}
            # An address of a harness nobody installed: mail to it still works.
            best = {"address": query, "harness": scheme, "known": False}
            return {**out, "status": "resolved", "best": best, "candidates": [best]}
        import asyncio

        chosen = [h for h in self.harnesses.values() if harness in ("all", h.name)]
        direct = [s for s in await asyncio.gather(*(self._get_session(h, query) for h in chosen)) if s is not None]
        if len(direct) == 1:  # one lookup beats scanning listings that may be capped
            view = session_view(direct[0])
            return {**out, "status": "resolved", "best": view, "candidates": [view]}
        listings = await gather_listings(self.harnesses, only=harness, include_archived=True, on_error=self._harness_failed)
        sessions = [s for listing in listings.values() for s in listing.sessions]
        exact = [s for s in sessions if s.id == query or query in s.aliases]
        providers = providers_view(listings)
        if len(exact) == 1:
            view = session_view(exact[0])
            return {**out, "status": "resolved", "best": view, "candidates": [view], "providers": providers}
        if len(exact) > 1:
            views = [session_view(s) for s in exact]
            return {**out, "status": "ambiguous", "candidates": views, "providers": providers,
                    "selection": {"ambiguous": True, "tiedCount": len(views), "matchReasons": ["id:exact"]}}
        candidates, ambiguous, tied = rank(sessions, query, limit)
        status = "not_found" if not candidates else ("ambiguous" if ambiguous else "resolved")
        return {
            **out, "status": status, "best": candidates[0] if status == "resolved" else None,
            "candidates": candidates, "providers": providers,
            "selection": {"ambiguous": ambiguous, "tiedCount": tied, "matchReasons": candidates[0]["matchReasons"] if candidates else []},
        }

    async def target_address(self, to: str, caller: Caller, *, allow_archived: bool = False) -> tuple[str, str | None, dict[str, Any]]:
        """Turn a ``to`` argument into ``(recipient address, via, metadata)``.

        :param allow_archived: an exact address may name an archived session (its mail
            waits in the mailbox); fuzzy queries never pick archived ones.
        :raises AgentLinkError: ``not_found`` / ``ambiguous`` with candidates, ``archived``.
        """
        if is_address(to):
            scheme, _, ident = to.partition(":")  # a well-formed address has one colon (no directory import for a send)
            owner = self.harnesses.get(scheme)  # None too when its harness cannot be built (reported)
            if owner is not None:
                session = await self._get_session(owner, ident)
                if session is None:
                    raise AgentLinkError("not_found", f"No session {to} is known.", {"query": to, "candidates": []})
                if session.archived and not allow_archived:
                    raise AgentLinkError("archived", f"{to} is archived and cannot receive mail.", {"address": to})
                return session.address, None, {}
            routed = await self.hooks.aresolve_address(to, caller.address)
            if routed is not None:
                if routed.get("served") is True:
                    self.served_elsewhere.add(routed["address"])
                return routed["address"], routed.get("via"), dict(routed.get("metadata") or {})
            if scheme == "role":
                raise AgentLinkError("not_found", f"No plugin resolves {to}.", {"role": to, "candidates": []},
                                     hint="Install the roles plugin (agent-link-roles) to address roles.")
            return to, None, {}
        verdict = await self.resolve_agent(to, caller=caller)
        if verdict["status"] == "resolved":
            best = verdict["best"]
            if best.get("archived"):
                raise AgentLinkError("archived", f"{best['address']} is archived and cannot receive mail.", {"address": best["address"]})
            return best["address"], None, {}
        short = [{"address": c["address"], "title": c.get("title")} for c in verdict["candidates"][:5]]
        if verdict["status"] == "ambiguous":
            raise AgentLinkError("ambiguous", f"{to!r} matches several agents.", {"query": to, "candidates": short},
                                 hint="Use one of the candidates' addresses.")
        head, sep, rest = to.strip().partition(":")
        if sep and head != head.lower() and is_address(f"{head.lower()}:{rest}"):
            hint = f"Harness names are lower case: {head.lower()}:{rest}."
        else:
            hint = "List agents with list_agents, or give an address such as <harness>:<id>."
        raise AgentLinkError("not_found", f"No agent matches {to!r}.", {"query": to, "candidates": short}, hint=hint)

    # -- sending -----------------------------------------------------------------------

    async def send(
        self, *, caller: Caller, to: str, body: str, anticipation: str | None = None, reply_by: str | None = None,
        wait_for_reply: bool = False, reply_to: str | None = None, message_id: str | None = None,
        tool: str = "message_agent", arguments: Mapping[str, Any] | None = None, options: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None, allow_archived: bool = False, require_known: bool = False,
        metadata: Mapping[str, Any] | None = None, target: tuple[str, str | None, dict[str, Any]] | None = None,
    ) -> SendOutcome:
        """Store a message, then try to push it to its recipient.

        With ``reply_to`` from that message's recipient, the send also resolves it as a
        reply (docs/behaviour.md §8). ``message_id`` makes the send idempotent: the same id with
        the same content returns the first outcome; with other content it is refused.
        A plain address (no harness lists it) that no process has ever served (and no
        plugin's ``resolve_address`` says is served elsewhere) gets an ``unknown_address`` warning naming the closest known addresses; with
        ``require_known`` it is refused (``not_found``) instead. ``metadata`` is stored with the message; its ``fingerprint`` entry takes part in
        the idempotency comparison. ``target``: :meth:`target_address`'s answer for ``to`` and ``caller`` if known (used while the sender keeps it).

        :raises AgentLinkError: ``invalid_arguments``, ``body_too_large``, ``not_found``,
            ``ambiguous``, ``archived``, or what a ``before_send`` hook refuses with.
        """
        now = now_ms()
        clean = check_body(body)
        label, reply_by_ms = check_labels(anticipation, reply_by, wait_for_reply, now)
        if isinstance(message_id, str) and is_ulid(message_id.upper()):
            message_id = message_id.upper()
        if message_id is not None and not is_ulid(message_id):
            raise invalid_arguments([{"path": "messageId", "rule": "pattern", "expected": "a 26-character ULID"}])
        caller, proof_warnings = await prove_sender(self, asked := caller)
        proof_warnings += escaped_size_warnings(clean)
        answered = self.mailbox.require(reply_to) if reply_to else None
        reply_to = answered["id"] if answered is not None else None
        target_meta: dict[str, Any]
        if message_id is not None and self.mailbox.get_row(message_id) is not None:
            recipient, via, target_meta = self.mailbox.stored(message_id)["recipient"], None, {}
        else:
            recipient, via, target_meta = target if target and caller.address == asked.address else await self.target_address(to, caller, allow_archived=allow_archived)
        unseen = None
        if message_id is None or self.mailbox.get_row(message_id) is None:
            from agent_link_core.loops import check_send

            check_send(self.store, self.config, sender=caller.address, recipient=recipient, body=clean, anticipation=label,
                       reply_to=reply_to, now_ms=now, known_sender=caller.known)
            unseen = self._unseen_recipient(recipient, require_known)
        if via:
            target_meta["via"] = via
        target_meta.update(metadata or {})
        msg = OutgoingMessage(
            id=message_id or new_message_id(), sender=caller, to=to if is_address(to) else recipient,
            recipient=recipient, body=clean, anticipation=label, reply_by_ms=reply_by_ms, reply_to=reply_to, metadata=target_meta,
        )
        is_reply = answered is not None and answered["recipient"] == caller.address
        context = SendContext(tool, dict(arguments or {}), via, is_reply, dict(meta or {}))
        warnings = proof_warnings + self.hooks.before_send(msg, context)
        if answered is not None and is_reply and self.mailbox.state(answered).resolution is None:
            _, row = self.mailbox.resolve(answered["id"], caller, "reply", reply=msg, result=context.result)
            created = True
        else:
            row, created = self.mailbox.store_message(msg, context.result)
        delivery = await self.push(row, options or {}) if created else None
        return SendOutcome(self.mailbox.row_dict(self.mailbox.stored(row["id"])), created, delivery, warnings, via,
                           context.result, unseen)

    def _unseen_recipient(self, recipient: str, require_known: bool) -> dict[str, Any] | None:
        """The ``unknown_address`` warning for a plain address nobody ever served (None when
        a harness owns the address, it is a role, or it was seen); raises with ``require_known``."""
        from agent_link_core import presence

        scheme = address_scheme(recipient)
        if (scheme in self.harnesses or scheme == "role" or not is_address(recipient) or recipient in self.served_elsewhere
                or presence.seen(self.store, recipient)):
            return None
        warning = presence.unseen_warning(self.store, recipient, set(self.harnesses))
        if require_known:
            close = warning["details"]["suggestions"]
            raise AgentLinkError(
                "not_found", f"No process has ever served {recipient}, and requireKnown refuses unknown addresses.",
                {"query": recipient, "candidates": [{"address": a} for a in close]},
                hint=(f"Did you mean {' or '.join(close)}? " if close else "")
                + "Check the address, or send without requireKnown to leave the message for whoever reads it later.",
            )
        return warning

    def present_sessions(self, only: str | None = None) -> list[Any]:
        """Live plain-address agents (:func:`agent_link_core.presence.live_sessions`)."""
        from agent_link_core import presence

        return presence.live_sessions(self.store, skip_schemes=set(self.harnesses), only=only)

    async def push(self, row: Any, options: Mapping[str, Any]) -> Delivery | None:
        """Offer a stored message to its recipient's harness; record delivery on evidence.

        A message a running wait of the recipient is about to return (:meth:`held_by_wait`)
        is not pushed: the wait hands it over, and pushes it when it ends without taking it."""
        from agent_link_core.handoff import HELD_EVENT

        scheme = address_scheme(row["recipient"])
        harness = self.harnesses.get(scheme)
        if harness is None:
            return None
        if self.held_by_wait(row):
            self.mailbox.record_event(row["id"], HELD_EVENT, row["recipient"], None, {})
            return Delivery(state="held_for_wait", note="the recipient's running wait returns it")
        envelope = self.mailbox.envelope(row)
        limit = harness.output_budget.push_bytes if harness.output_budget is not None else None
        size = len(envelope.encode("utf-8"))
        bound_s = PUSH_BUDGETS * self.hooks.boundary.timeout_ms / 1000 or None
        sigints = interrupts()
        import asyncio

        try:
            # asyncio.timeout, not wait_for: the plugin's coroutine runs in this task, so its
            # SystemExit or KeyboardInterrupt is caught below instead of stopping the event loop
            async with asyncio.timeout(bound_s):
                if limit is not None and size > limit:
                    return await self._announce(harness, row, size, options)
                delivery = await harness.deliver(self.mailbox.row_dict(row), envelope, options)
        except AgentLinkError as exc:
            return Delivery(warnings=[{"code": exc.code, "message": exc.message, "details": exc.details}])
        except TimeoutError as exc:
            # A push that never ends must not hold the sender's call: whether it arrived is
            # unknown, so it is remembered as such and not pushed again blindly.
            self._harness_failed(harness, exc, "deliver")
            delivery = Delivery(unknown=True, warnings=[{
                "code": "push_timed_out",
                "message": f"{harness.name} did not finish the push within {bound_s:g} s; whether it arrived is unknown.",
            }])
        except BaseException as exc:  # the row is stored: report the failure (SystemExit too), the message stays queued
            if not plugin_fault(exc, sigints):
                raise
            self._harness_failed(harness, exc, "deliver")
            return Delivery(warnings=[{"code": "internal_error", "message": f"{harness.name} could not push: {type(exc).__name__}"}])
        if not isinstance(delivery, Delivery):
            self._harness_failed(harness, TypeError(f"deliver returned {type(delivery).__name__}, not a Delivery"), "deliver")
            return Delivery(warnings=[{"code": "internal_error", "message": f"{harness.name} could not push: bad answer"}])
        if delivery.delivered and delivery.via:
            self.mailbox.mark_delivered(row["id"], delivery.via, delivery.evidence)
        elif delivery.accepted:
            # Remembered so status says so and nothing pushes it again; evidence comes later.
            self.mailbox.record_event(row["id"], "delivery_accepted", row["recipient"], None,
                                      {**delivery.evidence, "note": delivery.note or ACCEPTED_NOTE})
        elif delivery.unknown:
            # Remembered so a resend with the same id reports "unknown" and is not pushed blindly.
            self.mailbox.record_event(row["id"], "delivery_unknown", row["recipient"], None, delivery.evidence)
        elif self.mailbox.push_outcome(row["id"]) == "unknown":
            # A retry proved the earlier push absent: the outcome is known again (queued).
            self.mailbox.record_event(row["id"], "delivery_settled", row["recipient"], None, delivery.evidence)
        return delivery

    async def _announce(self, harness: Harness, row: Any, size: int, options: Mapping[str, Any]) -> Delivery:
        """Push a short notice instead of an envelope the host would cut: the model is told
        to read the message from its inbox, in pages; it stays queued until then."""
        from agent_link_core.budget import oversized_notice

        pushed = await harness.deliver(self.mailbox.row_dict(row), oversized_notice(row, size), options)
        if pushed.delivered:
            self.mailbox.record_event(row["id"], "announced", row["recipient"], pushed.via, {**pushed.evidence, "bytes": size})
        warning = {"code": "too_large_to_push",
                   "message": f"The message ({size} bytes) is larger than the recipient's host shows in one piece; "
                              "it is announced instead of pushed, and the recipient reads it from its inbox in pages.",
                   "details": {"bytes": size, "announced": pushed.delivered}}
        return Delivery(state="announced" if pushed.delivered else pushed.state, fields=pushed.fields,
                        warnings=[warning, *pushed.warnings], unknown=pushed.unknown, retryable=pushed.retryable)

    async def refresh_delivery(self, message_id: str) -> bool:
        """Ask the recipient's harness for late evidence of a push the host accepted (or
        whose answer was lost), and record delivery when it has some. Never pushes.

        :returns: True when the message became delivered now.
        """
        row = self.mailbox.get_row(message_id)
        if row is None or row["first_delivered_at"] is not None or self.mailbox.push_outcome(message_id) not in ("accepted", "unknown"):
            return False
        harness = self.harnesses.get(address_scheme(row["recipient"]))
        if harness is None:
            return False
        try:
            found = await harness.recheck(self.mailbox.row_dict(row))
        except Exception:  # a check that failed proves nothing; the outcome stays as it was
            log.exception("harness %s failed to recheck %s", harness.name, message_id)
            return False
        if found is None or not found.delivered or not found.via:
            return False
        return self.mailbox.mark_delivered(message_id, found.via, found.evidence)

    async def reply(
        self, *, caller: Caller, message_id: str, resolution: str = "reply", message: str | None = None,
        anticipation: str | None = None, reply_by: str | None = None, arguments: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None, metadata: Mapping[str, Any] | None = None, reply_id: str | None = None,
    ) -> dict[str, Any]:
        """Resolve a message addressed to the caller, sending the reply back to its sender.

        ``reply`` and ``decline`` need ``message`` (for decline: the reason); ``done`` takes
        an optional note, sent back only when given. ``metadata`` is stored with the note
        (e.g. ``envelopeFormat``, see :func:`agent_link_core.api.send_reliably`).
        ``reply_id`` (a ULID) is the id the answer is stored under and makes a retry safe:
        when the caller already resolved the message this way with this id and the same
        content, the first result comes back with ``duplicate: true`` (nothing stored or
        pushed again); other content under it is refused naming what differs.

        :raises AgentLinkError: ``not_found``, ``wrong_recipient``, ``already_resolved``,
            ``invalid_arguments`` (rule ``idempotency`` for a reused ``reply_id``),
            ``body_too_large``, ``no_current_session``.
        """
        self.require_caller(caller)
        row = self.mailbox.require(message_id)
        message_id = row["id"]  # ids are case-insensitive; the stored form is canonical
        if resolution in ("reply", "decline") and (message is None or not message.strip()):
            what = "a reason" if resolution == "decline" else "the reply text"
            raise invalid_arguments([{"path": "message", "rule": "required", "expected": f"{what} for resolution {resolution}"}])
        reply_msg = None
        caller, warnings = await prove_sender(self, caller)
        context = SendContext("reply_agent_link_message", dict(arguments or {}), None, True, dict(meta or {}))
        if (message is None or not message.strip()) and (anticipation is not None or reply_by is not None):
            raise invalid_arguments([{"path": "anticipation" if anticipation is not None else "replyBy", "rule": "requires_message",
                                      "expected": "a note in message, since labels describe the note sent back"}])
        if message is not None and message.strip():
            label, reply_by_ms = check_labels(anticipation, reply_by, False, now_ms())
            reply_msg = OutgoingMessage(
                id=reply_id or new_message_id(), sender=caller, to=row["from_addr"], recipient=row["from_addr"],
                body=check_body(message), anticipation=label, reply_by_ms=reply_by_ms, reply_to=message_id,
                metadata={**(metadata or {}), "resolution": resolution},
            )
        if reply_id is not None and self._answered_before(caller, row, reply_id, resolution, reply_msg):
            return {**self._reply_result(row, self.mailbox.get_row(reply_id), None, context.result), "duplicate": True,
                    **({"warnings": warnings} if warnings else {})}
        if reply_msg is not None and caller.address == row["recipient"]:
            warnings += self.hooks.before_send(reply_msg, context)
        res, reply_row = self.mailbox.resolve(
            # The reason as sanitized for the note (lone surrogates of undecodable input never reach disk).
            message_id, caller, resolution, reason=reply_msg.body if reply_msg is not None and resolution != "reply" else None,
            reply=reply_msg,
            result=context.result,
        )
        delivery = await self.push(reply_row, {}) if reply_row is not None else None
        if reply_row is not None:
            reply_row = self.mailbox.get_row(reply_row["id"])
        out = self._reply_result(row, reply_row, delivery, context.result)
        if reply_id is not None:
            out["duplicate"] = False
        if delivery is not None and delivery.warnings:
            warnings += delivery.warnings
        if warnings:
            out["warnings"] = warnings
        return out

    def _reply_result(self, row: Any, reply_row: Any, delivery: Delivery | None, extra: Mapping[str, Any]) -> dict[str, Any]:
        """What :meth:`reply` returns for the resolved message ``row`` and its answer ``reply_row`` (or None)."""
        state = self.mailbox.state(self.mailbox.stored(row["id"]))
        res = state.resolution or {}
        return {
            "messageId": reply_row["id"] if reply_row is not None else None,
            "replyToMessageId": row["id"],
            "target": {"address": row["from_addr"], "harness": address_scheme(row["from_addr"])},
            "delivery": _delivery_word(reply_row, delivery),
            "resolution": state.resolution,
            "status": state.status,
            "late": bool(res.get("late")),
            "anticipation": reply_row["anticipation"] if reply_row is not None else None,
            **extra,
        }

    def _answered_before(self, caller: Caller, row: Any, reply_id: str, kind: str, reply: OutgoingMessage | None) -> bool:
        """Whether an earlier call already resolved ``row`` as this one asks, under ``reply_id``
        (a retry: True). False when nothing was stored under ``reply_id`` yet.

        :raises AgentLinkError: ``invalid_arguments`` (rule ``idempotency``, ``details.differs``)
            when ``reply_id`` holds another message or another answer than this one.
        """
        from agent_link_core.mailbox import differing_fields

        stored = self.mailbox.get_row(reply_id)
        resolution = self.mailbox.state(row).resolution
        if stored is None:
            # a done without a note stores no message: the same resolution by the same caller is the retry
            return (reply is None and resolution is not None and resolution["kind"] == kind and resolution["by"] == caller.address
                    and resolution["replyMessageId"] is None)
        if reply is None:
            differs = ["message"]
        else:
            differs = differing_fields(stored, reply)
        earlier = json.loads(stored["metadata"] or "{}").get("resolution")
        if earlier != kind:
            differs.insert(0, "resolution")
        if not differs and (resolution is None or resolution["replyMessageId"] != reply_id):
            differs = ["replyToMessageId"]  # the same words stored as another message's answer
        if differs:
            what = f"its {', '.join(differs)} {'differs' if len(differs) == 1 else 'differ'}"
            raise invalid_arguments(
                [{"path": "replyMessageId", "rule": "idempotency", "expected": "the same answer as the first call with this id"}],
                f"Message id {reply_id} was already used for a different message: {what}.", differs=differs,
            )
        return True

    # -- reading -----------------------------------------------------------------------

    def begin_inbox_read(self, caller: Caller, mark: bool) -> tuple[bool, list[dict[str, Any]]]:
        """What every inbox read does first: note the caller's presence (a read that marks), and
        switch marking off, with a warning, when the database refuses writes (damaged, replaced).

        :returns: ``(mark, warnings)``: whether the read may mark, and the warnings to report.
        """
        from agent_link_core import presence

        refusal = self.store.damage() or self.store.replaced() if mark else None
        if mark and refusal is None:
            # Only a read that writes anyway notes presence: a peek never waits for a writer.
            try:
                presence.record(self.store, caller.address, "inbox")
            except AgentLinkError:
                pass  # busy: the marking reports it; presence is a hint
            return True, []
        if refusal is None:
            return mark, []
        # Reads go on where they can: nothing is marked delivered in a file that refuses writes.
        return False, [{"code": refusal.code, "message": refusal.message + " Nothing was marked delivered.",
                        "details": refusal.details, "hint": refusal.hint}]

    def inbox(self, caller: Caller, *, limit: int = 20, mark: bool = True, include_open: bool = True) -> dict[str, Any]:
        """The caller's open mail with envelopes; marks returned undelivered rows delivered."""
        self.require_caller(caller)
        mark, warnings = self.begin_inbox_read(caller, mark)
        rows, marked = self.mailbox.drain(caller.address, limit, mark=mark, include_open=include_open)
        views = []
        envelopes = []
        for row, state in zip(rows, self.mailbox.states(rows), strict=True):  # states read together, not per row
            self.mailbox.note_transition(row, state)
            view = self.mailbox.to_view(row, state)
            view["open"] = state.status in ("pending", "unresolved", "expired") if row["anticipation"] != "fyi" else row["delivered_at"] is None
            views.append(view)
            envelopes.append(self.mailbox.envelope(row))
        remaining = self.mailbox.count_open(caller.address, undelivered_only=True)
        return {
            "address": caller.address,
            "markedDelivered": marked,
            "messages": views,
            "openCount": sum(1 for v in views if v["open"]),
            "remainingCount": remaining,
            "renderedBlock": render_inbox(envelopes),
            **({"warnings": warnings} if warnings else {}),
        }

    def status(self, caller: Caller, message_id: str) -> dict[str, Any]:
        """A message's lifecycle, for its sender or recipient only (never the body)."""
        row = self.mailbox.require(message_id)
        message_id = row["id"]
        # By id an unidentified caller is "external": it reaches mail sent as external.
        Visibility(caller.address).require(row, f"the status of {message_id}")
        state = self.mailbox.state(row)
        self.mailbox.note_transition(row, state)
        view = self.mailbox.to_view(row, state)
        view.pop("bodyBytes", None)
        return {"messageId": message_id, "holder": row["recipient"], **{k: v for k, v in view.items() if k != "id"}}

    def inspect(
        self, caller: Caller, *, scope: str = "caller", from_address: str | None = None, to_address: str | None = None,
        reply_to: str | None = None, undelivered: bool = False, pending_ack: bool = False, since: str | None = None,
        limit: int = 50, include_bodies: bool = False,
    ) -> dict[str, Any]:
        """Messages sent or received by the caller (or all, when allowed), newest first."""
        view_rule = self.mailbox.visible_to(caller.address, all_mail=scope == "all")
        if scope != "all" and not caller.known:
            return {"scope": scope, "callerAddress": None, "messages": [],
                    "note": "The caller could not be identified, so no mail is shown."}
        clause, params = view_rule.sql("messages")
        clauses = [clause]
        if reply_to and is_ulid(reply_to.upper()):
            reply_to = reply_to.upper()
        for column, value in (("from_addr", from_address), ("recipient", to_address), ("reply_to", reply_to)):
            if value:
                clauses.append(f"{column} = ?")
                params.append(value)
        if undelivered:
            clauses.append("first_delivered_at IS NULL")
        if pending_ack:
            clauses.append("acknowledged_at IS NULL AND anticipation != 'fyi'")
        if since:
            clauses.append("sent_at >= ?")
            params.append(parse_iso_ms(since, "since"))
        where = " WHERE " + " AND ".join(clauses) if clauses else ""
        rows = self.store.conn.execute(
            f"SELECT * FROM messages{where} ORDER BY sent_at DESC, id DESC LIMIT ?", (*params, limit)
        ).fetchall()
        messages = self.mailbox.to_views(rows)
        if include_bodies:
            for row, view in zip(rows, messages, strict=True):
                view["envelope"] = self.mailbox.envelope(row)
        return {"scope": scope, "callerAddress": caller.address if caller.known else None, "messages": messages}

    def conversation(self, caller: Caller, message_id: str) -> dict[str, Any]:
        """The conversation of a message the caller sent or received (any message with
        ``AGENT_LINK_INSPECT_ALL``), oldest first, each message with its envelope.

        :raises AgentLinkError: ``not_found``, ``invalid_arguments``, ``permission_denied``.
        """
        from agent_link_core.conversation import conversation

        visibility = self.mailbox.visible_to(caller.address, all_mail=bool(self.config.get("AGENT_LINK_INSPECT_ALL")))
        return conversation(self.mailbox, visibility, message_id)

    async def wait(
        self, *, caller: Caller, agent: str, reply_to: str | None = None, timeout_ms: int = 60_000, poll_ms: int = 1000,
        progress: Progress | None = None, activity: Callable[[], Awaitable[dict[str, Any] | None]] | None = None,
        mark: bool = True,
    ) -> dict[str, Any]:
        """Wait for the resolution of ``reply_to`` (or, without it, for the oldest unread message
        from ``agent`` to the caller, else the next one to arrive). A timeout is a normal outcome.

        :param mark: mark the returned reply delivered (via ``wait``) as it is returned; False
            for a caller that marks it itself once the reply reached its reader (the CLI, after
            its output was written: :meth:`mark_taken`).
        :param progress: the tool call's progress reporter (the client sent a progress
            token): the wait reports progress every :data:`PROGRESS_EVERY_MS` and runs up to
            ``timeout_ms``. Without one a call waits at most :data:`MAX_WAIT_PER_CALL_MS`
            (clients cut tool calls after about a minute), and the result says ``capped``.
        :param activity: without ``reply_to``, a check called every poll that may end the
            wait with the target's own outcome (``turn_completed``, ``idle``; a harness's
            ``activity_check``).
        :returns: ``outcome`` reply | declined | done | unresolved | expired | turn_completed |
            idle | timeout, the reply (enveloped) when there is one, ``capped`` and
            ``requestedTimeoutMs`` when the cap applied.
        """
        start = time.monotonic()
        warnings = []
        budget = timeout_ms
        cap_ms, every_ms = self.wait_limits()
        capped = progress is None and budget > cap_ms
        if capped:
            budget = cap_ms
            warnings.append(wait_capped_warning(timeout_ms, cap_ms))
        next_progress = every_ms
        if not reply_to:
            self.require_caller(caller)  # only mail addressed to the caller could end this wait
        target, _, _ = await self.target_address(agent, caller) if not reply_to else (agent, None, {})
        if reply_to:
            row = self.mailbox.require(reply_to)
            reply_to = row["id"]
            # An unidentified caller is "external": it may wait only on mail sent as external.
            Visibility(caller.address).require(row, f"the answer to {reply_to}")
            target = row["recipient"]
        since = now_ms()
        key = f"reply:{reply_to}" if reply_to else f"from:{target}"
        self.waiting[key] = self.waiting.get(key, 0) + 1
        from agent_link_core import handoff

        noted = handoff.begin(self.store, caller.address, key) if caller.known else None
        taken: str | None = None
        push_left = caller.known
        # Armed before the first check: a commit after that check wakes the wait at once (a
        # commit before it, the check sees); poll_ms stays the fallback re-check.
        import asyncio

        wakeup = Wakeup(self.store.path)
        try:
            while True:
                result = self._wait_check(caller, target, reply_to, since, mark)
                if result is None and activity is not None and not reply_to:
                    result = await activity()
                waited = int((time.monotonic() - start) * 1000)
                if result is not None or waited >= budget:
                    out = result or {"outcome": "timeout"}
                    out.update({"waitedMs": waited, "timedOut": result is None, "target": {"address": target},
                                "harness": address_scheme(target)})
                    if capped:
                        out.update(capped=True, requestedTimeoutMs=timeout_ms)
                    if reply_to:
                        out["messageStatus"] = self.mailbox.state(self.mailbox.stored(reply_to)).status
                    if warnings:
                        out["warnings"] = warnings
                    taken = (out.get("reply") or {}).get("id")
                    return out
                if progress is not None and waited >= next_progress:
                    await progress(waited, budget, "waiting")
                    next_progress = waited + every_ms
                sleep_ms = min(poll_ms, budget - waited)
                if progress is not None:
                    sleep_ms = min(sleep_ms, max(next_progress - waited, 1))
                await wakeup.wait(sleep_ms / 1000)
        except asyncio.CancelledError:
            push_left = False  # cancelled: what it held stays queued for the next read, push or reminder
            raise
        finally:
            wakeup.close()
            self.waiting[key] -= 1
            if not self.waiting[key]:
                del self.waiting[key]
            handoff.end(self.store, noted)
            if push_left:
                await self._push_left_by_wait(caller.address, taken)

    async def _push_left_by_wait(self, address: str, taken: str | None) -> None:
        """Push the mail pushes left to a wait of ``address`` that this wait did not take
        (``taken``: the message it returned), unless another running wait holds it still."""
        from agent_link_core.handoff import HELD_EVENT

        try:
            for row in self.mailbox.open_for(address, 50, undelivered_only=True):
                if row["id"] != taken and self.mailbox.has_event(row["id"], HELD_EVENT) and not self.held_by_wait(row):
                    await self.push(row, {})
        except AgentLinkError as exc:  # the wait's own answer stands; the mail stays queued for the next read or push
            log.warning("could not push the mail a wait of %s left: %s", address, exc.message)

    def wait_limits(self) -> tuple[int, int]:
        """``(cap, progress interval)`` in ms: ``AGENT_LINK_WAIT_CAP_MS`` (default
        :data:`MAX_WAIT_PER_CALL_MS`) and ``AGENT_LINK_WAIT_PROGRESS_MS`` (default
        :data:`PROGRESS_EVERY_MS`)."""
        return (int(self.config.get("AGENT_LINK_WAIT_CAP_MS") or MAX_WAIT_PER_CALL_MS),
                int(self.config.get("AGENT_LINK_WAIT_PROGRESS_MS") or PROGRESS_EVERY_MS))

    def _wait_check(self, caller: Caller, target: str, reply_to: str | None, since: int, mark: bool = True) -> dict[str, Any] | None:
        if reply_to:
            row = self.mailbox.stored(reply_to)
            state = self.mailbox.state(row)
            if state.resolution is not None:
                outcome = {"reply": "reply", "decline": "declined", "done": "done"}[state.resolution["kind"]]
                out: dict[str, Any] = {"outcome": outcome, "resolution": state.resolution}
                reply_id = state.resolution.get("replyMessageId")
                if reply_id:
                    out["reply"] = self._take_reply(caller, reply_id, mark)
                return out
            if state.status in ("unresolved", "expired"):
                self.mailbox.note_transition(row, state)
                return {"outcome": state.status}
            return None
        if not caller.known:
            return None
        # Unread mail from the target first (it may have arrived while this server was down or
        # between two waits), then anything that arrives during the wait, oldest first.
        row = self.store.conn.execute(
            "SELECT id, sent_at FROM messages WHERE from_addr = ? AND recipient = ? AND (delivered_at IS NULL OR sent_at >= ?)"
            " ORDER BY sent_at, id LIMIT 1",
            (target, caller.address, since),
        ).fetchone()
        if row is None:
            return None
        return {"outcome": "reply", "reply": self._take_reply(caller, row["id"], mark), "arrivedBeforeWait": row["sent_at"] < since}

    def _take_reply(self, caller: Caller, reply_id: str, mark: bool = True) -> dict[str, Any]:
        """A reply returned by a wait reaches the caller here: it counts as delivered (unless
        ``mark`` is False: then :meth:`mark_taken` does it once the caller showed it)."""
        row = self.mailbox.stored(reply_id)
        shown = row["delivered_via"] if row["first_delivered_at"] is not None and row["delivered_via"] not in (None, "wait") else None
        if shown is None and self.mailbox.push_outcome(reply_id) == "accepted":
            shown = "accepted push"  # the host took a push and shows it in its own time: it is on its way
        if shown is None and mark and self.mark_taken(caller, reply_id):
            row = self.mailbox.stored(reply_id)
        view = self.mailbox.to_view(row)
        if shown is not None and caller.known and row["recipient"] == caller.address:
            # it already reached the caller another way (a push, an inbox read): said, not repeated
            view["alreadyDelivered"] = {"via": shown, "note": f"This message already reached you ({shown}); it is not repeated here."}
        else:
            view["envelope"] = self.mailbox.envelope(row)
        return view

    def mark_taken(self, caller: Caller, reply_id: str) -> bool:
        """Mark a reply a wait returned delivered (via ``wait``) when ``caller`` is its recipient.

        :returns: True when it became delivered now.
        :raises AgentLinkError: ``state_busy`` / ``state_io_error`` when the write fails.
        """
        row = self.mailbox.stored(reply_id)
        return caller.known and row["recipient"] == caller.address and self.mailbox.mark_delivered(reply_id, "wait")

    # -- health ------------------------------------------------------------------------

    def health(self, meta: Mapping[str, Any] | None = None, include_caller_context: bool = False) -> dict[str, Any]:
        """Everything a person needs to tell whether agent-link works here."""
        caller = self.caller(meta)
        try:
            pending = self.mailbox.count_open(caller.address, undelivered_only=True) if caller.known else 0
        except sqlite3.DatabaseError:  # reported by the integrity line below
            pending = None
        detection = self.host_detection(caller)
        out: dict[str, Any] = {
            "version": __version__,
            "host": detection["host"],
            "hostDetection": detection,
            "address": caller.address,
            "addressSource": caller.source,
            "stateDir": {
                "path": self.config.state_dir,
                "source": self.config.sources["AGENT_LINK_STATE_DIR"],
                "exists": os.path.isdir(self.config.state_dir),
                "private": _private(self.config.state_dir),
                "writable": os.access(self.config.state_dir, os.W_OK | os.X_OK),
            },
            # ok, integrity, walBytes, walLimitBytes, and the refusal with its recovery step when not ok.
            "database": {"path": self.config.db_path, "pendingForCaller": pending, **self.store.check_health(),
                         **({"ok": False, "readOnly": True, "problem": self.read_only.to_dict()} if self.read_only else {})},
            "env": self.config.env_report(),
            "settings": {
                "file": self.config.settings_file,
                # where each setting not at its default came from: a variable's name or settings-file
                "sources": {name: src for name, src in self.config.sources.items() if src != "default"},
                "otherStateDirs": state_dirs.others(self.config.state_dir, self.env),
                "warnings": settings_warnings(self.hooks.tools(), self.hooks.tool_owners(), self.config.get("AGENT_LINK_TOOLS")),
            },
            "reminders": {
                "limit": self.config.reminder_limit,
                "intervalMs": self.config.reminder_interval_ms,
                "warnings": list(self.config.warnings),
            },
            "harnesses": {name: self._harness_health(h) for name, h in list(self.harnesses.items())},
            # the negotiated MCP revision and client; None outside an MCP server
            "mcp": self.mcp_peer.view() if self.mcp_peer is not None else None,
            "sections": self.hooks.health_sections(),
        }
        self.hooks.tools()  # a refused tool is a plugin problem health must show
        out["plugins"] = self.plugins_view()
        if out["stateDir"]["exists"] and not out["stateDir"]["private"]:
            # left as it is (it may be shared on purpose), but said, with the command that fixes it
            out["stateDir"]["warning"] = {
                "code": "state_dir_not_private", "message": "other users can open the state dir, where the mailbox is",
                "hint": f"Run `chmod 700 {shlex.quote(self.config.state_dir)}` unless it is shared on purpose."}
        if include_caller_context:
            out["callerContext"] = {"meta": json.loads(json.dumps(meta or {}, default=str)), "source": caller.source}
        return out


    def plugins_view(self) -> dict[str, Any]:
        """What loading found and every plugin problem: this process's (``problems``) and
        those other agent-link processes met in the last day (``elsewhere``)."""
        view = self.plugin_report.as_dict()
        view["elsewhere"] = problem_log.recent_elsewhere(self.config.state_dir, view["problems"])
        return view

    def _harness_health(self, harness: Harness) -> dict[str, Any]:
        marker = object()
        section = self.hooks.guard_harness(harness, "health", harness.health, marker)
        if section is marker:
            return {"error": "this harness's health failed; see plugins.problems"}
        why = f"returned {type(section).__name__}, not a dict" if not isinstance(section, dict) else oversize(section, MAX_HEALTH_BYTES)
        if why is not None:  # not JSON, or too big to travel: it would break everyone's health
            self._harness_failed(harness, TypeError(why), "health")
            return {"error": "this harness's health failed; see plugins.problems"}
        return section

    def mcp_capabilities(self) -> dict[str, dict[str, Any]]:
        """The experimental MCP capabilities every harness offers (a failing harness offers none)."""
        capabilities: dict[str, dict[str, Any]] = {}
        for harness in list(self.harnesses.values()):
            offered = self.hooks.guard_harness(harness, "mcp_capabilities", partial(harness.mcp_capabilities, self), {})
            if not isinstance(offered, dict) or not all(isinstance(k, str) and isinstance(v, dict) for k, v in offered.items()):
                self._harness_failed(harness, TypeError(f"returned {type(offered).__name__}, not {{name: dict}}"), "mcp_capabilities")
                continue
            capabilities.update(offered)
        return capabilities


def _check_session(result: Any, plugin: str) -> str | None:
    return None if isinstance(result, Session) else f"returned {type(result).__name__}; expected a Session or None"


LOG_LEVELS = {"error": logging.ERROR, "warn": logging.WARNING, "info": logging.INFO, "debug": logging.DEBUG}


def escaped_size_warnings(body: str) -> list[dict[str, Any]]:
    """``[body_escapes_large]`` when ``body``'s escaped form (its envelope text) is longer than
    :data:`~agent_link_core.envelope.MAX_ESCAPED_CHARS`: it reaches the recipient whole, but a
    reader may get it in pages (``read_agent_link_inbox`` with ``messageId`` and ``offset``)."""
    escaped = len(escape_text(body, cap=MAX_ENVELOPE_BODY_CHARS))
    if escaped <= MAX_ESCAPED_CHARS:
        return []
    return [{"code": "body_escapes_large",
             "message": f"The body escapes to {escaped} characters in its envelope (characters such as < and & take several), "
                        f"more than the {MAX_ESCAPED_CHARS} one read may show: nothing is cut, but the recipient may read it in pages.",
             "details": {"bodyBytes": len(body.encode("utf-8")), "escapedChars": escaped, "limitChars": MAX_ESCAPED_CHARS}}]


def wait_capped_warning(requested_ms: int, cap_ms: int = MAX_WAIT_PER_CALL_MS) -> dict[str, Any]:
    """The ``wait_capped`` warning of a wait cut to ``cap_ms``."""
    return {"code": "wait_capped", "details": {"requestedTimeoutMs": requested_ms, "waitedAtMostMs": cap_ms},
            "message": f"Without a progress token one call waits at most {cap_ms} ms; call again to keep waiting "
                       "(or send a progress token to wait up to timeoutMs)."}


def configure_logging(config: Config) -> None:
    """Send agent-link's logs to a private file when debugging or a level is set.

    ``AGENT_LINK_DEBUG`` (level debug) or ``AGENT_LINK_LOG_LEVEL`` turn it on; the file is
    ``AGENT_LINK_LOG_FILE`` or ``<state>/logs/agent-link.log`` (0600, dir 0700). Otherwise
    only warnings reach stderr. Never stdout: that is the MCP transport.
    """
    level_name = "debug" if config.get("AGENT_LINK_DEBUG") else config.get("AGENT_LINK_LOG_LEVEL")
    logger = logging.getLogger("agent_link_core")
    if level_name is None or any(getattr(h, "_agent_link", False) for h in logger.handlers):
        return
    path = config.get("AGENT_LINK_LOG_FILE") or os.path.join(config.state_dir, "logs", "agent-link.log")
    handler: logging.Handler
    try:
        ensure_private_dir(os.path.dirname(path))
        fd = os.open(path, os.O_CREAT | os.O_APPEND | os.O_WRONLY, 0o600)
        try:
            if os.fstat(fd).st_mode & 0o077:
                os.fchmod(fd, 0o600)  # created by someone else's umask, or an older version
        finally:
            os.close(fd)
        handler = logging.FileHandler(path, encoding="utf-8")
    except (OSError, AgentLinkError) as exc:
        # A logging problem must not stop agent-link: log to stderr (never stdout, the MCP
        # transport) and say once what to fix.
        reason = exc.message if isinstance(exc, AgentLinkError) else (exc.strerror or str(exc))
        variable = "AGENT_LINK_LOG_FILE" if config.get("AGENT_LINK_LOG_FILE") else "AGENT_LINK_STATE_DIR"
        sys.stderr.write(f"agent-link: warning: cannot write the log file {path} ({reason}); logging to stderr. "
                         f"Fix or unset {variable}.\n")
        handler = logging.StreamHandler(sys.stderr)
    handler._agent_link = True  # type: ignore[attr-defined]
    handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(LOG_LEVELS[level_name])


def read_only_error(state_dir: str) -> AgentLinkError:
    """The refusal of a state dir this process can read but not write (``health`` reports it)."""
    return AgentLinkError(
        "state_io_error",
        f"The state dir {state_dir} is not writable: mail can be read, but nothing can be sent, marked read or recorded.",
        {"path": ".", "errno": "EACCES", "reason": "read_only"},
        hint=f"Make it writable for this user (`chmod u+w {shlex.quote(state_dir)}`, or remount it read-write), "
             "or point AGENT_LINK_STATE_DIR at a writable directory.",
    )


def _name_the_setting(exc: AgentLinkError, config: Config) -> AgentLinkError:
    """Point a state error at the variable that chose the path, so the fix is obvious."""
    if exc.code != "state_io_error" or exc.details.get("reason") in ("replaced", "orphan_wal", "corrupt", "disk_full"):
        return exc
    if config.get("AGENT_LINK_MAILBOX_PATH"):
        variable, path = "AGENT_LINK_MAILBOX_PATH", config.db_path
    else:
        variable, path = "AGENT_LINK_STATE_DIR", config.state_dir
    source = config.sources.get(variable, "default")
    named = variable if source in (variable, "default") else f"{source} (read as {variable})"
    if exc.details.get("reason") == "not_agent_link":
        what = "an agent-link database or a path that does not exist yet"
    else:
        what = "a path this user can create and write" + (" (a directory)" if variable == "AGENT_LINK_STATE_DIR" else "")
    exc.hint = f"{named} is {path}; point it at {what}, or unset it."
    return exc


def _attach(harness: Harness, app: App) -> bool:
    harness.attach(app)
    return True


def _private(path: str) -> bool:
    """True when only the owner can enter ``path`` (no group or other permission bits)."""
    try:
        return os.stat(path).st_mode & 0o077 == 0
    except OSError:
        return False


def _delivery_word(reply_row: Any, delivery: Delivery | None) -> str:
    if reply_row is None:
        return "none"
    if (delivery is not None and delivery.delivered) or reply_row["first_delivered_at"] is not None:
        return "delivered"
    return "queued"


def message_summary(app: App, outcome: SendOutcome) -> dict[str, Any]:
    """The common result fields of a send (message_agent, CLI send)."""
    row = app.mailbox.stored(outcome.message["id"])
    state = app.mailbox.state(row)
    delivery = outcome.delivery
    out: dict[str, Any] = {
        "messageId": row["id"],
        "to": row["recipient"],
        "harness": address_scheme(row["recipient"]),
        "delivery": state.delivery if state.delivery != "acknowledged" else "delivered",
        "deliveredVia": row["delivered_via"],
        "deliveryState": delivery.state if delivery is not None else ("delivered" if row["first_delivered_at"] else "queued"),
        "anticipation": row["anticipation"],
        "replyBy": iso(row["reply_by"]) if row["reply_by"] else None,
        "inReplyTo": row["reply_to"],
        "messageStatus": state.status,
        "duplicate": not outcome.created,
        "via": outcome.via,
    }
    if state.delivery_note:
        out["deliveryNote"] = state.delivery_note
    out.update(outcome.result_fields)
    if delivery is not None:
        out.update(delivery.fields)
        if delivery.unknown:
            out["deliveryState"] = "unknown"
    warnings = list(outcome.warnings) + (list(delivery.warnings) if delivery is not None else [])
    if outcome.address_warning is not None:
        warnings.append(outcome.address_warning)
    if warnings:
        out["warnings"] = warnings
    return out
