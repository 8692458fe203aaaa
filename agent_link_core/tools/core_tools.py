"""The host-neutral MCP tools: health, directory, messaging, inbox, status (docs/behaviour.md §5). Arguments only some
hosts understand are added by their plugins (``agent_link_extend_tools``); every handler is a
:attr:`~agent_link_core.tools.registry.ToolSpec.handler`."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from agent_link_core.errors import AgentLinkError
from agent_link_core.harness import acall_harness
from agent_link_core.mailbox import ulid_of_uuid
from agent_link_core.model import is_address, is_ulid
from agent_link_core.sending import message_summary
from agent_link_core.tools.registry import AFTER_WRITE, ToolCall, ToolSpec, check_schema, client_gone
from agent_link_core.tools.schemas import (AGENT_QUERY, ANY, BOOL, CURSOR, IDEMPOTENCY_KEY, INT, LISTING_PAGE, NOBJ, NSTR, OBJ, RESOLVE_RESULT,
                                          STR, ULID, closed_object, limit_arg)

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App

ANTICIPATION = {"type": "string", "enum": ["reply", "action", "fyi"],
                "description": "What the sender expects: reply (an answer), action (something done), fyi (nothing)."}
REPLY_BY = {"type": "string", "minLength": 1,
            "description": "ISO 8601 deadline with a timezone, at least 30 s ahead; not with fyi."}
HARNESS_FILTER = {"type": "string", "pattern": "^(all|[a-z][a-z0-9-]{0,31})$", "description": "all, or one harness name."}
RECEIPT = {"type": "object", "description": "Audit receipt fields (used when a receipts plugin is installed).",
           "properties": {"record": BOOL, "purpose": STR, "originThreadId": STR, "originTurnId": STR, "originToolCallId": STR,
                          "cleanupRecommendation": STR, "note": STR, "tags": {"type": "array", "items": STR}},
           "additionalProperties": False}
SEND_RESULT: dict[str, Any] = {
    "messageId": STR, "to": STR, "harness": STR, "delivery": STR, "deliveredVia": NSTR, "deliveryState": STR,
    "anticipation": STR, "replyBy": NSTR, "inReplyTo": NSTR, "messageStatus": NSTR, "duplicate": BOOL, "via": NSTR,
    "resolution": NOBJ, "resolved": OBJ, "action": STR, "sessionId": STR,
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


def core_specs(app: App | None) -> list[ToolSpec]:
    """:data:`CORE_TOOLS`, with what plugins add (``agent_link_extend_tools``) after each tool's own arguments and result fields."""
    added = app.hooks.call("agent_link_extend_tools") if app is not None else []
    specs = []
    for spec in CORE_TOOLS:
        arguments, fields, description = spec.input_schema["properties"], spec.output_fields, spec.description
        for extension in (answer[spec.name] for answer in added if spec.name in answer):  # a name taken keeps its first schema
            arguments = {**arguments, **{k: v for k, v in extension.get("input", {}).items() if k not in arguments}}
            fields = {**fields, **{k: v for k, v in extension.get("output", {}).items() if k not in fields}}
            description += extension.get("description", "")
        specs.append(replace(spec, input_schema={**spec.input_schema, "properties": arguments}, output_fields=fields, description=description))
    return specs


def extension_problem(answer: Any) -> str | None:
    """Why an ``agent_link_extend_tools`` answer is refused (a name that is no core tool, another shape, an argument or
    result field the tool has already, an invalid JSON schema), or None."""
    from jsonschema.exceptions import SchemaError

    base = {spec.name: spec for spec in CORE_TOOLS}
    for name, extension in answer.items() if isinstance(answer, Mapping) else [(None, None)]:
        if name not in base or not isinstance(extension, Mapping) or not isinstance(extension.get("description", ""), str):
            return f"extends {name!r}, which is no core tool, or not with {{'input'?, 'output'?, 'description'?}}"
        arguments, fields, spec = extension.get("input", {}), extension.get("output", {}), base[name]
        if not isinstance(arguments, Mapping) or not isinstance(fields, Mapping):
            return "declares arguments or result fields that are not dicts of JSON schemas"
        for what, names, taken in (("argument", arguments, spec.input_schema["properties"]),
                                   ("result field", fields, {*spec.output_fields, "ok", "error", "warnings"})):
            for field_name, schema in names.items():
                if field_name in taken:
                    return f"declares {what} {field_name!r}, which {name} has already"
                try:
                    check_schema(schema if isinstance(schema, Mapping) else None)
                except SchemaError as exc:
                    return f"declares {what} {field_name!r} with an invalid JSON schema: {exc.message[:200]}"
    return None


async def health(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """``agent_link_health``; the arguments plugins added (``agent_link_extend_tools``) reach every harness's
    ``prepare_health`` first."""
    options = {k: v for k, v in args.items() if k not in HEALTH.input_schema["properties"]}
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
    options = {k: v for k, v in args.items() if k not in MESSAGE_AGENT.input_schema["properties"]}
    named = app.harnesses.get(args["to"].split(":", 1)[0]) if is_address(args["to"]) else None
    # an exact address may name an archived session of a harness whose archived sessions take mail
    allow_archived = named is not None and named.archived_sessions_take_mail
    target = await app.target_address(args["to"], call.caller, allow_archived=allow_archived)
    recipient = target[0]
    if options:
        started: list[asyncio.Future[dict[str, Any]]] = []

        def send(message_id: str | None = None, **keywords: Any) -> asyncio.Future[dict[str, Any]]:
            if not started:
                started.append(asyncio.ensure_future(_send(app, args, call, target, allow_archived, tool, options, message_id, keywords)))
            return started[0]

        taken = await app.hooks.acall("agent_link_tool_send", arguments=args, recipient=recipient, send=send, call=call)
        if taken is not None:
            return taken
        if started:  # the plugin failed after sending: the send stands
            call.warnings.append({"code": "plugin_failed", "details": {"hook": "agent_link_tool_send"},
                                  "message": "The message was sent, but what a plugin adds to the send failed "
                                             "(agent_link_health lists it under plugins.problems)."})
            return await started[0]
        if untaken := [k for k in options if args[k] is not False and k not in app.hooks.tools()["message_agent"].input_schema["properties"]]:
            # a plugin tool forwarding what no loaded plugin adds (waitForReply without the waits plugin)
            raise AgentLinkError("unsupported", f"No loaded plugin takes {', '.join(untaken)}.", {"arguments": untaken},
                                 hint=f"Send without {', '.join(untaken)}, or install or enable the plugin that adds it.")
    return await _send(app, args, call, target, allow_archived, tool, options)


async def _send(app: App, args: dict[str, Any], call: ToolCall, target: tuple[str, Any, Any], allow_archived: bool, tool: str,
                options: dict[str, Any], message_id: str | None = None, keywords: Mapping[str, Any] = {}) -> dict[str, Any]:
    """Store and push :func:`message_agent`'s message (under ``message_id`` when the caller gave none); its result."""
    key, fingerprint = idempotency_key(args)
    outcome = await app.send(
        caller=call.caller, to=args["to"], body=args["message"], anticipation=args.get("anticipation"),
        reply_by=args.get("replyBy"), reply_to=args.get("replyToMessageId"), tool=tool, arguments=args, options=options,
        meta=call.meta, message_id=key or message_id, allow_archived=allow_archived, require_known=args.get("requireKnown", False),
        metadata={"fingerprint": fingerprint} if fingerprint else None, target=(target[0], target[1], dict(target[2])), **keywords,
    )
    result = message_summary(app, outcome)
    if args.get("replyToMessageId") and outcome.message.get("reply_to"):
        answered_id = outcome.message["reply_to"]
        answered = app.mailbox.state(app.mailbox.stored(answered_id))
        if answered.resolution and answered.resolution.get("replyMessageId") == result["messageId"]:
            result["resolved"] = {"messageId": answered_id, "kind": "reply", "late": answered.resolution["late"]}
    return result


async def read_inbox(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """The ``read_agent_link_inbox`` tool's handler (see the module doc)."""
    # a read for a client that is gone marks nothing, as its answer reaches no one
    mark, later = args.get("markAsDelivered", True) and not client_gone(), AFTER_WRITE.get()
    read = partial(app.inbox, call.caller, limit=args.get("limit", 20), include_open=args.get("includeOpen", True),
                   message_id=args.get("messageId"), offset=args.get("offset", 0), tell=False)
    if not mark or later is None:
        return read(mark=mark)
    # the transport writes the answer: marked once written (as the CLI's show, then mark)
    from agent_link_core.reading import as_read, shown_unread

    mark, warnings = app.begin_inbox_read(call.caller, True, tell=False)
    data = read(mark=False)
    to_mark = shown_unread(app, data) if mark else []
    later.append(lambda: app.mailbox.mark_many_delivered(to_mark, "inbox"))
    return as_read(app, {**data, "warnings": [*data.get("warnings", []), *warnings]} if warnings else data, to_mark)


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
    HEALTH := ToolSpec(
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
    MESSAGE_AGENT := ToolSpec(
        name="message_agent",
        title="Message an agent",
        description="Send a message to another agent session through agent-link (not the host's own messaging). It is stored first, then pushed to the session when its host allows. Set anticipation reply/action when you expect an answer.",
        input_schema=closed_object({
            "to": {**AGENT_QUERY, "description": "Address (harness:id, role:name), bare id, or words to resolve."},
            "message": {"type": "string", "minLength": 1, "description": "The text (at most 64 KiB UTF-8)."},
            "replyToMessageId": {**ULID, "description": "This message answers that one (resolving it when you are its recipient)."},
            "anticipation": ANTICIPATION, "replyBy": REPLY_BY,
            "receipt": RECEIPT,
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
