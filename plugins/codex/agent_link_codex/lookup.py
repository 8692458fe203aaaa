"""One-off questions to app-servers: is this endpoint alive, does it know this thread.

The endpoint registry checks a socket before saving it (``agent-link endpoints add``), and the
CLI's ``ep_...:<thread>`` targets and ``--from-thread`` senders are checked against the
app-servers (:func:`named_sender`: the codex harness's ``identify_caller``). The core asks for the last two synchronously (``agent_link_resolve_address``,
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
from typing import TYPE_CHECKING, Any, TypeVar

from agent_link_core import __version__, boundary
from agent_link_core.errors import AgentLinkError
from agent_link_core.model import Caller

from agent_link_codex.appserver import AppServerClient, AppServerError, AppServerUnavailable
from agent_link_codex.endpoints import Endpoint, read_token
from agent_link_codex import rollouts
from agent_link_codex.service import CLIENT_NAME, CLIENT_TITLE, is_not_found
from agent_link_codex.settings import codex_home

if TYPE_CHECKING:
    from agent_link_codex.harness import CodexHarness

OPEN_MS = 2_000
INIT_MS = 3_000
READ_MS = 3_000
LIST_HINT = "See them with `agent-link endpoints list`; add one with `agent-link endpoints add PATH`."

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
    (:func:`agent_link_core.boundary.run_blocking`); the caller is blocked meanwhile."""
    return boundary.run_blocking(factory)


def candidate_endpoint(harness: CodexHarness, endpoint_id: str, what: str) -> Endpoint:
    """The known endpoint ``endpoint_id`` (``what`` names the argument that gave it).

    :raises AgentLinkError: ``not_found`` when no endpoint of that id is known here.
    """
    candidates, _ = harness.service.candidates()
    for ep in candidates:
        if ep.id == endpoint_id:
            return ep
    raise AgentLinkError("not_found", f"No Codex endpoint {endpoint_id} is known here ({what}).",
                         {"query": endpoint_id, "candidates": []}, hint=LIST_HINT)


def unreachable(seen: Sighting, what: str) -> AgentLinkError:
    return AgentLinkError("codex_unavailable", f"Codex endpoint {seen.endpoint.id} did not answer ({seen.reason}), so {what} cannot be checked.",
                          {"endpoint": seen.endpoint.id, "reason": seen.reason, "searched": [seen.endpoint.id]},
                          hint="Start that app-server again, or use codex:<thread id> to reach the thread wherever it runs.")


def named_sender(harness: CodexHarness, thread_id: str, endpoint_id: str | None) -> Caller | None:
    """The Codex thread a ``--from-thread`` names, checked against the app-servers.

    With ``endpoint_id`` the thread must be on that endpoint. Without it, the thread must be
    on the app-servers of exactly one ``CODEX_HOME`` (servers sharing a home serve the same
    threads); when nothing reachable knows it, a rollout in this ``CODEX_HOME`` counts.
    Blocks while it asks (see :func:`probe_all`).

    :returns: the caller ``codex:<thread_id>``, or None when Codex does not know the thread
        (another harness may).
    :raises AgentLinkError: ``not_found`` (unknown endpoint, or the thread is not on it),
        ``codex_unavailable`` (the named endpoint did not answer), ``ambiguous`` (the thread
        is on several homes' app-servers: name one with ``--from-endpoint``).
    """
    caller = Caller(f"codex:{thread_id}", "explicit", "codex")
    if endpoint_id is not None:
        ep = candidate_endpoint(harness, endpoint_id, "--from-endpoint")
        [seen] = run_blocking(lambda: probe_all([ep], thread_id))
        if not seen.checked:
            raise unreachable(seen, f"thread {thread_id}")
        if seen.thread is None:
            raise AgentLinkError("not_found", f"Codex endpoint {endpoint_id} has no thread {thread_id}.",
                                 {"query": thread_id, "candidates": []}, hint="Check --from-thread and --from-endpoint.")
        return caller
    candidates, _ = harness.service.candidates()
    sightings = run_blocking(lambda: probe_all(candidates, thread_id))
    homes: dict[str, list[str]] = {}
    for seen in sightings:
        if seen.thread is not None:
            homes.setdefault(seen.codex_home or seen.endpoint.id, []).append(seen.endpoint.id)
    if len(homes) > 1:
        raise AgentLinkError("ambiguous", f"Thread {thread_id} is on several Codex app-servers with different homes.",
                             {"query": thread_id, "candidates": [{"address": f"{ids[0]}:{thread_id}"} for ids in homes.values()]},
                             hint="Name the one you mean with --from-endpoint.")
    if homes or rollouts.find_rollout(codex_home(harness.env), thread_id) is not None:
        return caller
    return None
