"""Whether a lease's holder is known gone, so that its leases end with its session.

Asked at conflict time (a claim that clashes, :func:`agent_link_leases.tools.lease_paths`
and ``agent-link lease``), never on every read: a holder is gone when

* its harness (the address's scheme names an installed one) finds the session and says it
  is archived (``Session.archived``), or not running (``Session.loaded is False``: a Claude
  Code session with no live process, a Codex thread no reachable app-server has loaded) with
  no activity for :data:`QUIET_MS` (a host agent-link cannot reach, such as a desktop app's
  private app-server, shows as not loaded while its session works); or
* it is a plain address (no harness) whose presence expired: no running MCP server serves
  it and no process has read its inbox for :data:`agent_link_presence.RECENT_MS`.

Whatever cannot be told (no harness answer in :data:`CHECK_TIMEOUT_S`, a session the harness
does not know, an address never served, a harness error) counts as alive: a lease is never
ended on doubt.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from agent_link_core.addresses import address_scheme
from agent_link_core.errors import AgentLinkError
from agent_link_core.store import now_ms

from agent_link_leases.table import Project, claim

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App

#: the longest (s) one harness may take to say whether a holder's session runs
CHECK_TIMEOUT_S = 5.0
#: how long (ms) a session its harness reports not running must have been quiet to count as gone
QUIET_MS = 10 * 60_000
log = logging.getLogger(__name__)


def presence_expired(app: App, address: str, now: int) -> bool:
    """True when ``address`` was served once and is served no more (see the module docstring).

    :param now: epoch ms.
    """
    from agent_link_presence import RECENT_MS, pid_alive
    from agent_link_presence.table import served_row

    row = served_row(app.store.conn, address)
    return row is not None and not (row[1] and pid_alive(int(row[1]))) and now - row[0] > RECENT_MS


async def _why_gone(app: App, holder: str, now: int) -> str | None:
    scheme = address_scheme(holder)
    harness = app.harnesses.get(scheme) if scheme else None
    if harness is None:
        return "presence_expired" if presence_expired(app, holder, now) else None
    try:
        session = await asyncio.wait_for(harness.get_session(holder.split(":", 1)[1]), CHECK_TIMEOUT_S)
    except Exception as exc:  # a harness that cannot tell (a timeout too): the holder counts as alive
        log.debug("leases: could not tell whether %s runs: %s", holder, exc)
        return None
    if session is None:
        return None
    if session.archived:
        return "session_archived"
    if session.loaded is not False:
        return None
    # Not running for its harness, and quiet for a while: a host agent-link cannot reach (a
    # desktop app's own app-server) still writes its session's activity
    last = session.last_activity_ms
    return "session_not_running" if last is None or now - last > QUIET_MS else None


async def gone_holders(app: App, holders: Iterable[str], now: int) -> dict[str, str]:
    """``{holder: why}`` for each of ``holders`` known gone; why is ``session_not_running``,
    ``session_archived`` or ``presence_expired``. Holders are checked concurrently.

    :param now: epoch ms.
    """
    unique = list(dict.fromkeys(holders))
    reasons = await asyncio.gather(*(_why_gone(app, h, now) for h in unique))
    return {h: why for h, why in zip(unique, reasons, strict=True) if why is not None}


async def claim_ending_gone(app: App, holder: str, root: Project, typed: list[str], *, exclusive: bool,
                            reason: str | None, ttl_ms: int, until_resolved: str | None = None,
                            key: str | None = None) -> dict[str, Any]:
    """:func:`agent_link_leases.table.claim`; when it clashes, the clashing holders known gone
    (:func:`gone_holders`) lose all their leases and the claim is tried once more.

    :returns: the claim's result (``ended`` lists what ended).
    :raises AgentLinkError: as :func:`~agent_link_leases.table.claim` (``lease_conflict``
        naming only live holders, or holders that cannot be told apart from live ones).
    """
    given: dict[str, Any] = {"exclusive": exclusive, "reason": reason, "ttl_ms": ttl_ms, "until_resolved": until_resolved, "key": key}
    try:
        return claim(app.store, holder, root, typed, now=now_ms(), **given)
    except AgentLinkError as exc:
        if exc.code != "lease_conflict":
            raise
        gone = await gone_holders(app, [c["holder"] for c in exc.details.get("conflicts", [])], now_ms())
        if not gone:
            raise
    return claim(app.store, holder, root, typed, now=now_ms(), ended=gone, **given)
