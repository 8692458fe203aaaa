"""One-off questions to app-servers: is this endpoint alive, does it know this thread.

The endpoint registry checks a socket before saving it (``agent-link endpoints add``), and the
CLI's ``ep_...:<thread>`` targets and ``--from-thread`` senders are checked against the
app-servers. The core asks for the last two synchronously (``agent_link_resolve_address``,
``Harness.identify_caller``), so :func:`run_blocking` runs a check on a private event loop in a
worker thread. Each check uses connections of its own, closed when it ends: the service's
connections belong to the caller's event loop and are left alone.

Every step is bounded (connect :data:`OPEN_MS`, ``initialize`` :data:`INIT_MS`, ``thread/read``
:data:`READ_MS`, close 1 s; endpoints are asked concurrently), so a check blocks its caller for
at most about 8 s, typically well under 100 ms per live endpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from agent_link_core import __version__, aio

from agent_link_codex.appserver import AppServerClient, AppServerError, AppServerUnavailable
from agent_link_codex.endpoints import Endpoint, read_token
from agent_link_codex.service import CLIENT_NAME, CLIENT_TITLE, is_not_found

OPEN_MS = 2_000
INIT_MS = 3_000
READ_MS = 3_000

T = TypeVar("T")


@dataclass(frozen=True)
class Sighting:
    """What one endpoint answered.

    :ivar endpoint: the endpoint asked.
    :ivar reason: None when it answered everything asked; else why not: ``absent`` (no socket
        file), ``open-failed`` (refused, stale socket, bad token), ``open-timeout``,
        ``request-timeout``, ``connection-lost``, ``token-unreadable``, ``rejected`` (it
        refused ``initialize``) or ``read-failed`` (it refused ``thread/read`` for another
        reason than not knowing the thread).
    :ivar codex_home: the server's ``CODEX_HOME`` from ``initialize`` (app-servers sharing one
        home serve the same threads), when it answered.
    :ivar thread: the thread object (``thread/read`` without turns) when asked for one and
        known there, else None.
    :ivar hooks: the ``hooks/list`` answer when asked for it (``hooks_cwd``) and given.
    """

    endpoint: Endpoint
    reason: str | None = None
    codex_home: str | None = None
    thread: dict[str, Any] | None = None
    hooks: dict[str, Any] | None = None

    @property
    def reachable(self) -> bool:
        """Whether the app-server answered ``initialize``."""
        return self.reason is None or self.reason == "read-failed"

    @property
    def checked(self) -> bool:
        """Whether every question was answered (a None :attr:`thread` then means unknown there)."""
        return self.reason is None


async def probe(endpoint: Endpoint, thread_id: str | None = None, *, hooks_cwd: str | None = None) -> Sighting:
    """Connect to ``endpoint``, ``initialize``, and with ``thread_id`` read that thread; with
    ``hooks_cwd``, also ask ``hooks/list`` for that folder (the hooks and their trust as Codex
    reports them now).

    Never raises for an endpoint that fails; the failure is the sighting's ``reason``.
    """
    if endpoint.kind == "unix" and not os.path.exists(os.path.realpath(endpoint.target)):
        return Sighting(endpoint, "absent")
    try:
        token = read_token(endpoint)
    except OSError:
        return Sighting(endpoint, "token-unreadable")
    try:
        if endpoint.kind == "unix":
            client = await AppServerClient.connect_unix(endpoint.target, open_timeout_ms=OPEN_MS, refuse_server_requests=True)
        else:
            client = await AppServerClient.connect_ws(endpoint.target, token, open_timeout_ms=OPEN_MS, refuse_server_requests=True)
    except AppServerUnavailable as exc:
        return Sighting(endpoint, exc.reason)
    try:
        info = await client.initialize(CLIENT_NAME, __version__, title=CLIENT_TITLE, timeout_ms=INIT_MS)
        home = info.get("codexHome") if isinstance(info.get("codexHome"), str) else None
        hooks = None
        if hooks_cwd is not None:
            with contextlib.suppress(AppServerError):
                listed = await client.request("hooks/list", {"cwds": [hooks_cwd]}, timeout_ms=READ_MS)
                hooks = listed if isinstance(listed, dict) else None
        if thread_id is None:
            return Sighting(endpoint, None, home, hooks=hooks)
        try:
            result = await client.request("thread/read", {"threadId": thread_id, "includeTurns": False}, timeout_ms=READ_MS)
        except AppServerError as exc:
            return Sighting(endpoint, None if is_not_found(exc) else "read-failed", home)
        thread = result.get("thread") if isinstance(result, dict) else None
        return Sighting(endpoint, None, home, thread if isinstance(thread, dict) else None)
    except AppServerError:
        return Sighting(endpoint, "rejected")
    except AppServerUnavailable as exc:
        return Sighting(endpoint, exc.reason)
    finally:
        await client.close(timeout_ms=1_000)


async def probe_all(endpoints: list[Endpoint], thread_id: str | None = None, *, hooks_cwd: str | None = None) -> list[Sighting]:
    """:func:`probe` every endpoint concurrently; sightings in the order of ``endpoints``."""
    return list(await asyncio.gather(*(probe(ep, thread_id, hooks_cwd=hooks_cwd) for ep in endpoints)))


def run_blocking(factory: Callable[[], Awaitable[T]]) -> T:
    """Run ``factory()`` on a private event loop in a worker thread and return its result
    (:func:`agent_link_core.aio.run_blocking`); the caller is blocked meanwhile."""
    return aio.run_blocking(factory)
