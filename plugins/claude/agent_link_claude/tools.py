"""MCP tools for Claude sessions (docs/behaviour.md §5; docs/hosts/claude-code.md for the host).

They are thin: listing, resolving, sending and waiting go through the core's
:class:`~agent_link_core.app.App` operations, restricted to the ``claude`` harness. What they
add: Claude's id forms (``claude:<id>``, a CLI session id, Desktop ``local_<id>``), the
``surface`` filter, the delivery word of ``message_claude_session`` (see
:mod:`agent_link_claude.harness`) and the ``idle`` outcome of ``wait_for_claude_session``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from agent_link_core.sending import message_summary
from agent_link_core.directory import session_view
from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.model import Caller, Session, address_scheme, is_address
from agent_link_core.tools.core_tools import ANTICIPATION, MESSAGE_ID, RECEIPT, REPLY_BY, idempotency_key
from agent_link_core.tools.schemas import (AGENT_QUERY, BOOL, CURSOR, LISTING_PAGE, NOBJ, NSTR, OBJ, PATH, POLL_MS, RESOLVE_RESULT, STR, TIMEOUT_MS, ULID,
                                          closed_object, limit_arg)
from agent_link_core.tools.registry import ToolCall, ToolSpec

from agent_link_waits.waits import waits_of

from agent_link_claude.harness import DELIVERY_STATES, NAME, ClaudeHarness
from agent_link_claude.sessions import ID_RE

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App

IDLE_CHECK_S = 2.0  # how often a wait looks whether a running target has stopped
SURFACE = {"type": "string", "enum": ["all", "desktop", "code"], "default": "all",
           "description": "code (Claude Code, CLI or Desktop's Code tab), desktop (Desktop agent sessions) or all."}
SESSION_ID = {"type": "string", "minLength": 1, "maxLength": 140,
              "description": "claude:<id>, a Claude Code session id, or a Claude Desktop local_<id>."}
SESSIONS_OUT = {"sessions": {"type": "array", "items": OBJ}, "provider": NOBJ, **LISTING_PAGE}
TURN_OVERRIDES = ("model", "effort", "cwd")




def _harness(app: App) -> ClaudeHarness:
    harness = app.harnesses.get(NAME)
    if not isinstance(harness, ClaudeHarness):
        raise AgentLinkError("claude_unavailable", "The claude harness is not loaded.", {"searched": []})
    return harness


def claude_id(value: str, path: str = "sessionId") -> str:
    """The bare session id from ``claude:<id>`` or ``<id>``.

    :raises AgentLinkError: ``invalid_arguments`` for another harness's address or a
        malformed id.
    """
    value = value.strip()
    if value.startswith(f"{NAME}:"):
        ident = value[len(NAME) + 1 :]
    elif ":" in value:
        raise invalid_arguments([{"path": path, "rule": "harness", "expected": "a claude:<id> address or a Claude session id"}])
    else:
        ident = value
    if not ID_RE.match(ident):
        raise invalid_arguments([{"path": path, "rule": "pattern", "expected": "a session id of letters, digits, '_', '.' or '-'"}])
    return ident


async def _require_session(harness: ClaudeHarness, value: str) -> Session:
    session = await harness.get_session(claude_id(value))
    if session is None:
        raise AgentLinkError(
            "not_found", f"No Claude session {value} is known here.", {"id": value, "candidates": []},
            hint="List sessions with list_claude_sessions or find one with resolve_claude_session.",
        )
    return session


def _target(session: Session) -> dict[str, Any]:
    return {"address": session.address, "sessionId": session.id, "title": session.title,
            "loaded": session.loaded, "surface": list(session.surface)}


# -- handlers ----------------------------------------------------------------------------------


async def list_claude_sessions(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    surface = args.get("surface", "all")
    out = await app.list_agents(
        harness=NAME, surface=None if surface == "all" else surface,
        include_archived=args.get("includeArchived", False), limit=args.get("limit", 20), cursor=args.get("cursor"),
    )
    return _page(out)


async def list_loaded_claude_sessions(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    surface = args.get("surface", "all")
    out = await app.list_agents(harness=NAME, loaded=True, surface=None if surface == "all" else surface,
                                limit=args.get("limit", 20), cursor=args.get("cursor"))
    return _page(out)


def _page(out: dict[str, Any]) -> dict[str, Any]:
    """A list tool's result from the core's listing page: the sessions, this harness's
    provider report, and whether the page is the whole listing (``complete``, ``hasMore``,
    ``nextCursor``, ``filters``, ``filteredOut`` as list_agents has them)."""
    return {"sessions": out["sessions"], "provider": out["providers"].get(NAME),
            **{k: out[k] for k in ("complete", "hasMore", "nextCursor", "filters", "filteredOut")}}


async def get_claude_session(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    session = await _require_session(_harness(app), args["sessionId"])
    return {"session": session_view(session)}


async def _resolve(app: App, query: str, surface: str, limit: int, caller: Caller, *, skip_archived: bool) -> dict[str, Any]:
    """The core's resolve_agent restricted to Claude sessions of ``surface``."""
    query = query.strip()
    if is_address(query) and address_scheme(query) not in (NAME, "role"):
        raise invalid_arguments([{"path": "query", "rule": "harness", "expected": "words, a Claude session id, claude:<id> or role:<name>"}])
    verdict = await app.resolve_agent(query, harness=NAME, limit=limit, caller=caller)
    candidates = [
        c for c in verdict["candidates"]
        if c.get("harness") == NAME and (surface == "all" or surface in (c.get("surface") or []))
        and not (skip_archived and c.get("archived"))
    ]
    if len(candidates) == len(verdict["candidates"]):
        return verdict
    if not candidates:
        status = "not_found"
    elif len(candidates) == 1 or ("score" in candidates[0] and candidates[1].get("score", 0) < candidates[0]["score"]):
        status = "resolved"
    else:
        status = "ambiguous"
    reasons = candidates[0].get("matchReasons", []) if candidates else []
    return {
        **verdict, "status": status, "best": candidates[0] if status == "resolved" else None, "candidates": candidates,
        "selection": {"ambiguous": status == "ambiguous", "matchReasons": reasons},
    }


async def resolve_claude_session(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    return await _resolve(app, args["query"], args.get("surface", "all"), args.get("limit", 10), call.caller, skip_archived=False)


async def wait_for_session(
    app: App, harness: ClaudeHarness, caller: Caller, session: Session, reply_to: str | None, timeout_ms: int, poll_ms: int,
    progress: Any = None,
) -> dict[str, Any]:
    """The core's wait, plus outcome ``idle``: the target was running when the wait began and
    has stopped since (checked every :data:`IDLE_CHECK_S` seconds).

    :raises AgentLinkError: ``no_current_session`` without ``reply_to`` for an unknown caller,
        and whatever :meth:`~agent_link_waits.waits.Waits.wait` raises (``not_found``, ``permission_denied``).
    """
    if reply_to is None:
        app.require_caller(caller)
    else:
        app.mailbox.require(reply_to)
    running = bool(session.loaded)
    found: dict[str, Any] = {}
    start = anyio.current_time()

    async with anyio.create_task_group() as tg:

        async def wait() -> None:
            try:
                found["result"] = await waits_of(app).wait(caller=caller, agent=session.address, reply_to=reply_to,
                                                 timeout_ms=timeout_ms, poll_ms=poll_ms, progress=progress)
            except AgentLinkError as exc:
                found["error"] = exc
            tg.cancel_scope.cancel()

        async def watch() -> None:
            while running:
                await anyio.sleep(IDLE_CHECK_S)
                now = await harness.get_session(session.id)
                if now is None or not now.loaded:
                    found["idle"] = True
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(wait)
        tg.start_soon(watch)
    if "error" in found:
        raise found["error"]
    result = found.get("result")
    if result is None:  # the target stopped: one last look, so a reply sent just before is not missed
        last = await waits_of(app).wait(caller=caller, agent=session.address, reply_to=reply_to, timeout_ms=0, poll_ms=250) if reply_to else None
        if last is not None and not last["timedOut"]:
            result = last
        else:
            result = {"outcome": "idle", "timedOut": False, "harness": NAME,
                      "waitedMs": int((anyio.current_time() - start) * 1000)}
            if reply_to:
                result["messageStatus"] = app.mailbox.state(app.mailbox.stored(reply_to)).status
    result["target"] = {"address": session.address, "sessionId": session.id, "lastLoaded": running and "idle" not in found}
    return result


async def wait_for_claude_session(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    harness = _harness(app)
    session = await _require_session(harness, args["sessionId"])
    return await wait_for_session(app, harness, call.caller, session, args.get("replyToMessageId"),
                                  args.get("timeoutMs", 60000), args.get("pollIntervalMs", 1000), call.progress)


async def message_claude_session(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    overrides = [k for k in TURN_OVERRIDES if k in args]
    if overrides:
        raise AgentLinkError("unsupported", "Claude sessions take no model, effort or cwd changes with a message.",
                             {"capability": "turn_overrides", "arguments": overrides})
    if ("sessionId" in args) == ("query" in args):
        raise invalid_arguments([{"path": "sessionId", "rule": "xor", "expected": "exactly one of sessionId (exact) and query (fuzzy)"}])
    harness = _harness(app)
    exact = "sessionId" in args  # an exact id may name an archived session; a query never picks one
    if exact:
        value = args["sessionId"].strip()
        if value.startswith("role:"):
            to, resolution = value, {"via": value, "query": value, "matchReasons": ["role"]}
        else:
            to = f"{NAME}:{claude_id(value)}"
            resolution = {"via": "exact", "query": value, "matchReasons": ["id:exact"]}
    else:
        verdict = await _resolve(app, args["query"], args.get("surface", "all"), 10, call.caller, skip_archived=True)
        short = [{"address": c["address"], "title": c.get("title"), "score": c.get("score")} for c in verdict["candidates"][:5]]
        if verdict["status"] != "resolved":
            code = "ambiguous" if verdict["status"] == "ambiguous" else "not_found"
            raise AgentLinkError(code, f"{args['query']!r} does not name exactly one Claude session.",
                                 {"query": args["query"], "candidates": short},
                                 hint="Pass sessionId with one of the candidates' addresses.")
        to = verdict["best"]["address"]
        resolution = {"via": "fuzzy", "query": args["query"], "matchReasons": verdict["best"].get("matchReasons", []),
                      "candidates": short}
    recipient, _, _ = await app.target_address(to, call.caller, allow_archived=exact)
    if address_scheme(recipient) != NAME:
        raise AgentLinkError("not_found", f"{to} is held by {recipient}, which is not a Claude session.",
                             {"query": to, "candidates": [{"address": recipient}]},
                             hint="Use message_agent for agents of other hosts.")
    options = {"deliveryPreference": args.get("deliveryPreference", "auto")}
    message_id, fingerprint = idempotency_key(args)
    outcome = await app.send(
        caller=call.caller, to=to, body=args["message"], anticipation=args.get("anticipation"),
        reply_by=args.get("replyBy"), wait_for_reply=args.get("waitForReply", False),
        reply_to=args.get("replyToMessageId"), tool="message_claude_session", arguments=args, options=options,
        allow_archived=exact, message_id=message_id, metadata={"fingerprint": fingerprint} if fingerprint else None,
    )
    summary = message_summary(app, outcome)
    delivery = outcome.delivery
    if delivery is None:  # an identical resend: say how the stored message travels now
        delivery = await harness.deliver(outcome.message, "", options)
    session = await harness.get_session(recipient.split(":", 1)[1])
    result: dict[str, Any] = {
        "messageId": summary["messageId"],
        "delivery": delivery.state,
        "messageDelivery": summary["delivery"],
        "deliveredVia": summary["deliveredVia"],
        "target": _target(session) if session is not None else {"address": recipient},
        "resolution": resolution,
        "anticipation": summary["anticipation"],
        "replyBy": summary["replyBy"],
        "inReplyTo": summary["inReplyTo"],
        "messageStatus": summary["messageStatus"],
        "duplicate": summary["duplicate"],
        "via": summary["via"],
        "receipt": summary.get("receipt"),
        "roleProcedure": summary.get("roleProcedure"),
    }
    warnings = list(summary.get("warnings") or [])
    if args.get("allowTargetOverride") is not None:
        warnings.append({"code": "deprecated_argument", "details": {"argument": "allowTargetOverride"},
                         "message": "allowTargetOverride is deprecated; Claude sessions take no overrides, so it has no effect here."})
    if warnings:
        result["warnings"] = warnings
    reply_to = args.get("replyToMessageId")
    if reply_to:
        answered = app.mailbox.state(app.mailbox.stored(reply_to)).resolution
        if answered and answered.get("replyMessageId") == result["messageId"]:
            result["resolved"] = {"messageId": reply_to, "kind": "reply", "late": answered["late"]}
    if args.get("waitForReply") and session is not None:
        result["wait"] = await wait_for_session(app, harness, call.caller, session, result["messageId"],
                                                args.get("timeoutMs", 60000), args.get("pollIntervalMs", 1000), call.progress)
    return result


# -- tool records ------------------------------------------------------------------------------

WAIT_OUT = {
    "outcome": {"type": "string", "enum": ["reply", "declined", "done", "unresolved", "expired", "idle", "timeout"]},
    "harness": STR, "messageStatus": NSTR, "waitedMs": {"type": "integer"}, "target": OBJ, "reply": OBJ,
    "resolution": OBJ, "timedOut": BOOL, "capped": BOOL, "requestedTimeoutMs": {"type": "integer"},
}

CLAUDE_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="list_claude_sessions",
        title="List Claude sessions",
        description="List Claude Code and Claude Desktop sessions on this machine, newest first, with the agent-link address (claude:<id>) to message each one.",
        input_schema=closed_object({"includeArchived": {"type": "boolean", "default": False}, "surface": SURFACE, "limit": limit_arg(20, 200),
                                    "cursor": CURSOR}),
        output_fields=SESSIONS_OUT,
        handler=list_claude_sessions, read_only=True, idempotent=True,
    ),
    ToolSpec(
        name="list_loaded_claude_sessions",
        title="List running Claude sessions",
        description="List the Claude sessions that run right now (a live Claude Code process), newest first, with their agent-link addresses.",
        input_schema=closed_object({"surface": SURFACE, "limit": limit_arg(20, 200), "cursor": CURSOR}),
        output_fields=SESSIONS_OUT,
        handler=list_loaded_claude_sessions, read_only=True, idempotent=True,
    ),
    ToolSpec(
        name="get_claude_session",
        title="Get a Claude session",
        description="Show one Claude session by claude:<id>, session id or Desktop local_<id> (archived sessions included): title, folder, running or not, how mail reaches it.",
        input_schema=closed_object({"sessionId": SESSION_ID}, ("sessionId",)),
        output_fields={"session": OBJ},
        handler=get_claude_session, read_only=True, idempotent=True,
    ),
    ToolSpec(
        name="resolve_claude_session",
        title="Resolve a Claude session",
        description="Find one Claude session by id or by words from its title or folder. Reports resolved, ambiguous (with candidates) or not_found.",
        input_schema=closed_object({"query": AGENT_QUERY, "surface": SURFACE, "limit": limit_arg(10, 50)}, ("query",)),
        output_fields=RESOLVE_RESULT,
        handler=resolve_claude_session, read_only=True, idempotent=True, removed={"searchTerm": "query"},
    ),
    ToolSpec(
        name="message_claude_session",
        title="Message a Claude session",
        description=(
            "Send a message to another Claude session through agent-link (not Claude's own messaging). Name it "
            "exactly with sessionId or by words with query. It is stored first; delivery says how it travels: "
            "queued-channel (pushed into the running session within seconds), queued-online (running; it sees a "
            "note at its next prompt), queued-offline (not running; seen when resumed), queued (only "
            "announced, never pushed). Set anticipation reply/action when you expect an answer."
        ),
        input_schema=closed_object({
            "sessionId": {**SESSION_ID, "description": "Exact target: claude:<id>, a session id, local_<id>, or role:<name> (archived sessions included)."},
            "query": {**AGENT_QUERY, "description": "Words matching the target's title or folder (archived sessions skipped)."},
            "message": {"type": "string", "minLength": 1, "description": "The text (at most 64 KiB UTF-8)."},
            "surface": SURFACE,
            "deliveryPreference": {"type": "string", "enum": ["auto", "channel", "mailbox"], "default": "auto",
                                   "description": "auto: push when the target has a live channel; channel: the same, with a warning when it has none; mailbox: never push."},
            "replyToMessageId": {**ULID, "description": "This message answers that one (resolving it when you are its recipient)."},
            "anticipation": ANTICIPATION, "replyBy": REPLY_BY,
            "waitForReply": {"type": "boolean", "default": False, "description": "Wait for the recipient's resolution (implies anticipation reply)."},
            "timeoutMs": TIMEOUT_MS, "pollIntervalMs": POLL_MS, "receipt": RECEIPT,
            "model": {"type": "string", "description": "Not supported for Claude sessions."},
            "effort": {"type": "string", "description": "Not supported for Claude sessions."},
            "cwd": {**PATH, "description": "Not supported for Claude sessions."},
            "allowTargetOverride": {"type": "boolean", "description": "Deprecated; no effect (Claude sessions take no overrides)."},
            "messageId": MESSAGE_ID,
        }, ("message",)),
        output_fields={
            "messageId": STR, "delivery": {"type": "string", "enum": list(DELIVERY_STATES)}, "messageDelivery": STR,
            "deliveredVia": NSTR, "target": OBJ, "resolution": OBJ, "anticipation": STR, "replyBy": NSTR,
            "inReplyTo": NSTR, "messageStatus": NSTR, "duplicate": BOOL, "via": NSTR, "resolved": OBJ, "wait": OBJ,
            "receipt": {"type": ["object", "null"]}, "roleProcedure": {"type": ["object", "null"]},
        },
        handler=message_claude_session,
        removed={"to": "sessionId (exact) or query (fuzzy)", "body": "message", "latestMessageId": "replyToMessageId"},
    ),
    ToolSpec(
        name="wait_for_claude_session",
        title="Wait for a Claude session",
        description=(
            "Wait for a Claude session's answer to a message you sent (replyToMessageId), or for any new message "
            "from it. Outcome idle means the session was running and has stopped. A timeout is a normal result: "
            "call again to keep waiting."
        ),
        input_schema=closed_object({"sessionId": SESSION_ID, "replyToMessageId": ULID, "timeoutMs": TIMEOUT_MS, "pollIntervalMs": POLL_MS},
                                   ("sessionId",)),
        output_fields=WAIT_OUT,
        handler=wait_for_claude_session, read_only=True,
    ),
)
