"""The listings behind ``agent-link sessions``, ``who``, ``find`` and ``contacts`` (short aliases
for sessions: trimmed, lower case, unique, one per session): the commands' code, apart from the
tools' :class:`~agent_link_core.directory.Directory` (which ``send`` and the MCP tools use)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agent_link_core.directory import decode_cursor, gather_listings, listing_depth, page_of, providers_view, score, session_view, was_cut
from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.mailbox import iso
from agent_link_core.model import Session, is_address
from agent_link_core.store import now_ms

if TYPE_CHECKING:
    from agent_link_core.app import App
    from agent_link_core.harness import SessionListing

ALIAS_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}\Z")


async def sessions(
    app: App, *, search: str | None = None, cwd: str | None = None, harness: str = "all", limit: int = 50,
    show_paths: bool = False, source: str | None = None, cursor: str | None = None,
) -> dict[str, Any]:
    """Every agent session on the machine, newest first, one page at a time (``agent-link
    sessions``; ``limit`` 1-500, checked first). ``source`` keeps sessions of one source
    kind (a harness's ``source`` field, e.g. how the session was started, or one of its
    surfaces).

    :param cursor: the ``nextCursor`` of an earlier answer: the page after it.
    :returns: ``{"version": 1, "sessions": [...], "providers": {...}, "complete", "hasMore",
        "nextCursor", "filters", "filteredOut"}``, as :meth:`~agent_link_core.directory.Directory.list_agents` (archived sessions
        are always left out). Without ``show_paths`` each session's cwd is reduced to its
        folder name and the providers' folders are home-relative.
    :raises AgentLinkError: ``invalid_arguments`` for a bad limit or cursor, a
        ``harness`` that is neither installed nor the scheme of a live plain address, or a
        ``source`` that is not a known source kind (:func:`check_source`).
    """
    if not 1 <= limit <= 500:
        raise invalid_arguments([{"path": "limit", "rule": "range", "expected": "1-500"}])
    import os

    position = decode_cursor(cursor, "sessions")
    present = app.hooks.present_sessions(harness)
    app.directory.check_harness(harness, present)
    depth = listing_depth(position, limit)
    listings = await gather_listings(app, only=harness, limit=depth)
    sessions = [s for listing in listings.values() for s in listing.sessions] + present
    if source:
        check_source(app, source, listings, sessions)
    want = (cwd or "").rstrip("/")
    wanted = (("archived", True, lambda s: not s.archived), ("source", source, lambda s: of_source(s, source or "")),
              ("cwd", cwd, lambda s: (s.cwd or "").rstrip("/") == want),
              ("search", search, lambda s: score(s, search or "")[0] > 0))
    page = page_of(sessions, position, limit, [(name, keep) for name, value, keep in wanted if value],
                   cut=was_cut(listings, depth))
    providers = providers_view(listings)
    if not show_paths:  # a provider's report names the folders it searched: home-relative then
        providers = home_relative(providers, app.env.get("HOME") or os.path.expanduser("~"))
    return {"version": 1, "sessions": [public_view(s, show_paths) for s in page.sessions], "providers": providers,
            "complete": page.first and not page.has_more and all(p["complete"] for p in providers.values()),
            "hasMore": page.has_more, "nextCursor": page.next_cursor,
            "filters": {"harness": harness, "includeArchived": False, "source": source, "cwd": cwd, "search": search},
            "filteredOut": page.filtered_out}


def check_source(app: App, source: str, listings: Mapping[str, SessionListing], sessions: list[Session]) -> None:
    """Refuse a ``source`` no listed harness declares (``source_kinds``) and no listed session
    has (its ``extra["source"]`` or a surface; ``address``: a live plain address's).

    :raises AgentLinkError: ``invalid_arguments`` (``source``, rule ``enum``) naming the known kinds.
    """
    known = {"address", *(k for n in listings if n in app.harnesses for k in app.harnesses[n].source_kinds),
             *(k for s in sessions for k in (*s.surface, s.extra.get("source")) if isinstance(k, str))}
    if source not in known:
        raise invalid_arguments([{"path": "source", "rule": "enum",
                                  "expected": f"one of {', '.join(sorted(known)) or 'no source kind (no session is listed)'}"}])


async def who(app: App, *, source: str | None = None) -> dict[str, Any]:
    """Live sessions merged with contacts (``agent-link who``); refreshes a contact's
    project, label, last seen. ``source`` keeps one source kind (:func:`sessions`)."""
    listing = await sessions(app, limit=500, source=source)
    by_address = {s["address"]: s for s in listing["sessions"]}
    seen = [(live.get("cwd"), live.get("title"), now_ms(), row["alias"]) for row in app.store.conn.execute("SELECT * FROM contacts")
            if (live := by_address.get(row["address"])) is not None]
    try:  # a note on the way: a read never waits for a writer, nor fails for a file that refuses writes
        if seen:
            with app.store.write(wait=False) as conn:
                conn.executemany("UPDATE contacts SET project = ?, label = ?, last_seen = ? WHERE alias = ?", seen)
    except AgentLinkError:
        pass  # the next who refreshes them
    known = {c["address"]: c for c in contacts(app)}
    agents = [{**s, "alias": known.get(s["address"], {}).get("alias")} for s in listing["sessions"]]
    offline = [c for a, c in known.items() if a not in by_address]
    return {"version": 1, "sessions": agents, "offlineContacts": offline, "providers": listing["providers"]}

async def find(app: App, query: str, *, show_paths: bool = False, source: str | None = None) -> dict[str, Any]:
    """``none`` / ``one`` / ``many`` agents matching ``query`` (``agent-link find``): an
    exact alias wins without any discovery; otherwise alias, project, title and id are
    searched over complete listings and the live plain addresses. Without ``show_paths`` a
    match's cwd is its folder name.

    :raises AgentLinkError: ``<harness>_unavailable`` when a listing could not be completed
        (a possibly wrong "none" or "one" is never returned).
    """
    norm = query.strip().lower()
    row = app.store.conn.execute("SELECT * FROM contacts WHERE alias = ?", (norm,)).fetchone()
    if row is not None and not source:
        return {"version": 1, "verdict": "one", "matches": [{**_contact_view(row), "matchedBy": "alias"}]}
    listings = await gather_listings(app, limit=100_000)
    if source:  # checked before an exact alias answers too: a typo is never silently ignored
        check_source(app, source, listings, [s for listing in listings.values() for s in listing.sessions]
                     + app.hooks.present_sessions("all"))
    if row is not None:
        return {"version": 1, "verdict": "one", "matches": [{**_contact_view(row), "matchedBy": "alias"}]}
    incomplete = [n for n, listing in listings.items() if not listing.complete]
    if incomplete:
        raise AgentLinkError(f"{incomplete[0]}_unavailable", f"Could not list every {incomplete[0]} session, so the search would be incomplete.",
                             {"searched": incomplete}, hint="Retry when every endpoint answers.")
    known = {c["address"]: c for c in contacts(app)}
    matches = []
    for s in [s for listing in listings.values() for s in listing.sessions] + app.hooks.present_sessions("all"):
        alias = known.get(s.address, {}).get("alias") or ""
        if (not source or of_source(s, source)) and (norm in alias or score(s, query)[0] > 0):
            matches.append({**public_view(s, show_paths), "alias": alias or None})
    for address, c in known.items():
        if norm in c["alias"] and all(m["address"] != address for m in matches):
            matches.append({**c, "matchedBy": "alias"})
    return {"version": 1, "verdict": "none" if not matches else ("one" if len(matches) == 1 else "many"), "matches": matches}

def add_contact(app: App, alias: str, address: str) -> dict[str, Any]:
    """Bind ``alias`` to a session address; returns the contact.

    :raises AgentLinkError: ``invalid_arguments`` for a bad alias or address, an alias bound
        elsewhere, or a session that already has an alias (rename that one instead).
    """
    norm = normalise_alias(alias)
    if not is_address(address):
        raise invalid_arguments([{"path": "address", "rule": "pattern", "expected": "an address such as <harness>:<id>"}])
    with app.store.write() as conn:
        taken = conn.execute("SELECT address FROM contacts WHERE alias = ?", (norm,)).fetchone()
        if taken is not None and taken["address"] != address:
            raise invalid_arguments([{"path": "alias", "rule": "unique", "expected": f"an alias not already bound (to {taken['address']})"}])
        other = conn.execute("SELECT alias FROM contacts WHERE address = ? AND alias != ?", (address, norm)).fetchone()
        if other is not None:
            raise invalid_arguments([{"path": "address", "rule": "one_alias",
                                      "expected": f"a session without an alias (it is {other['alias']!r}; rename it)"}])
        conn.execute("INSERT INTO contacts (alias, address, created_at) VALUES (?, ?, ?) ON CONFLICT (alias) DO NOTHING",
                     (norm, address, now_ms()))
    return contact(app, norm)

def rename_contact(app: App, old: str, new: str) -> dict[str, Any]:
    """Rename an alias; raises ``not_found`` / ``invalid_arguments`` (new alias taken)."""
    old_n, new_n = normalise_alias(old), normalise_alias(new)
    with app.store.write() as conn:
        contact(app, old_n)
        if old_n != new_n and conn.execute("SELECT 1 FROM contacts WHERE alias = ?", (new_n,)).fetchone():
            raise invalid_arguments([{"path": "new", "rule": "unique", "expected": "an alias not already bound"}])
        conn.execute("UPDATE contacts SET alias = ? WHERE alias = ?", (new_n, old_n))
    return contact(app, new_n)

def remove_contact(app: App, alias: str) -> dict[str, Any]:
    """Drop an alias; raises ``not_found``. Returns the removed contact."""
    gone = contact(app, norm := normalise_alias(alias))
    with app.store.write() as conn:
        conn.execute("DELETE FROM contacts WHERE alias = ?", (norm,))
    return gone

def contact(app: App, alias: str) -> dict[str, Any]:
    """One contact by its (normalised) alias; raises ``not_found``."""
    row = app.store.conn.execute("SELECT * FROM contacts WHERE alias = ?", (alias,)).fetchone()
    if row is None:
        raise AgentLinkError("not_found", f"There is no contact {alias!r}.", {"query": alias, "candidates": []})
    return _contact_view(row)

def contacts(app: App) -> list[dict[str, Any]]:
    """All contacts, by alias."""
    return [_contact_view(r) for r in app.store.conn.execute("SELECT * FROM contacts ORDER BY alias")]


def normalise_alias(alias: str) -> str:
    """Trim and lower-case an alias; raises ``invalid_arguments`` when it is not usable."""
    norm = alias.strip().lower()
    if not ALIAS_RE.match(norm):
        raise invalid_arguments([{"path": "alias", "rule": "pattern", "expected": "1-64 of a-z 0-9 . _ -, starting with a letter or digit"}])
    return norm


def _contact_view(row: Any) -> dict[str, Any]:
    return {"alias": row["alias"], "address": row["address"], "project": row["project"], "label": row["label"],
            "lastSeen": iso(row["last_seen"]) if row["last_seen"] else None}


def home_relative(value: Any, home: str) -> Any:
    """``value`` (JSON-shaped: dicts, lists, strings, ...) with every string that is the home
    folder ``home`` or a path under it written ``~`` / ``~/...``; default output carries no
    absolute home paths."""
    home = home.rstrip("/")
    if isinstance(value, str):
        return "~" + value[len(home):] if home and (value == home or value.startswith(home + "/")) else value
    if isinstance(value, dict):
        return {k: home_relative(v, home) for k, v in value.items()}
    if isinstance(value, list):
        return [home_relative(v, home) for v in value]
    return value


def of_source(session: Session, source: str) -> bool:
    """True when ``session`` has the source kind ``source`` (its ``source`` field or a surface)."""
    return session.extra.get("source") == source or source in session.surface


def public_view(session: Session, show_paths: bool) -> dict[str, Any]:
    """A session's view for output: without ``show_paths`` the cwd is only its folder name
    and path-like fields are left out."""
    view = session_view(session)
    if not show_paths:
        view["cwd"] = (session.cwd or "").rstrip("/").rsplit("/", 1)[-1] or None
        view = {k: v for k, v in view.items() if k not in ("path", "transcriptPath", "socketPath", "rolloutPath")}
    return view
