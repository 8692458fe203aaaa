"""``agent_link_mailbox_inspect``: the messages the caller sent or received, newest first, filtered (it was the core's
``App.inspect``). Imported at the tool's first call."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_link_core.mailbox import parse_iso_ms
from agent_link_core.model import is_ulid

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App
    from agent_link_core.model import Caller
    from agent_link_core.tools.registry import ToolCall


async def handle(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """The tool's handler: :func:`inspect` of its arguments.
    :raises AgentLinkError: ``permission_denied`` for ``scope: all`` without ``AGENT_LINK_INSPECT_ALL``."""
    return inspect(
        app, call.caller, scope=args.get("scope", "caller"), from_address=args.get("fromSessionId"),
        to_address=args.get("toSessionId"), reply_to=args.get("replyToMessageId"), undelivered=args.get("undelivered", False),
        pending_ack=args.get("pendingAck", False), since=args.get("since"), limit=args.get("limit", 50),
        include_bodies=args.get("includeBodies", False),
    )


def inspect(
    app: App, caller: Caller, *, scope: str = "caller", from_address: str | None = None, to_address: str | None = None,
    reply_to: str | None = None, undelivered: bool = False, pending_ack: bool = False, since: str | None = None,
    limit: int = 50, include_bodies: bool = False,
) -> dict[str, Any]:
    """Messages sent or received by ``caller`` (every message with ``scope`` ``all``, when ``AGENT_LINK_INSPECT_ALL``
    allows), newest first: ``{scope, callerAddress, messages[, note]}``; each view gets ``envelope`` with ``include_bodies``.

    :param since: ISO 8601 with a timezone: only messages sent then or later.
    :raises AgentLinkError: ``permission_denied`` (``scope`` ``all`` not allowed), ``invalid_arguments`` (``since``).
    """
    view_rule = app.mailbox.visible_to(caller.address, all_mail=scope == "all")
    if scope != "all" and not caller.known:
        return {"scope": scope, "callerAddress": None, "messages": [], "note": "The caller could not be identified, so no mail is shown."}
    clause, params = view_rule.sql("messages")
    clauses = [clause]
    if reply_to and is_ulid(reply_to.upper()):
        reply_to = reply_to.upper()
    for column, value in (("from_addr", from_address), ("recipient", to_address), ("reply_to", reply_to)):
        if value:
            clauses.append(f"{column} = ?")
            params.append(value)
    if undelivered:
        clauses.append("first_delivered_at IS NULL")
    if pending_ack:
        clauses.append("acknowledged_at IS NULL AND anticipation != 'fyi'")
    if since:
        clauses.append("sent_at >= ?")
        params.append(parse_iso_ms(since, "since"))
    rows = app.store.conn.execute(
        f"SELECT * FROM messages WHERE {' AND '.join(clauses)} ORDER BY sent_at DESC, id DESC LIMIT ?", (*params, limit)
    ).fetchall()
    messages = app.mailbox.to_views(rows)
    if include_bodies:
        for view, envelope in zip(messages, app.mailbox.envelopes(rows), strict=True):
            view["envelope"] = envelope
    return {"scope": scope, "callerAddress": caller.address if caller.known else None, "messages": messages}
