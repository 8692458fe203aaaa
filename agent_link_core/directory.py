"""Listing and resolving agents across every harness, with fuzzy ranking: a tie at the top score is ``ambiguous``
rather than a guess, and a harness that could not be read is reported in ``providers``."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from agent_link_core.addresses import MAX_TARGET_CHARS
from agent_link_core.boundary import expect, is_session, plain
from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.harness import Harness, SessionListing, acall_harness, harness_fault
from agent_link_core.lazy import Struct
from agent_link_core.mailbox import iso
from agent_link_core.model import DEFAULT_RECEIVE, Caller, Session, address_scheme, is_address

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any
    from agent_link_core.app import App

LIST_TIMEOUT_S = 20.0
# Field weights for ranking (after the original's thread search, docs/behaviour.md §16.9).
WEIGHTS = (("id", 120), ("title", 90), ("address", 60), ("cwd", 30))


#: a ``list_sessions`` answer a listing can show
LISTING = expect(lambda v: type(v) is SessionListing and type(v.provider) is dict and plain(v.provider) and type(v.sessions) in (list, tuple)
                 and all(map(is_session, v.sessions)), "expected a SessionListing of Session records of the documented types")


def session_view(session: Session) -> dict[str, Any]:
    """A session as list_agents / resolve_agent show it."""
    view = {
        "address": session.address, "harness": session.harness, "id": session.id, "title": session.title, "cwd": session.cwd,
        "surface": list(session.surface), "loaded": session.loaded, "archived": session.archived,
        "lastActivityAt": iso(session.last_activity_ms), "receive": dict(session.receive or DEFAULT_RECEIVE),
    }
    return {**view, **{k: v for k, v in (session.extra or {}).items() if k not in view}}  # the harness's own never replace these


async def gather_listings(
    app: App, *, harnesses: Mapping[str, Harness] | None = None, only: str | None = None, include_archived: bool = False,
    limit: int = 200,
) -> dict[str, SessionListing]:
    """``{harness name: listing}`` of every harness of ``app`` (or of ``harnesses``, or only ``only``), asked concurrently
    through the boundary within :data:`LIST_TIMEOUT_S`; a failure becomes a provider report, a fault its plugin's problem."""
    import asyncio

    async def one(harness: Harness) -> SessionListing:
        try:
            listing = await acall_harness(
                app.hooks, harness, "list_sessions", lambda: harness.list_sessions(include_archived=include_archived, limit=limit),
                bound_s=LIST_TIMEOUT_S, default=SessionListing(provider={"available": False, "reason": "harness_failed"}, complete=False),
                check=LISTING, on_timeout=lambda: SessionListing(provider={"available": False, "reason": "timeout"}, complete=False))
        except AgentLinkError as exc:
            return SessionListing(provider={"available": False, "reason": exc.code, "error": exc.to_dict()}, complete=False)
        if len(listing.sessions) > limit:
            harness_fault(app.hooks, harness, "list_sessions", f"returned {len(listing.sessions)} sessions; at most {limit} were asked for")
            newest = sorted(listing.sessions, key=lambda s: -(s.last_activity_ms or 0))[:limit]
            return SessionListing(newest, listing.provider, complete=False)
        return listing

    chosen_from = app.harnesses if harnesses is None else harnesses
    # by name first: asking one harness builds only that one (a declared harness is built on access)
    chosen = {n: h for n in list(chosen_from) if only in (None, "all", n) and (h := chosen_from.get(n)) is not None}
    results = await asyncio.gather(*(one(h) for h in chosen.values()))
    return dict(zip(chosen, results))


#: how deep a cursor may page (sessions before it); harnesses are asked for this many at most
MAX_CURSOR_DEPTH = 5000


class Page(Struct, frozen=True):
    """One page of a session listing (:func:`page_of`), newest first; ``next_cursor`` None past :data:`MAX_CURSOR_DEPTH`,
    ``first`` when no cursor was given, ``filtered_out``: ``{filter name: sessions it left out}``."""

    sessions: list[Session]
    has_more: bool
    next_cursor: str | None
    first: bool
    filtered_out: dict[str, int]


def encode_cursor(shown: int, last: Session) -> str:
    """An opaque cursor for the page after ``last``, ``shown`` sessions deep: base64url JSON of a place in the newest-first
    order, not an offset, so a session active meanwhile is not shown twice."""
    import base64  # only listings page: a send looks sessions up without it

    raw = json.dumps({"v": 1, "n": shown, "t": last.last_activity_ms or 0, "a": last.address}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None, tool: str) -> tuple[int, int, str] | None:
    """``(sessions shown before, last activity ms, address)`` of a cursor from :func:`encode_cursor`; None for no cursor.
    :raises AgentLinkError: ``invalid_arguments`` (path ``cursor``) for anything else."""
    if cursor in (None, ""):
        return None
    import base64
    import binascii

    bad = invalid_arguments([{"path": "cursor", "rule": "format", "expected": f"the nextCursor of an earlier {tool} answer"}])
    if not isinstance(cursor, str) or len(cursor) > 1000:
        raise bad
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        shown, at, address = data["n"], data["t"], data["a"]
    except (ValueError, TypeError, KeyError, binascii.Error):
        raise bad from None
    if not (data.get("v") == 1 and type(shown) is int and 0 < shown <= MAX_CURSOR_DEPTH and type(at) is int
            and isinstance(address, str)):
        raise bad
    return shown, at, address


def was_cut(listings: Mapping[str, SessionListing], depth: int) -> bool:
    """Whether a harness stopped at the ``depth`` it was asked for."""
    return any(not listing.complete and len(listing.sessions) >= depth for listing in listings.values())


def listing_depth(cursor: tuple[int, int, str] | None, limit: int) -> int:
    """How many sessions each harness must list for the page a cursor names (at least 200 past the cursor, so that a page
    whose filters leave most out still moves on)."""
    shown = cursor[0] if cursor else 0
    return min(shown + max(limit + 1, 200), MAX_CURSOR_DEPTH + limit + 1)


def page_of(sessions: list[Session], cursor: tuple[int, int, str] | None, limit: int,
            filters: list[tuple[str, Callable[[Session], bool]]], *, cut: bool) -> Page:
    """Sort ``sessions`` newest first (stable), skip past ``cursor``'s session (or its old place in time) and collect up to
    ``limit`` that pass every filter (``(name, keep)``, in order); the next cursor counts the sessions looked at.

    :param cut: a source stopped at the depth asked (:func:`was_cut`): the page says ``has_more`` even when it ran out.
    """
    ordered = sorted(sessions, key=lambda s: -(s.last_activity_ms or 0))
    if cursor is not None:
        _, at, address = cursor
        mark = next((i for i, s in enumerate(ordered) if s.address == address and (s.last_activity_ms or 0) == at), None)
        ordered = ordered[mark + 1:] if mark is not None else [s for s in ordered if (s.last_activity_ms or 0) < at]
    counts = {name: 0 for name, _ in filters}
    page: list[Session] = []
    looked = 0
    for session in ordered:
        if len(page) == limit:
            break
        looked += 1
        for name, keep in filters:
            if not keep(session):
                counts[name] += 1
                break
        else:
            page.append(session)
    rest = ordered[looked:]
    last = ordered[looked - 1] if looked else None
    more = last is not None and (cut or any(all(keep(s) for _, keep in filters) for s in rest))
    depth = (cursor[0] if cursor else 0) + looked
    next_cursor = encode_cursor(depth, last) if more and last is not None and depth <= MAX_CURSOR_DEPTH else None
    return Page(page, more, next_cursor, cursor is None, counts)


def providers_view(listings: Mapping[str, SessionListing]) -> dict[str, Any]:
    """``{harness: provider report + count + complete}`` for list results."""
    return {name: {**listing.provider, "count": len(listing.sessions), "complete": listing.complete} for name, listing in listings.items()}


def score(session: Session, query: str) -> tuple[int, list[str]]:
    """Rank ``session`` for ``query``: exact x4, prefix x3, contains x2, all words x1."""
    q = query.strip().lower()
    words = q.split()
    total, reasons = 0, []
    for field_name, weight in WEIGHTS:
        value = str(getattr(session, field_name, "") or "").lower()
        if not value or not q:
            continue
        if value == q:
            factor, why = 4, "exact"
        elif value.startswith(q):
            factor, why = 3, "prefix"
        elif q in value:
            factor, why = 2, "contains"
        elif words and all(w in value for w in words):
            factor, why = 1, "words"
        else:
            continue
        total += weight * factor
        reasons.append(f"{field_name}:{why}")
    return total, reasons


class Directory:
    """The agents every harness knows, for one App (``app.directory``, whose harnesses, hooks and database it reads)."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.hooks, self.store, self.harnesses = app.hooks, app.store, app.harnesses
        # plain addresses a plugin's resolve_address said are served elsewhere ("served": true)
        self.served_elsewhere: set[str] = set()

    def check_harness(self, harness: str, present: list[Session] | None = None) -> None:
        """Refuse a harness filter that names nothing here (``present``: ``hooks.present_sessions`` of it, if known).
        :raises AgentLinkError: ``invalid_arguments`` (path ``harness``, rule ``enum``) naming the known harnesses."""
        if harness == "all" or harness in self.harnesses or (self.hooks.present_sessions(harness) if present is None else present):
            return
        known = sorted({*self.harnesses, *(s.harness for s in self.hooks.present_sessions("all"))})
        raise invalid_arguments([{"path": "harness", "rule": "enum",
                                  "expected": f"all or one of {', '.join(known) or 'no harness (none is installed)'}"}])

    async def list_agents(
        self, *, harness: str = "all", loaded: bool | None = None, surface: str | None = None,
        include_archived: bool = False, limit: int = 20, cursor: str | None = None,
    ) -> dict[str, Any]:
        """Sessions of every harness, newest first, filtered, a page at a time, with provider reports. ``complete``: every
        session the sources hold for the filters is here; else ``hasMore`` and ``nextCursor`` (pass it back as ``cursor``).
        :raises AgentLinkError: ``invalid_arguments`` (path ``cursor``) for a cursor this method did not give."""
        position = decode_cursor(cursor, "list_agents")
        depth = listing_depth(position, limit)
        listings = await gather_listings(self.app, only=harness, include_archived=include_archived, limit=depth)
        sessions = [s for listing in listings.values() for s in listing.sessions] + self.hooks.present_sessions(harness)
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
            self.app.hooks.call("agent_link_sessions_listed", sessions=titled)
        providers = providers_view(listings)
        return {
            "sessions": [session_view(s) for s in page.sessions], "providers": providers,
            "complete": page.first and not page.has_more and all(p["complete"] for p in providers.values()),
            "hasMore": page.has_more, "nextCursor": page.next_cursor,
            "filters": {"harness": harness, "loaded": loaded, "surface": surface, "includeArchived": include_archived},
            "filteredOut": page.filtered_out,
        }

    async def resolve_agent(self, query: str, *, harness: str = "all", limit: int = 10, caller: Caller | None = None) -> dict[str, Any]:
        """Resolve an address, a bare id or fuzzy text; ``status`` is resolved, ambiguous or not_found (a verdict, not an error)."""
        caller = caller or Caller()
        query = query.strip()
        out: dict[str, Any] = {"query": query, "best": None, "candidates": [], "via": None}

        def resolved(best: dict[str, Any], **more: Any) -> dict[str, Any]:
            return {**out, "status": "resolved", "best": best, "candidates": [best], **more}

        if is_address(query):
            try:
                found = await self._exact(query, caller, allow_archived=True)
            except AgentLinkError as exc:  # not found is a verdict here, not an error
                if exc.code not in ("not_found", "ambiguous"):
                    raise
                return {**out, "status": exc.code, "candidates": exc.details.get("candidates", []),
                        "via": query if query.startswith("role:") else None}
            if found is None:  # a role, and no plugin resolves roles
                return {**out, "status": "not_found"}
            return resolved(found[0], via=found[1])
        import asyncio

        chosen = [h for h in self.harnesses.values() if harness in ("all", h.name)]
        direct = [s for s in await asyncio.gather(*(self.app._get_session(h, query) for h in chosen)) if s is not None]
        if len(direct) == 1:  # one lookup beats scanning listings that may be capped
            return resolved(session_view(direct[0]))
        listings = await gather_listings(self.app, only=harness, include_archived=True)
        # the live plain addresses too, as list_agents lists them: a bare id finds those sessions as well
        sessions = [s for listing in listings.values() for s in listing.sessions] + self.hooks.present_sessions(harness)
        exact = [s for s in sessions if s.id == query or query in s.aliases]
        providers = providers_view(listings)
        if len(exact) == 1:
            return resolved(session_view(exact[0]), providers=providers)
        if len(exact) > 1:
            views = [session_view(s) for s in exact]
            return {**out, "status": "ambiguous", "candidates": views, "providers": providers,
                    "selection": {"ambiguous": True, "tiedCount": len(views), "matchReasons": ["id:exact"]}}
        # the best by score, then last activity; a tie at the top score is ambiguous
        scored = sorted(((*score(s, query), s) for s in sessions), key=lambda t: (-t[0], -(t[2].last_activity_ms or 0)))
        scored = [t for t in scored if t[0] > 0]
        tied = sum(1 for t in scored if t[0] == scored[0][0])
        candidates = [{**session_view(s), "score": p, "matchReasons": r} for p, r, s in scored[:limit]]
        ambiguous = tied > 1
        status = "not_found" if not candidates else ("ambiguous" if ambiguous else "resolved")
        return {
            **out, "status": status, "best": candidates[0] if status == "resolved" else None,
            "candidates": candidates, "providers": providers,
            "selection": {"ambiguous": ambiguous, "tiedCount": tied, "matchReasons": candidates[0]["matchReasons"] if candidates else []},
        }

    async def target_address(self, to: str, caller: Caller, *, allow_archived: bool = False) -> tuple[str, str | None, dict[str, Any]]:
        """Turn a ``to`` argument into ``(recipient address, via, metadata)``; ``allow_archived``: an exact address may
        name an archived session (fuzzy queries never pick one).
        :raises AgentLinkError: ``not_found`` / ``ambiguous`` with candidates, ``archived``."""
        if is_address(to):
            found = await self._exact(to, caller, allow_archived=allow_archived)
            if found is None:
                raise AgentLinkError("not_found", f"No plugin resolves {to}.", {"role": to, "candidates": []},
                                     hint="Install the roles plugin (agent-link-roles) to address roles.")
            return found[0]["address"], found[1], found[2]
        verdict = await self.resolve_agent(to, caller=caller)
        if verdict["status"] == "resolved":
            best = verdict["best"]
            if best.get("archived"):
                raise AgentLinkError("archived", f"{best['address']} is archived and cannot receive mail.", {"address": best["address"]})
            # a session of an installed harness that another plugin listed (served elsewhere)
            owned = address_scheme(best["address"]) in self.harnesses
            claimed = self.hooks.call("agent_link_resolve_elsewhere", address=best["address"]) if owned else None
            return best["address"], None, {} if claimed is None else {**(claimed.get("metadata") or {}), "elsewhere": True}
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

    async def _exact(self, to: str, caller: Caller, *, allow_archived: bool) -> tuple[dict[str, Any], str | None, dict[str, Any]] | None:
        """An exact address as ``(its view, via, the message's metadata)``; None for a role no plugin resolves.
        :raises AgentLinkError: ``not_found`` (no such session of its harness), ``archived``, a plugin's ``not_found`` /
            ``ambiguous``."""
        scheme, _, ident = to.partition(":")
        owner = self.harnesses.get(scheme)  # None too when its harness cannot be built (reported)
        if owner is not None:
            session = await self.app._get_session(owner, ident)
            if session is not None:
                if session.archived and not allow_archived:
                    raise AgentLinkError("archived", f"{to} is archived and cannot receive mail.", {"address": to})
                return session_view(session), None, {}
            if (claimed := self.hooks.call("agent_link_resolve_elsewhere", address=to)) is None:
                raise AgentLinkError("not_found", f"No session {to} is known.", {"query": to, "candidates": []})
            view = {"address": to, "harness": scheme, **(claimed.get("session") or {})}
            return view, None, {**(claimed.get("metadata") or {}), "elsewhere": True}
        routed = await self.hooks.acall("agent_link_resolve_address", address=to, caller_address=caller.address)
        if routed is not None:
            if routed.get("served") is True:
                self.served_elsewhere.add(routed["address"])
            view = {"address": routed["address"], "harness": address_scheme(routed["address"])}
            return view, routed.get("via"), dict(routed.get("metadata") or {})
        return None if scheme == "role" else ({"address": to, "harness": scheme, "known": False}, None, {})

    async def resolve_target(self, target: str, caller: Caller) -> str:
        """Turn a CLI target into a recipient address: an address, a form a plugin resolves (``agent_link_resolve_address``:
        a contact alias of the listings plugin, ``role:<name>`` ...), else a bare id found by a complete scan of every
        harness (else refused).

        :raises AgentLinkError: ``invalid_arguments`` (longer than :data:`MAX_TARGET_CHARS`), ``not_found``, ``ambiguous``,
            ``archived``, or ``<harness>_unavailable`` when a scan was incomplete.
        """
        target = target.strip()
        target.encode()  # UnicodeEncodeError for an argument that is not UTF-8: a usage error (cli_run.guarded), before plugins see it
        if len(target) > MAX_TARGET_CHARS:  # as message_agent's to
            raise invalid_arguments([{"path": "to", "rule": "maxLength", "expected": f"at most {MAX_TARGET_CHARS} characters"}])
        if is_address(target):
            return (await self.target_address(target, caller))[0]
        routed = await self.hooks.acall("agent_link_resolve_address", address=target, caller_address=caller.address)
        if routed is not None:
            return routed["address"]
        listings = await gather_listings(self.app, include_archived=True, limit=100_000)
        matches = [s for listing in listings.values() for s in listing.sessions if s.id == target or target in s.aliases]
        incomplete = [name for name, listing in listings.items() if not listing.complete]
        if not matches and not incomplete:  # a listing may leave a session out (one not listed yet): ask by exact id
            for harness in self.harnesses.values():
                try:
                    found = await self.app._get_session(harness, target)  # a plugin's failure is reported there
                except AgentLinkError:
                    found = None
                if found is not None and found.id == target:
                    matches.append(found)
        if len(matches) > 1:
            raise AgentLinkError("ambiguous", f"{target} is known to several harnesses or endpoints.",
                                 {"query": target, "candidates": [{"address": s.address} for s in matches[:5]]},
                                 hint="Use the full address or a contact alias.")
        if incomplete:
            raise AgentLinkError(f"{incomplete[0]}_unavailable",
                                 f"Could not finish listing {incomplete[0]} sessions, so {target} cannot be resolved safely.",
                                 {"searched": incomplete}, hint="Use the full address, or retry when every endpoint answers.")
        if not matches:
            close = self.hooks.suggest_addresses(target)  # the presence plugin's: "teambob" finds team:bob
            raise AgentLinkError("not_found", f"No session has the id {target}, and no plugin knows it as a name (such as a contact alias).",
                                 {"query": target, "candidates": [{"address": a} for a in close]},
                                 hint=(f"Did you mean {' or '.join(close)}? " if close else "")
                                 + "An address is harness:id (for example team:bob, or <harness>:<session id>); "
                                   "list_agents lists the sessions.")
        if matches[0].archived:
            raise AgentLinkError("archived", f"{matches[0].address} is archived.", {"address": matches[0].address})
        return matches[0].address
