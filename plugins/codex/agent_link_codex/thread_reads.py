"""The Codex thread tools that read (docs/behaviour.md §5 and §16, own wording): list,
resolve, get, the loaded threads and the desktop sidebar, and waiting for a thread; the
helpers the acting tools share (:mod:`agent_link_codex.tools`).

Read-only tools fall back to rollout transcripts when no app-server can be had
(``useLocalFallback``, default true); their ``source`` says which was used
(``app-server`` or ``local-jsonl-fallback``). Thread text (names, previews, messages) is
returned as found: it is untrusted data written by models and people.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from agent_link_waits.waits import wait_capped_warning, waits_of
from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.tools.registry import ToolCall

from agent_link_codex import rollouts
from agent_link_codex.activity import observe, thread_links
from agent_link_codex.appserver import AppServerError
from agent_link_codex.harness import CodexHarness
from agent_link_codex.threads import ID_RE, is_archived_thread, source_kind, source_kinds, status_of
from agent_link_codex.service import SOURCE_KINDS, Link
from agent_link_codex.settings import codex_home

# Field weights for thread search (docs/behaviour.md §16.9).
SEARCH_WEIGHTS = (("id", 120), ("name", 90), ("preview", 55), ("lastAgentMessage", 45), ("cwd", 30), ("path", 20), ("archiveState", 10))


def harness_of(app: Any) -> CodexHarness:
    """The app's codex harness."""
    return app.harnesses["codex"]


def bare_id(value: str) -> str:
    """``codex:<id>`` or ``<id>`` → ``<id>``; :raises AgentLinkError: invalid_arguments."""
    tid = value.removeprefix("codex:")
    if not ID_RE.match(tid):
        raise invalid_arguments([{"path": "threadId", "rule": "pattern", "expected": "a Codex thread id"}])
    return tid


def thread_view(thread: dict[str, Any], link: Link | None, loaded: bool | None = None) -> dict[str, Any]:
    """The public view of a thread (app-server object or rollout summary)."""
    tid = thread.get("id")
    status = status_of(thread)
    return {
        "id": tid, "address": f"codex:{tid}", "name": thread.get("name"), "preview": thread.get("preview"),
        "cwd": thread.get("cwd"), "status": status, "source": source_kind(thread), "archived": is_archived_thread(thread),
        "loaded": loaded if loaded is not None else (status not in ("notLoaded", "unknown") if link is not None else None),
        "createdAt": thread.get("createdAt"), "updatedAt": thread.get("updatedAt"), "path": thread.get("path"),
        "forkedFromId": thread.get("forkedFromId"), "model": thread.get("model"), "endpoint": link.endpoint.id if link else None,
        "lastAgentMessage": thread.get("lastAgentMessage"), "localOnly": bool(thread.get("localOnly")),
    }


def _local_threads(harness: CodexHarness, scope: str, cwd: Any, limit: int | None) -> tuple[list[dict[str, Any]], int]:
    home = codex_home(harness.env)
    files = rollouts.rollout_files(home, scope)
    names = rollouts.thread_names(home)
    cwds = {cwd} if isinstance(cwd, str) else set(cwd or [])
    out = []
    for path in files:
        summary = rollouts.summary(home, path, names)
        if summary is None or (cwds and summary.get("cwd") not in cwds):
            continue
        out.append(summary)
        if limit is not None and len(out) >= limit:
            break
    return out, len(files)


async def _app_server_threads(harness: CodexHarness, links: list[Link], scope: str, *, query: str | None, cwd: Any,
                              kinds: tuple[str, ...], limit: int, to_end: bool) -> tuple[list[tuple[Link, dict[str, Any]]], dict[str, Any]]:
    service = harness.service
    pairs: list[tuple[Link, dict[str, Any]]] = []
    paging: dict[str, Any] = {"complete": True, "nextCursor": None, "errors": []}
    for archived in {"active": [False], "archived": [True], "all": [False, True]}[scope]:
        found, page = await service.list_threads(links, archived=archived, search=query, cwd=cwd, source_kinds=kinds,
                                                 limit=limit, to_end=to_end)
        if archived:
            found = [(ln, {**t, "archived": True}) for ln, t in found]
        pairs += found
        paging["complete"] = paging["complete"] and page["complete"]
        paging["nextCursor"] = paging["nextCursor"] or page["nextCursor"]
        paging["errors"] += page["errors"]
    if scope != "archived":  # loaded threads thread/list leaves out (a thread with no turn yet)
        cwds = {cwd} if isinstance(cwd, str) else set(cwd or [])
        for ln, t in await service.loaded_unlisted(links, {t["id"] for _, t in pairs}):
            if (not cwds or t.get("cwd") in cwds) and _kind_listed(source_kind(t), kinds) and _text_matches(t, query):
                pairs.append((ln, t))
    return pairs, paging


def _scope(args: dict[str, Any], default: str) -> str:
    if "archived" in args and "archiveScope" not in args:
        return "archived" if args["archived"] else "active"
    return args.get("archiveScope", default)


# list / resolve --------------------------------------------------------------------------
async def list_codex_threads(app: Any, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Tool handler: threads newest first (app-servers, else transcripts), one page at a time.

    ``cursor`` is the ``nextCursor`` of an earlier answer (an offset into the same listing).
    ``complete`` is true only when this answer holds every thread the sources hold for the
    filters given; a page with more after it says ``hasMore`` and gives ``nextCursor``, and
    ``filteredSourceKinds`` names the source kinds left out (exec runs, sub-agents).
    """
    harness = harness_of(app)
    limit = args.get("limit", 20)
    offset = _offset(args.get("cursor"))
    scope = _scope(args, "active")
    if "archived" in args:
        call.warnings.append({"code": "deprecated_argument", "message": "archived is deprecated; use archiveScope."})
    links, error = await thread_links(harness, args.get("useLocalFallback", True))
    kinds = source_kinds(args.get("includeExec", False), args.get("includeSubagents", False))
    page_fields = {"filteredSourceKinds": [k for k in SOURCE_KINDS if k not in kinds]}
    if links:
        query = args.get("query") or ""
        supplement = bool(query) and args.get("useLocalFallback", True)
        # one thread more than the page, to know whether another page follows; a search merged
        # with transcript matches reads every match, so that each page cuts the same list
        pairs, paging = await _app_server_threads(harness, links, scope, query=query or None, cwd=args.get("cwd"),
                                                  kinds=kinds, limit=200 if supplement else offset + limit + 1, to_end=supplement)
        loaded = await harness.service.loaded_ids(links)
        views = [thread_view(t, loaded.get(t["id"], ln), t["id"] in loaded) for ln, t in pairs]
        local_info = None
        if supplement:
            added, local_info = await asyncio.to_thread(_local_matches, harness, scope, args.get("cwd"), kinds, query,
                                                        {v["id"] for v in views})
            if added:
                views = sorted(views + [thread_view(t, None) for t in added], key=lambda v: -(v.get("updatedAt") or 0))
        more = len(views) > offset + limit
        return {"source": "app-server+local-jsonl-search" if local_info and local_info["addedCount"] else "app-server",
                "archiveScope": scope, "data": views[offset:offset + limit],
                "complete": paging["complete"] and not more and not paging["nextCursor"] and offset == 0,
                "hasMore": more, "nextCursor": str(offset + limit) if more else None,
                "endpoints": [ln.endpoint.id for ln in links], "appServerError": None, "localSearchSupplement": local_info,
                "listErrors": paging["errors"], "codexHome": str(codex_home(harness.env)), "scannedFiles": None, **page_fields}
    threads, scanned = await asyncio.to_thread(_local_threads, harness, scope, args.get("cwd"), None)
    threads = [t for t in threads if _kind_listed(source_kind(t), kinds) and _text_matches(t, args.get("query"))]
    more = len(threads) > offset + limit
    data = [thread_view(t, None) for t in threads[offset:offset + limit]]
    return {"source": "local-jsonl-fallback", "archiveScope": scope, "data": data, "complete": not more and offset == 0,
            "hasMore": more, "nextCursor": str(offset + limit) if more else None, "endpoints": [], "appServerError": error,
            "listErrors": [], "codexHome": str(codex_home(harness.env)), "scannedFiles": scanned, **page_fields}


#: how many of the newest transcripts a search supplement reads
LOCAL_SEARCH_SCAN = 300


def _text_matches(thread: dict[str, Any], query: str | None) -> bool:
    """Whether a transcript thread's name or first message contains ``query`` (any case)."""
    return not query or query.lower() in f"{thread.get('name') or ''} {thread.get('preview') or ''}".lower()


def _local_matches(harness: CodexHarness, scope: str, cwd: Any, kinds: tuple[str, ...], query: str,
                   known: set[str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Transcript threads matching ``query`` that the app-servers' search did not return
    (``known``): their search does not cover every thread Codex has on disk. Reads the
    :data:`LOCAL_SEARCH_SCAN` newest transcripts.

    :returns: ``(rollout summaries, localSearchSupplement)``; the latter is ``{checked,
        addedCount, addedIds (at most 20), scannedFiles}`` or, when the transcripts cannot
        be read, ``{checked: false, error}``.
    """
    try:
        home = codex_home(harness.env)
        files = rollouts.rollout_files(home, scope)[:LOCAL_SEARCH_SCAN]
        names = rollouts.thread_names(home)
        cwds = {cwd} if isinstance(cwd, str) else set(cwd or [])
        added = []
        for path in files:
            summary = rollouts.summary(home, path, names)
            if (summary is None or summary["id"] in known or (cwds and summary.get("cwd") not in cwds)
                    or not _kind_listed(source_kind(summary), kinds) or not _text_matches(summary, query)):
                continue
            added.append(summary)
    except OSError as exc:
        return [], {"checked": False, "error": f"{type(exc).__name__}: {exc.strerror or exc}"}
    return added, {"checked": True, "addedCount": len(added), "addedIds": [t["id"] for t in added][:20], "scannedFiles": len(files)}


# Deepest offset a cursor may name: LIST_MAX_PAGES pages of LIST_PAGE threads per source.
MAX_CURSOR_OFFSET = 5000


def _offset(cursor: Any) -> int:
    """The offset a ``nextCursor`` of :func:`list_codex_threads` stands for (0 without one).

    :raises AgentLinkError: ``invalid_arguments`` (path ``cursor``) for anything else.
    """
    if cursor in (None, ""):
        return 0
    if isinstance(cursor, str) and cursor.isdigit() and int(cursor) <= MAX_CURSOR_OFFSET:
        return int(cursor)
    raise invalid_arguments([{"path": "cursor", "rule": "format",
                              "expected": "the nextCursor of an earlier list_codex_threads answer"}])


def _kind_listed(kind: str, kinds: tuple[str, ...]) -> bool:
    """Whether a thread of source ``kind`` is listed for ``kinds`` (custom kinds count as unknown)."""
    return kind in kinds or (kind not in SOURCE_KINDS and "unknown" in kinds)


def score_thread(view: dict[str, Any], query: str) -> tuple[int, list[str]]:
    """Search score of a thread for ``query``: per field weight × 4 exact, 3 prefix, 2
    contains, 1 all words; plus weight × (1 − min(index, 500)/500) for where it matches."""
    q = query.strip().lower()
    words = q.split()
    total, reasons = 0, []
    fields = {**view, "archiveState": "archived" if view.get("archived") else "active"}
    for name, weight in SEARCH_WEIGHTS:
        value = str(fields.get(name) or "").lower()
        if not value or not q:
            continue
        index = value.find(q)
        if value == q:
            factor, why = 4, "exact"
        elif index == 0:
            factor, why = 3, "prefix"
        elif index > 0:
            factor, why = 2, "contains"
        elif words and all(w in value for w in words):
            factor, why, index = 1, "words", value.find(words[0])
        else:
            continue
        total += weight * factor + int(weight * (1 - min(index, 500) / 500))
        reasons.append(f"{name}:{why}")
    return total, reasons


async def resolve_codex_thread(app: Any, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Tool handler: one thread by id or ranked words; ties are ambiguous."""
    harness = harness_of(app)
    query = args["query"].strip()
    limit = args.get("limit", 10)
    scope = _scope(args, "all")
    links, error = await thread_links(harness, args.get("useLocalFallback", True))
    kinds = source_kinds(True, True)
    if links:
        pairs, paging = await _app_server_threads(harness, links, scope, query=None, cwd=args.get("cwd"), kinds=kinds,
                                                  limit=200, to_end=True)
        views = [thread_view(t, ln) for ln, t in pairs]
        source, complete = "app-server", paging["complete"]
    else:
        threads, _ = await asyncio.to_thread(_local_threads, harness, scope, args.get("cwd"), None)
        views, source, complete = [thread_view(t, None) for t in threads], "local-jsonl-fallback", True
    bare = query.removeprefix("codex:")
    exact = [v for v in views if v["id"] == bare]
    if exact:
        best = {**exact[0], "score": None, "matchReasons": ["id:exact"]}
        return {"status": "resolved", "source": source, "archiveScope": scope, "query": query, "best": best,
                "candidates": [best], "selection": {"ambiguous": False, "tiedCount": 1}, "complete": complete, "appServerError": error}
    scored = []
    for v in views:
        points, reasons = score_thread(v, query)
        if points > 0:
            scored.append({**v, "score": points, "matchReasons": reasons})
    scored.sort(key=lambda v: (-v["score"], -(v.get("updatedAt") or 0)))
    tied = sum(1 for v in scored if v["score"] == scored[0]["score"]) if scored else 0
    status = "not_found" if not scored else ("ambiguous" if tied > 1 else "resolved")
    return {"status": status, "source": source, "archiveScope": scope, "query": query,
            "best": scored[0] if status == "resolved" else None, "candidates": scored[:limit],
            "selection": {"ambiguous": tied > 1, "tiedCount": tied}, "complete": complete, "appServerError": error}


async def list_loaded_codex_threads(app: Any, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Tool handler: threads loaded in the reachable app-servers (offset cursor).

    Each thread on the page is read once (``thread/read``) for its ``source``,
    ``parentThreadId``, ``agentNickname`` and ``agentRole``; ``sidebarMembership`` comes from
    the desktop sidebar when an app-server offers one (:func:`sidebar_membership`), and
    ``subagentRegistry`` lists the page's loaded sub-agent threads that the sidebar does not
    show, grouped by parent thread.
    """
    harness = harness_of(app)
    links = await harness.service.connect(spawn=True)
    loaded = await harness.service.loaded_ids(links)
    ids = sorted(loaded)
    try:
        start = int(args.get("cursor") or 0)
    except ValueError:
        raise invalid_arguments([{"path": "cursor", "rule": "format", "expected": "a cursor from an earlier answer"}]) from None
    limit = args.get("limit", 20)
    page = ids[start:start + limit]
    more = start + limit < len(ids)
    sidebar, sidebar_error = await _sidebar_state(links)
    membership = sidebar_membership(sidebar["sidebarState"], page)
    data = []
    for tid in page:
        link = loaded[tid]
        entry: dict[str, Any] = {"threadId": tid, "address": f"codex:{tid}", "endpoint": link.endpoint.id,
                                 "status": link.tracker.status.get(tid), "sidebarMembership": membership[tid]}
        try:
            thread = (await link.call("thread/read", {"threadId": tid, "includeTurns": False})).get("thread") or {}
        except AppServerError:
            thread = {}  # unloaded between the two calls: listed with what is known
        entry.update({"source": source_kind(thread) if thread else None, "parentThreadId": thread.get("parentThreadId"),
                      "agentNickname": thread.get("agentNickname"), "agentRole": thread.get("agentRole")})
        data.append(entry)
    subagents = [{k: e[k] for k in ("threadId", "address", "parentThreadId", "agentNickname", "agentRole", "sidebarMembership")}
                 for e in data if e["parentThreadId"] and e["sidebarMembership"] != "in_sidebar_model"]
    by_parent: dict[str, list[str]] = {}
    for sub in subagents:
        by_parent.setdefault(sub["parentThreadId"], []).append(sub["threadId"])
    out: dict[str, Any] = {
        "source": "app-server", "endpoints": [ln.endpoint.id for ln in links], "data": data,
        "threadIds": page, "nextCursor": str(start + limit) if more else None, "hasMore": more,
        "sidebarState": sidebar["sidebarState"], "sidebarStateError": sidebar_error,
        "sidebarMembershipSemantics": MEMBERSHIP_SEMANTICS, "sidebarMembershipByThreadId": membership,
        "subagentRegistry": {"loadedSubagents": subagents, "byParentThreadId": by_parent},
    }
    if args.get("threadId"):
        tid = bare_id(args["threadId"])
        out["lookup"] = {"threadId": tid, "loaded": tid in loaded, "endpoint": loaded[tid].endpoint.id if tid in loaded else None,
                         "complete": True}
    return out


MEMBERSHIP_SEMANTICS = ("sidebarMembership is in_sidebar_model (the desktop sidebar shows the thread), background_only (loaded, "
                        "but the sidebar lists it as a background thread or not at all) or unknown. It is known only when "
                        "sidebarState.authority is rendererSidebarModel; otherwise every thread is unknown.")
BACKGROUND_SECTION = "background-threads"


def sidebar_membership(state: dict[str, Any] | None, thread_ids: list[str]) -> dict[str, str]:
    """Thread id → ``in_sidebar_model`` / ``background_only`` / ``unknown``.

    :param state: a ``desktop/sidebar/state/read`` answer. Only one whose ``authority`` is
        ``rendererSidebarModel`` decides anything; its ``sections[]`` each have a ``key`` and
        ``itemKeys`` (``local:<threadId>`` for a local thread), the section keyed
        ``background-threads`` holding the threads run in the background. The desktop app
        was not available to verify this shape against: it is the one the original
        Agent Link read.
    """
    if not isinstance(state, dict) or state.get("authority") != "rendererSidebarModel":
        return dict.fromkeys(thread_ids, "unknown")
    shown: set[str] = set()
    for section in state.get("sections") or []:
        if not isinstance(section, dict) or section.get("key") == BACKGROUND_SECTION:
            continue
        for key in section.get("itemKeys") or []:
            if isinstance(key, str) and key.startswith("local:"):
                shown.add(key.removeprefix("local:"))
    return {tid: "in_sidebar_model" if tid in shown else "background_only" for tid in thread_ids}


# one thread ---------------------------------------------------------------------------------
async def get_codex_thread(app: Any, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Tool handler: one thread and its newest items, oldest first."""
    harness = harness_of(app)
    tid = bare_id(args["threadId"])
    recent = args.get("recentItems", 20)
    links, error = await thread_links(harness, args.get("useLocalFallback", True))
    if links:
        location = await harness.service.locate(tid, links, fresh=True)
        if location is None:
            raise AgentLinkError("not_found", f"No Codex thread {tid} is known.", {"id": tid, "candidates": []})
        link = location.link or location.readers[0]
        thread = dict(location.thread)
        if location.archived:
            thread["archived"] = True
        items = await _recent_items(link, tid, recent)
        turns = None
        if args.get("includeTurns"):
            page = await link.call("thread/turns/list", {"threadId": tid, "limit": 20, "itemsView": "summary"})
            turns = list(reversed(page.get("data") or []))
        out = {"source": "app-server", "thread": thread_view(thread, location.link, location.link is not None),
               "recentItems": items, "turns": turns, "appServerError": None}
        return await _with_receipts(app, args, call, tid, out)
    home = codex_home(harness.env)
    path = rollouts.find_rollout(home, tid)
    summary = rollouts.summary(home, path) if path is not None else None
    if summary is None:
        raise AgentLinkError("not_found", f"No Codex thread {tid} is known.", {"id": tid, "candidates": []})
    items = rollouts.history_items(home, path, recent) if recent else []
    out = {"source": "local-jsonl-fallback", "thread": thread_view(summary, None), "recentItems": items, "turns": None,
           "appServerError": error}
    return await _with_receipts(app, args, call, tid, out)


RECEIPTS_TOOL = "list_agent_link_receipts"


async def _with_receipts(app: Any, args: dict[str, Any], call: ToolCall, tid: str, out: dict[str, Any]) -> dict[str, Any]:
    """Add ``agentLinkReceipts`` when ``includeReceipts`` asks: the receipts plugin's
    ``list_agent_link_receipts`` for target ``codex:<tid>`` (newest first, ``receiptLimit``),
    or null plus warning ``receipts_unavailable`` when that plugin is not installed."""
    if not args.get("includeReceipts"):
        return out
    spec = app.hooks.tools().get(RECEIPTS_TOOL)
    if spec is None:
        out["agentLinkReceipts"] = None
        call.warnings.append({"code": "receipts_unavailable",
                              "message": "The receipts plugin (agent-link-receipts) is not installed, so no receipts can be shown.",
                              "details": {"tool": RECEIPTS_TOOL}})
        return out
    limit = args.get("receiptLimit", 10)
    if limit == 0:
        out["agentLinkReceipts"] = []
        return out
    answer = await spec.handler(app, {"target": f"codex:{tid}", "limit": limit}, call)
    out["agentLinkReceipts"] = list(answer.get("data") or [])[:limit]
    return out


SIDEBAR_SEMANTICS = ("sidebarState is what the Codex desktop app's own app-server returns for desktop/sidebar/state/read, "
                     "unchanged; it is authoritative only when sidebarState.authority is rendererSidebarModel. An app-server "
                     "without that method is listed in sidebarState.unsupported.")


async def get_codex_sidebar_state(app: Any, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Tool handler: the desktop sidebar as the first app-server offering it returns it; an
    app-server without the method (a plain ``codex app-server``) is listed under
    ``sidebarState.unsupported`` and the answer is still ok (authority null).

    :raises AgentLinkError: ``upstream_error`` when an app-server fails the read otherwise.
    """
    harness = harness_of(app)
    links = await harness.service.connect(spawn=True)
    answer, error = await _sidebar_state(links)
    if error is not None:
        raise AgentLinkError(error["code"], error["message"], error["details"], hint=error["hint"])
    return {"source": "app-server", **answer, "sidebarMembershipSemantics": SIDEBAR_SEMANTICS}


async def _sidebar_state(links: list[Link]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``({endpoint, sidebarState}, error)``: the first app-server's sidebar that has one, else
    ``sidebarState = {authority: None, unsupported: [...], note}``; ``error`` is the error
    object (code, message, details, hint) of an app-server that failed the read for another reason."""
    unsupported: list[dict[str, Any]] = []
    for link in links:
        try:
            state = await link.call("desktop/sidebar/state/read", {})
        except AppServerError as exc:
            if "unknown variant" in exc.message or exc.code == -32601:
                unsupported.append({"endpoint": link.endpoint.id, "method": "desktop/sidebar/state/read",
                                    "reason": "method_not_supported", "rpcCode": exc.code})
                continue
            failed = exc.to_agent_link_error()
            return ({"endpoint": link.endpoint.id, "sidebarState": None},
                    {"code": failed.code, "message": failed.message, "details": failed.details, "hint": failed.hint})
        return {"endpoint": link.endpoint.id, "sidebarState": state}, None
    return ({"endpoint": None,
             "sidebarState": {"authority": None, "unsupported": unsupported,
                              "note": "Only the Codex desktop app's own app-server has a sidebar; agent-link never looks for it on its own "
                                      "(point AGENT_LINK_CODEX_URL at such a server)."}}, None)


async def wait_for_codex_thread(app: Any, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Tool handler: wait until the thread's current turn is over.

    Besides the outcome the result carries ``waitState`` (what the wait saw, see
    :func:`_wait_state`) and ``thread`` (the thread's view with its last ``recentItems``
    message items, oldest first, default 10) as read when the wait ended.
    """
    harness = harness_of(app)
    tid = bare_id(args["threadId"])
    requested = timeout_ms = args.get("timeoutMs", 60_000)
    poll_ms = args.get("pollIntervalMs", 1000)
    cap_ms, every_ms = waits_of(app).wait_limits()
    capped = call.progress is None and timeout_ms > cap_ms
    if capped:
        call.warnings.append(wait_capped_warning(timeout_ms, cap_ms))
        timeout_ms = cap_ms
    links, error = await thread_links(harness, True)
    start = time.monotonic()
    seen_active: set[str] = set()
    polls = 0
    next_progress = every_ms
    while True:
        observed = await observe(harness, links, tid)
        polls += 1
        status, turn = observed["status"], observed["turn"]
        waited = int((time.monotonic() - start) * 1000)
        if status == "active":
            seen_active.add((turn or {}).get("turnId") or "")
        ended = status is not None and status != "active"
        if ended or waited >= timeout_ms:
            out = {"outcome": ("turn_completed" if seen_active else "idle") if ended else "timeout", "timedOut": not ended,
                   "waitedMs": waited, "target": {"threadId": tid, "address": f"codex:{tid}"},
                   "status": status if ended else (status or "unknown"), "turn": turn,
                   "finalResponse": (turn or {}).get("finalResponse") if ended else None, "source": observed["source"],
                   "appServerError": error, "waitState": _wait_state(observed, seen_active, polls, ended),
                   "thread": await _thread_snapshot(harness, observed, tid, args.get("recentItems", 10))}
            return {**out, "capped": True, "requestedTimeoutMs": requested} if capped and not ended else out
        if call.progress is not None and waited >= next_progress:
            await call.progress(waited, timeout_ms, "waiting for the turn to end")
            next_progress = waited + every_ms
        await asyncio.sleep(min(poll_ms, timeout_ms - waited, max(next_progress - waited, 1) if call.progress else poll_ms) / 1000)


def _wait_state(observed: dict[str, Any], seen_active: set[str], polls: int, ended: bool) -> dict[str, Any]:
    """What a ``wait_for_codex_thread`` saw: ``threadStatus`` at the last read (None when a
    transcript without lifecycle events left it unknown), ``latestTurnId`` /
    ``latestTurnStatus`` (the newest turn then; ids are null from transcripts),
    ``activeTurnIds`` (turns seen running during the wait, in no order), ``sawActiveTurn``,
    ``polls`` (reads made), ``continueWaiting`` (true when the wait ended by its time limit
    while the turn still ran or the state stayed unknown) and ``statusSource``
    (``app-server`` or ``local-jsonl-fallback``)."""
    turn = observed["turn"] or {}
    return {"threadStatus": observed["status"], "latestTurnId": turn.get("turnId"), "latestTurnStatus": turn.get("status"),
            "activeTurnIds": sorted(t for t in seen_active if t), "sawActiveTurn": bool(seen_active), "polls": polls,
            "continueWaiting": not ended, "statusSource": observed["source"]}


async def _thread_snapshot(harness: CodexHarness, observed: dict[str, Any], tid: str, recent: int) -> dict[str, Any]:
    """The thread's public view plus ``recentItems`` (its last ``recent`` message items, oldest first)."""
    link = observed.get("link")
    if link is not None:
        view = thread_view(observed["thread"], observed.get("loaded_on"), observed.get("loaded_on") is not None)
        return {**view, "recentItems": await _recent_items(link, tid, recent)}
    home = codex_home(harness.env)
    path = observed["path"]
    return {**thread_view(observed["thread"], None), "recentItems": rollouts.history_items(home, path, recent) if recent else []}


async def _recent_items(link: Link, tid: str, recent: int) -> list[dict[str, Any]]:
    """The thread's newest ``recent`` items from ``thread/items/list``, oldest first, each with its ``turnId``."""
    if not recent:
        return []
    page = await link.call("thread/items/list", {"threadId": tid, "limit": recent, "sortDirection": "desc"})
    return [{**(e.get("item") or {}), "turnId": e.get("turnId")} for e in reversed(page.get("data") or [])]


# launch / archive / message -------------------------------------------------------------------
