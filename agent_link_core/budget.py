"""Inbox reads and pushes that fit what the calling host shows the model in full.

A host cuts or hides a tool result above some size (measured per host; the harness declares
it as :class:`~agent_link_core.harness.OutputBudget`). Whatever the host cut was not seen, so an
inbox read returns only as many whole messages as fit, marks only those delivered, and says
how many remain. A single message larger than the budget is returned in pages of its envelope
(``messageId`` + ``offset``, in characters) and counts as delivered when its last page has
been returned.

Undelivered mail that a wait running in this process is about to return (``wait_for_agent``,
``waitForReply``) is left to that wait, so it is not handed out twice; the read counts it in
``heldByActiveWait`` and it reaches the inbox once the wait ends without taking it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agent_link_core.envelope import render_inbox
from agent_link_core.errors import AgentLinkError
from agent_link_core.harness import OutputBudget

if TYPE_CHECKING:  # pragma: no cover - typing only
    from agent_link_core.app import App
    from agent_link_core.model import Caller

#: room left for what the tool layer adds around a result (``ok``, warnings) and for the
#: views of marked messages growing (delivery, deliveredAt) after they were measured
RESERVE_BYTES = 400
PER_MESSAGE_RESERVE_BYTES = 48
#: how much undelivered mail is looked at for messages held by a wait
HELD_SCAN = 500


def result_bytes(result: dict[str, Any], budget: OutputBudget) -> int:
    """UTF-8 size of ``result`` (with ``ok``) as the host shows it."""
    shown = json.dumps({"ok": True, **result}, ensure_ascii=False, indent=budget.json_indent)
    return len(shown.encode("utf-8"))


def fits(result: dict[str, Any], budget: OutputBudget, messages: int) -> bool:
    """Whether ``result`` holding ``messages`` message views fits ``budget`` with the reserves."""
    return result_bytes(result, budget) + RESERVE_BYTES + PER_MESSAGE_RESERVE_BYTES * messages <= budget.tool_result_bytes


def caller_budget(app: App, caller: Caller) -> OutputBudget:
    """What one read of ``caller`` may return: the budget its host's harness declares, else
    ``AGENT_LINK_READ_BYTES`` of compact JSON (a plain address, a host with no measured limit,
    the CLI). Unknown clients cut long results too, so no read is unbounded."""
    harness = app.harnesses.get(caller.host or "")
    declared = harness.output_budget if harness is not None else None
    return declared if declared is not None else OutputBudget(tool_result_bytes=int(app.config.get("AGENT_LINK_READ_BYTES")))


def inbox(app: App, caller: Caller, budget: OutputBudget | None, *, limit: int, mark: bool, include_open: bool,
          message_id: str | None = None, offset: int = 0) -> dict[str, Any]:
    """An inbox read cut to ``budget`` (None: everything up to ``limit``; tools and the CLI pass
    :func:`caller_budget`).

    :param message_id: read this message's envelope from ``offset`` (characters) instead: a
        page as large as fits; the message is marked delivered (with ``mark``) when the page
        reaches the envelope's end.
    :returns: the fields of :meth:`App.inbox` plus ``more`` (what is left and how to read it,
        or None), ``page`` (``{messageId, offset, nextOffset, totalChars}`` for a paged
        message, else None) and ``heldByActiveWait`` (undelivered mail left to a running wait,
        counted neither in ``messages`` nor in ``remainingCount``).
    :raises AgentLinkError: ``not_found``; ``wrong_recipient`` for another session's message;
        ``invalid_arguments`` for an offset past the envelope's end.
    """
    app.require_caller(caller)
    if message_id is not None:
        row = app.mailbox.require(message_id)
        if row["recipient"] != caller.address:
            raise AgentLinkError("wrong_recipient", f"Message {row['id']} is not addressed to you.",
                                 {"messageId": row["id"], "expected": row["recipient"], "caller": caller.address})
        return _page(app, caller, row, budget, offset, mark)
    held = held_by_waits(app, caller.address)
    rows, _ = app.mailbox.drain(caller.address, limit + len(held), mark=False, include_open=include_open)
    rows = [r for r in rows if r["id"] not in held][:limit]
    chosen: list[Any] = []
    for row in rows:
        trial = _result(app, caller, [*chosen, row], [], None)
        if budget is not None and not fits(trial, budget, len(chosen) + 1):
            break
        chosen.append(row)
    if rows and not chosen:  # the first message alone is larger than the budget: page it
        return _page(app, caller, rows[0], budget, 0, mark)
    marked = []
    if mark:
        for row in chosen:
            if row["delivered_at"] is None and app.mailbox.mark_delivered(row["id"], "inbox"):
                marked.append(row["id"])
    fresh = [app.mailbox.get_row(r["id"]) for r in chosen]
    return _result(app, caller, fresh, marked, None)


def _result(app: App, caller: Caller, rows: list[Any], marked: list[str], page: dict[str, Any] | None,
            block: str | None = None) -> dict[str, Any]:
    views = []
    envelopes = []
    for row in rows:
        state = app.mailbox.state(row)
        view = app.mailbox.to_view(row, state)
        view["open"] = state.status in ("pending", "unresolved", "expired") if row["anticipation"] != "fyi" else row["delivered_at"] is None
        views.append(view)
        if block is None:
            envelopes.append(app.mailbox.envelope(row))
    held = held_by_waits(app, caller.address) - {row["id"] for row in rows}
    remaining = max(app.mailbox.count_open(caller.address, undelivered_only=True) - len(held), 0)
    more = None
    if page is not None and page["nextOffset"] is not None:
        more = (f"This message continues: call read_agent_link_inbox with messageId {page['messageId']} and offset "
                f"{page['nextOffset']} to read the next part.")
    elif remaining:
        more = f"{remaining} more message(s) wait: call read_agent_link_inbox again to read them."
    return {
        "address": caller.address,
        "markedDelivered": marked,
        "messages": views,
        "openCount": sum(1 for v in views if v["open"]),
        "remainingCount": remaining,
        "heldByActiveWait": len(held),
        "renderedBlock": block if block is not None else render_inbox(envelopes),
        "more": more,
        "page": page,
    }


def _page(app: App, caller: Caller, row: Any, budget: OutputBudget | None, offset: int, mark: bool) -> dict[str, Any]:
    envelope = app.mailbox.envelope(row)
    total = len(envelope)
    if not 0 <= offset < total:
        raise AgentLinkError("invalid_arguments", f"offset {offset} is outside the message's {total} characters.",
                             {"errors": [{"path": "offset", "rule": "range", "expected": f"0-{total - 1}"}]})

    def build(end: int) -> dict[str, Any]:
        page = {"messageId": row["id"], "offset": offset, "nextOffset": end if end < total else None, "totalChars": total}
        return _result(app, caller, [row], [], page, envelope[offset:end])

    end = total
    if budget is not None and not fits(build(total), budget, 1):
        low, high = offset + 1, total  # the largest end that fits (at least one character per page)
        while low < high:
            mid = (low + high + 1) // 2
            if fits(build(mid), budget, 1):
                low = mid
            else:
                high = mid - 1
        end = low
    marked = []
    if end == total and mark and row["delivered_at"] is None and app.mailbox.mark_delivered(row["id"], "inbox"):
        marked.append(row["id"])
    out = build(end)
    out["markedDelivered"] = marked
    if marked:
        out = {**_result(app, caller, [app.mailbox.get_row(row["id"])], marked, out["page"], out["renderedBlock"])}
    return out


def held_by_waits(app: App, address: str) -> set[str]:
    """Ids of ``address``'s undelivered mail that a wait running in this process is about to
    return (:meth:`App.held_by_wait`); empty when no wait runs."""
    if not app.waiting:
        return set()
    return {row["id"] for row in app.mailbox.open_for(address, HELD_SCAN, undelivered_only=True) if app.held_by_wait(row)}


def oversized_notice(row: Any, size: int) -> str:
    """What is pushed instead of an envelope of ``size`` bytes that the host would cut: who
    sent which message and how to read it (from the inbox, in pages). The message stays
    undelivered until its last page is read."""
    from agent_link_core.envelope import render_element

    text = (f"A message from another agent is too large ({size} bytes) to show here. Read it with read_agent_link_inbox "
            f"(messageId {row['id']}); it comes in pages, follow `more` until it ends.")
    return render_element("agent-link-notice", [("id", row["id"]), ("from", row["from_addr"])], text)
