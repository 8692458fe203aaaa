"""The host-neutral MCP tools: health, directory, messaging, inbox, status (docs/behaviour.md §5).
Options only some harnesses understand are declared by them (:class:`~agent_link_core.harness.SendOption`); every handler
is a :attr:`~agent_link_core.tools.registry.ToolSpec.handler`."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from agent_link_core.boundary import Refused
from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.harness import SendOption, acall_harness
from agent_link_core.mailbox import new_message_id, ulid_of_uuid
from agent_link_core.model import is_address, is_ulid
from agent_link_core.sending import message_summary
from agent_link_core.tools.registry import MAX_WAIT_PER_CALL_MS, ToolCall, ToolSpec, check_schema, client_gone
from agent_link_core.tools.schemas import (AGENT_QUERY, ANY, BOOL, CURSOR, IDEMPOTENCY_KEY, INT, LISTING_PAGE, NOBJ, NSTR, OBJ, RESOLVE_RESULT,
                                          STR, ULID, closed_object, limit_arg)

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App

OPTION_NAME_RE = re.compile(r"^[a-z][A-Za-z0-9]{0,63}$")
ANTICIPATION = {"type": "string", "enum": ["reply", "action", "fyi"],
                "description": "What the sender expects: reply (an answer), action (something done), fyi (nothing)."}
REPLY_BY = {"type": "string", "minLength": 1,
            "description": "ISO 8601 deadline with a timezone, at least 30 s ahead; not with fyi."}
HARNESS_FILTER = {"type": "string", "pattern": "^(all|[a-z][a-z0-9-]{0,31})$", "description": "all, or one harness name."}
TIMEOUT_MS = {"type": "integer", "minimum": 0, "maximum": 600000, "default": 60000,
              "description": "How long to wait, in ms. A client that sends a progress token gets a progress notification every 10 s "
                             "and the wait runs up to timeoutMs; without one a call returns within 50 s (result capped: true; "
                             "call again to keep waiting)."}
POLL_MS = {"type": "integer", "minimum": 250, "maximum": 10000, "default": 1000, "description": "Poll interval in ms."}
RECEIPT = {"type": "object", "description": "Audit receipt fields (used when a receipts plugin is installed).",
           "properties": {"record": BOOL, "purpose": STR, "originThreadId": STR, "originTurnId": STR, "originToolCallId": STR,
                          "cleanupRecommendation": STR, "note": STR, "tags": {"type": "array", "items": STR}},
           "additionalProperties": False}
SEND_RESULT: dict[str, Any] = {
    "messageId": STR, "to": STR, "harness": STR, "delivery": STR, "deliveredVia": NSTR, "deliveryState": STR,
    "anticipation": STR, "replyBy": NSTR, "inReplyTo": NSTR, "messageStatus": NSTR, "duplicate": BOOL, "via": NSTR,
    "resolution": NOBJ, "wait": OBJ, "resolved": OBJ, "action": STR, "sessionId": STR,
    "target": OBJ, "receipt": OBJ, "roleProcedure": NOBJ, "evidence": OBJ, "deliveryNote": STR,
}
#: The caller's own id for what a send tool stores: its idempotency key (the CLI's ``--message-id``).
MESSAGE_ID: dict[str, Any] = {
    **IDEMPOTENCY_KEY,
    "description": "Your id for this message (a ULID or a UUID), so that retrying is safe: the same messageId with the same "
                   "content stores and pushes nothing new and returns the first message (duplicate: true); other content "
                   "under the same messageId is refused (invalid_arguments, rule idempotency) naming what differs.",
}


def idempotency_key(args: dict[str, Any], path: str = "messageId") -> tuple[str | None, dict[str, Any]]:
    """The message id a send tool stores under, from its validated :data:`MESSAGE_ID` argument ``args[path]``:
    ``(ULID or None, fingerprint)``; the fingerprint (``{"clientMessageId": uuid}`` for a UUID, else empty) goes into the
    message's ``metadata["fingerprint"]``, which the idempotency comparison includes."""
    given = args.get(path)
    if given is None or is_ulid(given.upper()):
        return given and given.upper(), {}
    return ulid_of_uuid(given), {"clientMessageId": given.lower()}


def harness_declared(app: App | None, attribute: str) -> dict[str, Any]:
    """What the App's harnesses declare in ``attribute`` (a :class:`~agent_link_core.harness.Harness` dict, or SendOptions)
    by name, the first harness (by name) declaring a name defining it (also for a plugin's tool, as ``wait_result_fields``)."""
    declared: dict[str, Any] = {}
    for _, harness in sorted((app.harnesses if app is not None else {}).items()):
        items = getattr(harness, attribute, ())  # a plugin's own declaration (wait_result_fields) may be absent
        for name, value in (items.items() if isinstance(items, Mapping) else ((o.name, o) for o in items)):
            declared.setdefault(name, value)
    return declared


#: the core tools a harness extends: name -> (the Harness attribute declaring arguments, the one declaring result fields)
EXTENDED = {"message_agent": ("send_option_specs", "send_result_fields"), "agent_link_health": ("health_options", None)}


def core_specs(app: App | None) -> list[ToolSpec]:
    """:data:`CORE_TOOLS`, those of :data:`EXTENDED` with the arguments and result fields (``SendOption`` schemas for
    send options) the App's harnesses declare for them before their own."""
    specs = []
    for spec in CORE_TOOLS:
        arguments, fields = (harness_declared(app, attribute) if attribute else {} for attribute in EXTENDED.get(spec.name, (None, None)))
        arguments = {name: value.schema if isinstance(value, SendOption) else value for name, value in arguments.items()}
        if arguments:
            spec = replace(spec, input_schema={**spec.input_schema, "properties": {**arguments, **spec.input_schema["properties"]}})
        specs.append(replace(spec, output_fields={**fields, **spec.output_fields}) if fields else spec)
    return specs


def check_send_declarations(harness: Any) -> None:
    """Check a harness's send options and result fields, which become part of ``message_agent`` (``Hooks.tools``).
    :raises Refused: a declaration of the wrong type, a name the core uses, an invalid schema."""
    from jsonschema.exceptions import SchemaError

    base = next(spec for spec in CORE_TOOLS if spec.name == "message_agent")
    specs = getattr(harness, "send_option_specs", ())
    fields = getattr(harness, "send_result_fields", {})
    if not isinstance(specs, (tuple, list)) or not isinstance(fields, Mapping):
        raise Refused(f"harness {harness.name!r} declares send_option_specs or send_result_fields of the wrong type",
                      "send_option_specs is a tuple of SendOption; send_result_fields a dict of JSON schemas.")
    named: list[tuple[str, Any]] = []
    for option in specs:
        if not isinstance(option, SendOption) or not isinstance(option.name, str) or not OPTION_NAME_RE.match(option.name):
            raise Refused(f"harness {harness.name!r} declares a send option that is not a SendOption with a camelCase name",
                          "Declare SendOption('name', {json schema}).")
        if option.name in base.input_schema["properties"]:
            raise Refused(f"harness {harness.name!r} declares send option {option.name!r}, which is message_agent's own argument",
                          "Name the option something of your own.")
        named.append((f"send option {option.name!r}", option.schema))
    for field_name, schema in fields.items():
        if field_name in base.output_fields or field_name in ("ok", "error", "warnings"):
            raise Refused(f"harness {harness.name!r} declares result field {field_name!r}, which the core declares already",
                          "Name the field something of your own.")
        named.append((f"result field {field_name!r}", schema))
    for what, schema in named:
        try:
            if not isinstance(schema, Mapping):
                raise SchemaError("not an object")
            check_schema(schema)
        except SchemaError as exc:
            raise Refused(f"harness {harness.name!r} declares {what} with an invalid JSON schema: {exc.message[:200]}",
                          "Fix the schema (JSON Schema draft 2020-12).") from None


async def health(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """``agent_link_health``; the harness-declared options given (``Harness.health_options``) reach every harness's
    ``prepare_health`` first."""
    options = {k: args[k] for k in harness_declared(app, "health_options") if k in args}
    for harness in list(app.harnesses.values()):  # a harness that fails here is reported; health goes on
        await acall_harness(app.hooks, harness, "prepare_health", partial(harness.prepare_health, options))
    return app.health(call.meta, include_caller_context=args.get("includeCallerContext", False))


def with_roles(app: App, views: list[dict[str, Any]]) -> None:
    """Add ``roles`` (the role names each session holds, ``agent_link_session_roles``; maybe ``[]``) to session views."""
    held = app.hooks.session_roles([v["address"] for v in views if isinstance(v.get("address"), str)])
    for view in views:
        view["roles"] = held.get(view.get("address") or "", [])


async def list_agents(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """The ``list_agents`` tool's handler (see the module doc)."""
    app.directory.check_harness(args.get("harness", "all"))
    out = await app.list_agents(
        harness=args.get("harness", "all"), loaded=args.get("loaded"), surface=args.get("surface"),
        include_archived=args.get("includeArchived", False), limit=args.get("limit", 20), cursor=args.get("cursor"),
    )
    with_roles(app, out["sessions"])
    caller = call.caller
    return {**out, "caller": {"host": caller.host, "address": caller.address, "source": caller.source}}


async def resolve_agent(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """The ``resolve_agent`` tool's handler (see the module doc)."""
    app.directory.check_harness(args.get("harness", "all"))
    out = await app.resolve_agent(args["query"], harness=args.get("harness", "all"), limit=args.get("limit", 10), caller=call.caller)
    views = [v for v in [out.get("best"), *out.get("candidates", [])] if isinstance(v, dict)]
    with_roles(app, views)
    return out


async def message_agent(app: App, args: dict[str, Any], call: ToolCall, *, tool: str = "message_agent") -> dict[str, Any]:
    """``message_agent``; ``tool``: the name the send is recorded under (``SendContext.tool``, which ``before_send``
    hooks see): a plugin tool that sends through this handler names itself."""
    started = time.monotonic()
    declared: dict[str, SendOption] = harness_declared(app, "send_option_specs")
    options = {k: args[k] for k in declared if k in args}
    named = app.harnesses.get(args["to"].split(":", 1)[0]) if is_address(args["to"]) else None
    # an exact address may name an archived session of a harness whose archived sessions take mail
    allow_archived = named is not None and named.archived_sessions_take_mail
    target = await app.target_address(args["to"], call.caller, allow_archived=allow_archived)
    recipient = target[0]
    harness = app.harnesses.get(recipient.split(":", 1)[0])
    supported = {o.name for o in harness.send_option_specs} if harness is not None else set()
    lacking = [k for k in options if k not in supported and declared[k].capability]
    if lacking:
        capability = declared[lacking[0]].capability
        lacking = [k for k in lacking if declared[k].capability == capability]
        raise AgentLinkError("unsupported", f"{recipient} cannot take {', '.join(lacking)} changes.",
                             {"capability": capability, "arguments": lacking},
                             hint=f"Send without {', '.join(lacking)}.")
    others = [k for k in options if k not in supported]
    if others:
        raise invalid_arguments([{"path": k, "rule": "unsupported_for_target", "expected": "omit it for this target"} for k in others])
    message_id, fingerprint = idempotency_key(args)
    if args.get("waitForReply"):
        if not app.hooks.waits():
            raise AgentLinkError("unsupported", "No loaded plugin waits for answers, so waitForReply cannot be used.",
                                 {"capability": "wait", "arguments": ["waitForReply"]},
                                 hint="Send without waitForReply and read the answer later; or install agent-link-waits, "
                                      "or enable it (AGENT_LINK_DISABLE_PLUGINS).")
        # the answer of a push that outlasts the call names it; the waits plugin notes the wait under it before the
        # question is stored (agent_link_before_send), so a quicker reply is held for the wait, never also pushed
        message_id = message_id or new_message_id()
    sending = app.send(
        caller=call.caller, to=args["to"], body=args["message"], anticipation=args.get("anticipation"),
        reply_by=args.get("replyBy"), wait_for_reply=args.get("waitForReply", False),
        reply_to=args.get("replyToMessageId"), tool=tool, arguments=args, options=options, meta=call.meta,
        message_id=message_id, allow_archived=allow_archived, require_known=args.get("requireKnown", False),
        metadata={"fingerprint": fingerprint} if fingerprint else None, target=(recipient, target[1], dict(target[2])),
    )
    if not args.get("waitForReply"):
        outcome = await sending
    else:
        # waitForReply promises a bound for the whole call: a push that outlasts it goes on in
        # the background and the answer returns now, with the message id to wait on.
        task = asyncio.ensure_future(sending)
        left_s = max(MAX_WAIT_PER_CALL_MS - (time.monotonic() - started) * 1000, 0) / 1000
        done, _ = await asyncio.wait({task}, timeout=left_s)
        if not done:
            _PUSHING.add(task)
            task.add_done_callback(_push_finished)
            spent_ms = int((time.monotonic() - started) * 1000)
            call.warnings.append({
                "code": "push_still_running",
                "message": f"Pushing took longer than the {MAX_WAIT_PER_CALL_MS} ms this call may take; it goes on. "
                           f"Call wait_for_agent with replyToMessageId {message_id} for the answer.",
                "details": {"messageId": message_id, "sendMs": spent_ms},
            })
            return {"messageId": message_id, "to": recipient, "harness": recipient.split(":", 1)[0], "delivery": "queued",
                    "deliveryState": "pushing", "anticipation": "reply",
                    "wait": {"outcome": "timeout", "timedOut": True, "waitedMs": 0, "sendMs": spent_ms}}
        outcome = task.result()
    result = message_summary(app, outcome)
    if args.get("replyToMessageId") and outcome.message.get("reply_to"):
        answered_id = outcome.message["reply_to"]
        answered = app.mailbox.state(app.mailbox.stored(answered_id))
        if answered.resolution and answered.resolution.get("replyMessageId") == result["messageId"]:
            result["resolved"] = {"messageId": answered_id, "kind": "reply", "late": answered.resolution["late"]}
    if args.get("waitForReply"):
        # The whole call keeps the bound a wait promises: what storing and pushing took (a slow host can take most
        # of it) comes off the wait, so no client cuts the call before the model learns the message id.
        spent_ms = int((time.monotonic() - started) * 1000)
        requested = args.get("timeoutMs", 60000)
        left = max(MAX_WAIT_PER_CALL_MS - spent_ms, 0)
        waited = await app.hooks.wait_for_reply(
            call.caller, result["messageId"], timeout_ms=requested if call.progress is not None else min(requested, left),
            poll_ms=args.get("pollIntervalMs", 1000), progress=call.progress)
        if waited is None:  # the waits plugin failed (reported): the message stands, its answer is read later
            call.warnings.append({"code": "plugin_failed", "details": {"hook": "agent_link_wait_for_reply"},
                                  "message": f"The message was sent but waiting for its answer failed; call wait_for_agent with "
                                             f"replyToMessageId {result['messageId']}, or read your inbox later."})
            return result
        result["wait"] = {**waited, "sendMs": spent_ms}
        if call.progress is None and requested > left:  # the wait got only what the send left of one call
            call.warnings.append({
                "code": "wait_shortened",
                "message": f"Sending took {spent_ms} ms, so the wait got {left} ms of the {MAX_WAIT_PER_CALL_MS} ms one call "
                           f"may take; call wait_for_agent with replyToMessageId {result['messageId']} to keep waiting.",
                "details": {"messageId": result["messageId"], "requestedTimeoutMs": requested, "sendMs": spent_ms,
                            "waitedAtMostMs": left},
            })
        call.warnings.extend(result["wait"].pop("warnings", []))
    return result


# pushes of waitForReply sends that outlasted their call (kept referenced until they end)
_PUSHING: set[asyncio.Future[Any]] = set()


def _push_finished(task: asyncio.Future[Any]) -> None:
    _PUSHING.discard(task)
    if not task.cancelled() and task.exception() is not None:
        logging.getLogger(__name__).error("a send that outlasted its call failed: %r", task.exception())


async def read_inbox(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """The ``read_agent_link_inbox`` tool's handler (see the module doc)."""
    from agent_link_core import reading

    # a database that refuses writes (read-only, damaged, replaced) is read without marking; a read
    # for a client that is gone marks nothing either, as its answer reaches no one
    mark, warnings = app.begin_inbox_read(call.caller, args.get("markAsDelivered", True) and not client_gone(), tell=False)
    result = reading.inbox(app, call.caller, limit=args.get("limit", 20), mark=mark, include_open=args.get("includeOpen", True),
                           message_id=args.get("messageId"), offset=args.get("offset", 0))
    if warnings:
        result["warnings"] = [*result.get("warnings", []), *warnings]
    return result


async def reply_message(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """The ``reply_agent_link_message`` tool's handler (see the module doc)."""
    reply_id, fingerprint = idempotency_key(args, "replyMessageId")
    return await app.reply(
        caller=call.caller, message_id=args["messageId"], resolution=args.get("resolution", "reply"),
        message=args.get("message"), anticipation=args.get("anticipation"), reply_by=args.get("replyBy"), arguments=args,
        meta=call.meta, reply_id=reply_id, metadata={"fingerprint": fingerprint} if fingerprint else None,
    )


async def message_status(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """The ``get_agent_link_message_status`` tool's handler (see the module doc)."""
    out = app.status(call.caller, args["messageId"])
    if out["delivery"] == "accepted" and await app.refresh_delivery(out["messageId"]):
        out = app.status(call.caller, args["messageId"])
    return out


CORE_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="agent_link_health",
        title="agent-link health",
        description="Report whether agent-link works here: this session's address, state directory, plugins, harnesses and settings problems. Never fails because a host is missing.",
        input_schema=closed_object({"includeCallerContext": {"type": "boolean", "default": False, "description": "Also return the tool call's _meta as seen by the server."}}),
        output_fields={k: ANY for k in ("version", "host", "hostDetection", "address", "addressSource", "stateDir", "database", "env",
                                         "settings", "reminders", "plugins", "harnesses", "mcp", "sections", "problems", "callerContext")},
        handler=health, read_only=True, idempotent=True,
    ),
    ToolSpec(
        name="list_agents",
        title="List agents",
        description="List the other agent sessions on this machine (every installed harness), newest first, with the address to message each one. One page at a time: complete is true only for the whole listing; hasMore and nextCursor (pass it as cursor) when more follow.",
        input_schema=closed_object({
            "harness": HARNESS_FILTER,
            "surface": {"type": "string", "enum": ["desktop", "code", "cli", "app"]},
            "loaded": {"type": "boolean", "description": "Only sessions that are (true) or are not (false) running now."},
            "includeArchived": {"type": "boolean", "default": False},
            "limit": limit_arg(20, 200),
            "cursor": CURSOR,
        }),
        output_fields={"sessions": {"type": "array", "items": OBJ}, "providers": OBJ, "caller": OBJ, **LISTING_PAGE},
        handler=list_agents, read_only=True, idempotent=True,
    ),
    ToolSpec(
        name="resolve_agent",
        title="Resolve an agent",
        description="Find one agent by address (harness:id, role:name), bare id, or words from its title or folder. Reports resolved, ambiguous (with candidates) or not_found.",
        input_schema=closed_object({"query": AGENT_QUERY, "harness": HARNESS_FILTER, "limit": limit_arg(10, 50)}, ("query",)),
        output_fields={**RESOLVE_RESULT, "role": ANY},
        handler=resolve_agent, read_only=True, idempotent=True, removed={"searchTerm": "query"},
    ),
    ToolSpec(
        name="message_agent",
        title="Message an agent",
        description="Send a message to another agent session through agent-link (not the host's own messaging). It is stored first, then pushed to the session when its host allows. Set anticipation reply/action when you expect an answer; waitForReply waits for it.",
        input_schema=closed_object({
            "to": {**AGENT_QUERY, "description": "Address (harness:id, role:name), bare id, or words to resolve."},
            "message": {"type": "string", "minLength": 1, "description": "The text (at most 64 KiB UTF-8)."},
            "replyToMessageId": {**ULID, "description": "This message answers that one (resolving it when you are its recipient)."},
            "anticipation": ANTICIPATION, "replyBy": REPLY_BY,
            "waitForReply": {"type": "boolean", "default": False, "description": "Wait for the recipient's resolution (implies anticipation reply)."},
            "timeoutMs": TIMEOUT_MS, "pollIntervalMs": POLL_MS, "receipt": RECEIPT,
            "requireKnown": {"type": "boolean", "default": False, "description": "Refuse (not_found, with suggestions) a plain address no process has ever served, instead of queueing with an unknown_address warning. Without the presence plugin nothing knows a plain address is served: every one is refused."},
            "messageId": MESSAGE_ID,
        }, ("to", "message")),
        output_fields=SEND_RESULT,
        handler=message_agent, removed={"body": "message", "latestMessageId": "replyToMessageId"},
    ),
    ToolSpec(
        name="read_agent_link_inbox",
        title="Read agent-link inbox",
        description="Read messages other agents sent you through agent-link. Bodies appear only in renderedBlock, inside <agent-link-message> envelopes: they come from agents, not the user. Answer each with reply_agent_link_message. A read returns what fits in one tool result; `more` says what is left and how to read it.",
        input_schema=closed_object({"markAsDelivered": {"type": "boolean", "default": True}, "limit": limit_arg(20, 100),
                                    "includeOpen": {"type": "boolean", "default": True, "description": "Also list read messages still waiting for your resolution."},
                                    "messageId": {**ULID, "description": "Read this one message in pages (a message too large for one read)."},
                                    "offset": {"type": "integer", "minimum": 0, "maximum": 1_000_000, "default": 0,
                                               "description": "With messageId: where the page starts (characters), from the previous page's nextOffset."}}),
        output_fields={"address": STR, "markedDelivered": {"type": "array", "items": STR}, "messages": {"type": "array", "items": OBJ},
                       "openCount": INT, "remainingCount": INT, "heldByActiveWait": INT, "renderedBlock": STR, "more": NSTR, "page": NOBJ},
        handler=read_inbox,
    ),
    ToolSpec(
        name="reply_agent_link_message",
        title="Reply to an agent-link message",
        description="Resolve a message another agent sent you through agent-link: resolution reply (with your answer), decline (with a reason) or done (optional note). The answer goes back to the sender through agent-link.",
        input_schema=closed_object({"messageId": ULID, "resolution": {"type": "string", "enum": ["reply", "decline", "done"], "default": "reply"},
                                    "message": {"type": "string", "description": "The reply, the decline reason, or an optional note for done."},
                                    "anticipation": ANTICIPATION, "replyBy": REPLY_BY,
                                    "replyMessageId": {**MESSAGE_ID, "description": "Your id for the answer sent back (a ULID or a UUID), so "
                                                       "that retrying is safe: the same replyMessageId with the same resolution and text "
                                                       "returns the first result (duplicate: true) instead of already_resolved; other "
                                                       "content under it is refused (invalid_arguments, rule idempotency) naming what differs."}},
                                   ("messageId",)),
        output_fields={"messageId": NSTR, "replyToMessageId": STR, "target": OBJ, "delivery": STR, "resolution": NOBJ,
                       "status": NSTR, "late": BOOL, "anticipation": NSTR, "receipt": OBJ, "duplicate": BOOL},
        handler=reply_message, removed={"body": "message"},
    ),
    ToolSpec(
        name="get_agent_link_message_status",
        title="agent-link message status",
        description="Where a message you sent or received stands: delivery, status (pending, replied, declined, done, unresolved, expired), reminders. Never returns the body.",
        input_schema=closed_object({"messageId": ULID}, ("messageId",)),
        output_fields={k: ANY for k in ("messageId", "from", "fromHarness", "fromVerified", "to", "addressedTo", "sentAt", "anticipation",
                                         "replyBy", "inReplyTo", "delivery", "deliveredAt", "status", "resolution", "reminders", "via", "holder",
                                         "deliveryNote")},
        handler=message_status, read_only=True,
    ),
)
