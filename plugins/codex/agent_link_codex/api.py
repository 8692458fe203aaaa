"""Typed functions for the Codex specifics of the ``agent-link`` CLI, for scripts too.

* the endpoint registry: :func:`add_endpoint` (checks a live app-server answers before it
  saves), :func:`list_endpoints` (id, label, source, reachability; socket paths only when
  asked), :func:`remove_endpoint`;
* ``ep_...:<thread>`` targets: :func:`resolve_composite` (what ``agent-link send`` and
  ``contacts add`` accept through ``agent_link_resolve_address``);
* named senders: :func:`agent_link_codex.lookup.named_sender` (``--from-thread T [--from-endpoint E]``, through the
  codex harness's ``identify_caller``).

Every function takes the App (``App.create()``) or its codex harness and raises
:class:`~agent_link_core.errors.AgentLinkError`::

    import asyncio
    from agent_link_core.app import App
    from agent_link_codex import api as codex_api

    app = App.create()
    added = asyncio.run(codex_api.add_endpoint(app, "/run/user/1000/codex.sock", label="tui"))
    print(added["registration"], added["endpoint"]["id"])     # added ep_3f0c...
    app.close()

A thread is the same thread whichever app-server serves it: an address stays
``codex:<thread id>``, and a message goes to the app-server that has the thread loaded (so two
app-servers never both write to it). The endpoint in ``ep_...:<thread>`` says where the thread
must be found when the target is checked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_link_core.errors import AgentLinkError

from agent_link_codex import lookup
from agent_link_codex.lookup import candidate_endpoint, unreachable
from agent_link_codex.endpoints import REGISTRY_CAPACITY, Endpoint, EndpointRegistry

if TYPE_CHECKING:
    from agent_link_core.app import App

    from agent_link_codex.harness import CodexHarness

ENDPOINTS_FORMAT_VERSION = 1


def codex_harness(app: App) -> CodexHarness:
    """The App's codex harness.

    :raises AgentLinkError: ``unsupported`` when the codex plugin is disabled.
    """
    from agent_link_codex.harness import CodexHarness

    harness = app.harnesses.get("codex")
    if not isinstance(harness, CodexHarness):
        raise AgentLinkError("unsupported", "The codex plugin is not loaded here.", {"capability": "codex"},
                             hint="Check AGENT_LINK_DISABLE_PLUGINS and `agent-link plugins`.")
    return harness


def endpoint_entry(ep: Endpoint, sighting: lookup.Sighting | None, *, show_paths: bool) -> dict[str, Any]:
    """``{id, label, source, reachable, reason}`` plus ``target`` with ``show_paths``."""
    entry: dict[str, Any] = {"id": ep.id, "label": ep.label, "source": ep.source,
                             "reachable": bool(sighting and sighting.reachable),
                             "reason": sighting.reason if sighting else "not-probed"}
    if show_paths:
        entry["target"] = ep.target
    return entry


async def add_endpoint(app: App, target: str, *, label: str | None = None, token_file: str | None = None) -> dict[str, Any]:
    """Register the app-server at ``target`` once it answers ``initialize``.

    :param target: a socket path (absolute or ``~/``; ``unix://`` allowed) or a ``ws://`` URL.
    :param token_file: the capability-token file of a ``ws://`` endpoint.
    :returns: ``{version, registration, endpoint: {id, label, source, reachable, reason},
        capacity: {used, limit}}``; ``registration`` is ``added``, ``updated`` (already
        registered, also by another path to the same socket: label and token file replaced) or ``registry-full`` (nothing saved; the
        endpoint still works for this command's check).
    :raises AgentLinkError: ``invalid_arguments`` (relative path, not a socket, another
        user's socket, bad URL), ``codex_unavailable`` (nothing answers there; details
        ``endpoint`` (its id), ``reason``, ``searched``).
    """
    registry = codex_harness(app).registry
    ep = EndpointRegistry.prepare(target, label=label, token_file=token_file)
    seen = await lookup.probe(ep)
    if not seen.reachable:
        raise AgentLinkError("codex_unavailable", f"No Codex app-server answers there ({seen.reason}); nothing was saved.",
                             {"endpoint": ep.id, "reason": seen.reason, "searched": [ep.id]},
                             hint="Start it (codex app-server --listen unix://PATH) and add it again.")
    known = registry.get(ep.id) is not None or registry.same_socket(ep) is not None
    try:
        ep = registry.add(target, label=label, token_file=token_file)  # another path to a registered socket: that one
        registration = "updated" if known else "added"
    except AgentLinkError as exc:
        if exc.details.get("errors", [{}])[0].get("rule") != "capacity":
            raise
        registration = "registry-full"
    return {"version": ENDPOINTS_FORMAT_VERSION, "registration": registration,
            "endpoint": endpoint_entry(ep, seen, show_paths=False),
            "capacity": {"used": len(registry.list()), "limit": REGISTRY_CAPACITY}}


async def list_endpoints(app: App, *, show_paths: bool = False) -> dict[str, Any]:
    """Every endpoint agent-link would use, each probed now (concurrently, bounded).

    :returns: ``{version, endpoints: [{id, label, source, reachable, reason, target?}],
        capacity: {used, limit}}`` in preference order; ``source`` is one of
        :data:`~agent_link_codex.endpoints.SOURCES`; ``target`` (socket path or URL) only
        with ``show_paths``.
    """
    harness = codex_harness(app)
    candidates, _ = harness.service.candidates()
    seen = await lookup.probe_all(candidates)
    return {"version": ENDPOINTS_FORMAT_VERSION,
            "endpoints": [endpoint_entry(ep, s, show_paths=show_paths) for ep, s in zip(candidates, seen)],
            "capacity": {"used": len(harness.registry.list()), "limit": REGISTRY_CAPACITY}}


def remove_endpoint(app: App, key: str) -> dict[str, Any]:
    """Unregister an endpoint by id (or its socket path / URL).

    :returns: ``{version, removed: {id, label}}``.
    :raises AgentLinkError: ``not_found`` when no registered endpoint matches (endpoints
        named by settings or the default control socket are not in the registry).
    """
    registry = codex_harness(app).registry
    ep = registry.get(key.strip())
    if ep is None or not registry.remove(ep.id):
        raise AgentLinkError("not_found", f"No registered endpoint {key.strip()}.", {"id": key.strip(), "candidates": []},
                             hint=lookup.LIST_HINT)
    return {"version": ENDPOINTS_FORMAT_VERSION, "removed": {"id": ep.id, "label": ep.label}}


def resolve_composite(harness: CodexHarness, endpoint_id: str, thread_id: str) -> str:
    """The address ``codex:<thread_id>`` once ``endpoint_id`` (a known endpoint) answers that
    it has the thread and it is not archived. Blocks while it asks (see :mod:`lookup`);
    async code awaits :func:`aresolve_composite` instead.

    :raises AgentLinkError: ``not_found`` (unknown endpoint, or no such thread there),
        ``archived``, ``codex_unavailable`` (the endpoint did not answer).
    """
    return lookup.run_blocking(lambda: aresolve_composite(harness, endpoint_id, thread_id))


async def aresolve_composite(harness: CodexHarness, endpoint_id: str, thread_id: str) -> str:
    """:func:`resolve_composite` on the caller's event loop (the probe uses connections of its
    own, every step bounded), so an MCP server answering other calls meanwhile is never blocked."""
    from agent_link_codex.threads import is_archived_thread

    composite = f"{endpoint_id}:{thread_id}"
    ep = candidate_endpoint(harness, endpoint_id, composite)
    [seen] = await lookup.probe_all([ep], thread_id)
    if not seen.checked:
        raise unreachable(seen, composite)
    if seen.thread is None:
        raise AgentLinkError("not_found", f"Codex endpoint {endpoint_id} has no thread {thread_id}.",
                             {"query": composite, "candidates": []}, hint="list_agents lists the sessions.")
    if is_archived_thread(seen.thread):
        raise AgentLinkError("archived", f"codex:{thread_id} is archived and cannot receive mail.", {"address": f"codex:{thread_id}"})
    return f"codex:{thread_id}"


# -- for scripts written against agent-session-intercom -----------------------------------------

#: What a failed dispatch means for a retry (:func:`classify_dispatch_error`).
DISPATCH_CLASSES = ("retryable", "rejected", "unknown")
_BEFORE_SENDING = ("open-failed", "open-timeout", "send-failed", "client-closed")


def classify_dispatch_error(exc: BaseException, *, request_sent: bool = True) -> str:
    """Classify an error from a ``turn/start`` / ``turn/steer`` dispatch, as intercom's
    ``classifyAppServerDispatchError`` does for its reliable delivery.

    :param exc: what the dispatch raised (an app-server exception or an ``AgentLinkError``).
    :param request_sent: whether the turn request had left when it failed.
    :returns: ``retryable`` (nothing was accepted: no app-server answered before the request,
        or JSON-RPC ``-32001`` "overloaded"), ``unknown`` (the request may have been carried
        out: its answer was lost or timed out) or ``rejected`` (a definite refusal).
    """
    from agent_link_codex.appserver import AppServerError, AppServerUnavailable
    from agent_link_codex.delivery import OVERLOADED

    if isinstance(exc, AppServerError):
        return "retryable" if exc.code == OVERLOADED else "rejected"
    if isinstance(exc, AppServerUnavailable):
        return "retryable" if (not request_sent or exc.reason in _BEFORE_SENDING) else "unknown"
    if isinstance(exc, AgentLinkError):
        if exc.code == "codex_unavailable":
            return "retryable" if not request_sent or exc.details.get("reason") in _BEFORE_SENDING else "unknown"
        if exc.code == "upstream_error" and exc.details.get("rpcCode") == OVERLOADED:
            return "retryable"
        return "rejected"
    return "unknown" if request_sent else "retryable"


async def resolve_source(app: App, thread_id: str, endpoint_id: str | None = None) -> dict[str, str]:
    """The canonical address of a sending thread, proved as intercom's ``resolveSource`` does:
    the thread must be on ``endpoint_id`` when given, else on exactly one reachable endpoint
    (``AGENT_LINK_CODEX_SOURCE_ENDPOINT`` / ``AGENT_SESSION_INTERCOM_SOURCE_ENDPOINT`` picks
    one when several have it).

    :returns: ``{"scheme": "codex-thread", "endpointId": "ep_...", "threadId": thread_id}``.
    :raises AgentLinkError: ``not_found`` (no reachable endpoint has the thread, or not the
        named one), ``ambiguous`` (several have it and none is named; details list them).
    """
    from agent_link_codex.intercom import thread_address

    harness = codex_harness(app)
    endpoint_id = endpoint_id or harness.values.get("AGENT_LINK_CODEX_SOURCE_ENDPOINT") or None
    candidates, _ = harness.service.candidates()
    holders = [s.endpoint.id for s in await lookup.probe_all(candidates, thread_id) if s.thread is not None]
    if endpoint_id is not None:
        if endpoint_id not in holders:
            raise AgentLinkError("not_found", f"Codex endpoint {endpoint_id} has no thread {thread_id} (or did not answer).",
                                 {"query": thread_id, "candidates": [{"address": f"{e}:{thread_id}"} for e in holders]},
                                 hint="Check --from-thread and --from-endpoint.")
        return thread_address(endpoint_id, thread_id)
    if not holders:
        raise AgentLinkError("not_found", f"No reachable Codex app-server has thread {thread_id}.",
                             {"query": thread_id, "candidates": []}, hint="Check the thread id, or start its app-server.")
    if len(holders) > 1:
        raise AgentLinkError("ambiguous", f"Thread {thread_id} is on several Codex endpoints.",
                             {"query": thread_id, "candidates": [{"address": f"{e}:{thread_id}"} for e in holders]},
                             hint="Name one with --from-endpoint (or AGENT_SESSION_INTERCOM_SOURCE_ENDPOINT).")
    return thread_address(holders[0], thread_id)
