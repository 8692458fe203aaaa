"""Listing and resolving agents across every harness, with fuzzy ranking.

Each harness lists its own sessions; the directory merges them newest first, applies
filters, and ranks candidates for a query. A tie at the top score is ``ambiguous`` rather
than a guess, and a harness that could not be read is reported in ``providers``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from agent_link_core.errors import AgentLinkError
from agent_link_core.harness import Harness, SessionListing
from agent_link_core.mailbox import iso
from agent_link_core.model import ADDRESS_RE, Session, is_address

LIST_TIMEOUT_S = 20.0
# Field weights for ranking (after the original's thread search, docs/behaviour.md §16.9).
WEIGHTS = (("id", 120), ("title", 90), ("address", 60), ("cwd", 30))


def session_view(session: Session) -> dict[str, Any]:
    """A session as list_agents / resolve_agent show it."""
    view: dict[str, Any] = {
        "address": session.address,
        "harness": session.harness,
        "id": session.id,
        "title": session.title,
        "cwd": session.cwd,
        "surface": list(session.surface),
        "loaded": session.loaded,
        "archived": session.archived,
        "lastActivityAt": iso(session.last_activity_ms),
        "receive": dict(session.receive),
    }
    view.update(session.extra)
    return view


async def gather_listings(
    harnesses: Mapping[str, Harness], *, only: str | None = None, include_archived: bool = False, limit: int = 200,
    on_error: Callable[[Harness, Exception], None] | None = None,
) -> dict[str, SessionListing]:
    """Ask every harness (or only ``only``) concurrently; a failure becomes a provider report.

    :param on_error: told of a harness that raised something other than AgentLinkError or
        answered with something other than a :class:`SessionListing` (the App reports it as
        that harness's plugin's problem).
    """

    async def one(harness: Harness) -> SessionListing:
        try:
            listing = await asyncio.wait_for(
                harness.list_sessions(include_archived=include_archived, limit=limit), LIST_TIMEOUT_S
            )
        except AgentLinkError as exc:
            return SessionListing(provider={"available": False, "reason": exc.code, "error": exc.to_dict()}, complete=False)
        except TimeoutError:
            return SessionListing(provider={"available": False, "reason": "timeout"}, complete=False)
        except Exception as exc:  # one harness's bug never hides the others' sessions
            if on_error is not None:
                on_error(harness, exc)
            return SessionListing(provider={"available": False, "reason": "harness_failed", "error": type(exc).__name__},
                                  complete=False)
        if not isinstance(listing, SessionListing):
            if on_error is not None:
                on_error(harness, TypeError(f"list_sessions returned {type(listing).__name__}, not a SessionListing"))
            return SessionListing(provider={"available": False, "reason": "harness_failed"}, complete=False)
        return listing

    chosen = {n: h for n, h in harnesses.items() if only in (None, "all", n)}
    results = await asyncio.gather(*(one(h) for h in chosen.values()))
    return dict(zip(chosen, results))


def providers_view(listings: Mapping[str, SessionListing]) -> dict[str, Any]:
    """``{harness: provider report + count + complete}`` for list results."""
    return {
        name: {**listing.provider, "count": len(listing.sessions), "complete": listing.complete}
        for name, listing in listings.items()
    }


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


def rank(sessions: list[Session], query: str, limit: int) -> tuple[list[dict[str, Any]], bool, int]:
    """Score and sort candidates; returns ``(candidates, ambiguous, tied count)``.

    Equal scores are ordered by last activity; a tie at the top score is ambiguous.
    """
    scored = []
    for s in sessions:
        points, reasons = score(s, query)
        if points > 0:
            scored.append((points, s.last_activity_ms or 0, s, reasons))
    scored.sort(key=lambda t: (-t[0], -t[1]))
    top = scored[0][0] if scored else 0
    tied = sum(1 for t in scored if t[0] == top) if scored else 0
    candidates = [{**session_view(s), "score": p, "matchReasons": r} for p, _, s, r in scored[:limit]]
    return candidates, tied > 1, tied


def split_address(address: str) -> tuple[str, str]:
    """``("team", "abc")`` for ``team:abc``; raises ``ValueError`` for a non-address."""
    m = ADDRESS_RE.fullmatch(address)
    if not m or not is_address(address):
        raise ValueError(address)
    return m.group(1), m.group(2)
