"""Inbox reads and pushes that fit what the calling host shows the model in full (docs/plugins.md section 5,
"Output budget"): whole messages that fit, one larger message in pages of its envelope (``messageId`` + ``offset``,
in characters), delivered with its last page; mail a running wait is about to return is left to it (``heldByActiveWait``)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from agent_link_core.envelope import render_inbox
from agent_link_core.errors import AgentLinkError
from agent_link_core.harness_decl import OutputBudget

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - typing only
    from typing import Any
    from agent_link_core.app import App
    from agent_link_core.model import Caller

#: room left for what the tool layer adds around a result (``ok``, warnings) and for the
#: views of marked messages growing (delivery, deliveredAt) after they were measured
RESERVE_BYTES = 400
PER_MESSAGE_RESERVE_BYTES = 48


def result_bytes(result: dict[str, Any], budget: OutputBudget) -> int:
    """UTF-8 bytes of ``result`` (with ``ok``) as the host shows it."""
    shown = json.dumps({"ok": True, **result}, ensure_ascii=False, indent=budget.json_indent)
    return len(shown.encode("utf-8"))


def fits(result: dict[str, Any], budget: OutputBudget, messages: int) -> bool:
    """Whether ``result`` holding ``messages`` message views fits ``budget`` with the reserves."""
    return result_bytes(result, budget) + RESERVE_BYTES + PER_MESSAGE_RESERVE_BYTES * messages <= budget.tool_result_bytes


def caller_budget(app: App, caller: Caller) -> OutputBudget:
    """The budget ``caller``'s harness declares, else ``AGENT_LINK_READ_BYTES`` of compact JSON
    (a plain address, the CLI): unknown clients cut long results too."""
    harness = app.harnesses.get(caller.host or "")
    declared = harness.output_budget if harness is not None else None
    return declared if declared is not None else OutputBudget(tool_result_bytes=int(app.config.get("AGENT_LINK_READ_BYTES")))


def inbox(app: App, caller: Caller, budget: OutputBudget | None, *, limit: int, mark: bool, include_open: bool,
          message_id: str | None = None, offset: int = 0) -> dict[str, Any]:
    """An inbox read cut to ``budget`` (None: everything up to ``limit``; tools and the CLI pass
    :func:`caller_budget`), each view and envelope made once (sizes: :func:`prefix_bytes`).

    :param message_id: read this message's envelope from ``offset`` (characters) instead, a
        page as large as fits; marked delivered (with ``mark``) with the envelope's last page.
    :returns: the fields of :meth:`App.inbox` plus ``more`` (what is left and how to read it,
        or None), ``page`` (``{messageId, offset, nextOffset, totalChars}`` or None) and
        ``heldByActiveWait`` (mail left to a running wait, counted in neither ``messages`` nor
        ``remainingCount``).
    :raises AgentLinkError: ``not_found``, ``wrong_recipient`` (another session's message),
        ``invalid_arguments`` (an offset past the envelope's end).
    """
    app.require_caller(caller)
    if message_id is not None:
        row = app.mailbox.require(message_id)
        if row["recipient"] != caller.address:
            raise AgentLinkError("wrong_recipient", f"Message {row['id']} is not addressed to you.",
                                 {"messageId": row["id"], "expected": row["recipient"], "caller": caller.address})
        return _page(app, caller, row, budget, offset, mark)
    held = app.hooks.held_messages(caller.address)
    rows, _ = app.mailbox.drain(caller.address, limit + len(held), mark=False, include_open=include_open)
    rows = [r for r in rows if r["id"] not in held][:limit]
    messages = [app.mailbox.row_dict(row) for row in rows]  # each row's metadata decoded once, for its view and its envelope
    views = _views(app, rows, [m["metadata"] for m in messages])
    envelopes: list[str] = []

    def rendered() -> Iterator[tuple[dict[str, Any], str]]:  # each envelope once, only as far as needed
        for k, (view, row, message) in enumerate(zip(views, rows, messages, strict=True)):
            if k == len(envelopes):
                envelopes.append(app.mailbox.envelope(row, message))
            yield view, envelopes[k]

    remaining = _remaining(app, caller.address, held)
    whole = None  # the result holding every message, when that is what the read returns
    if budget is None or sum(row["body_bytes"] for row in rows) + RESERVE_BYTES <= budget.tool_result_bytes:
        # all may fit (the bodies alone do): measure the whole result once, not each prefix
        list(rendered())  # renders every envelope into `envelopes`
        whole = _assemble(caller.address, [], views, remaining, len(held), render_inbox(envelopes), None)
        if budget is not None and not fits(whole, budget, len(rows)):
            whole = None
    if whole is not None or budget is None:
        count = len(rows)
    else:
        skeleton = _assemble(caller.address, [], [], remaining, len(held), "", None)
        count = 0
        for size in prefix_bytes(skeleton, rendered(), budget):
            if size + RESERVE_BYTES + PER_MESSAGE_RESERVE_BYTES * (count + 1) > budget.tool_result_bytes:
                break
            count += 1
    if rows and not count:  # the first message alone is larger than the budget: page it
        return _page(app, caller, rows[0], budget, 0, mark, envelopes[0])
    chosen = rows[:count]
    marked = []
    unread = [row["id"] for row in chosen if row["delivered_at"] is None]
    if mark and unread:
        marked = app.mailbox.mark_many_delivered(unread, "inbox")
        chosen = app.mailbox.rows([row["id"] for row in chosen])
        views = _views(app, chosen)
        # marking changed what remains (held mail is never chosen, nor marked)
        held = app.hooks.held_messages(caller.address) - {row["id"] for row in chosen}
        remaining = _remaining(app, caller.address, held)
    elif whole is not None:
        return whole
    return _assemble(caller.address, marked, views[:count], remaining, len(held), render_inbox(envelopes[:count]), None)


def prefix_bytes(skeleton: dict[str, Any], messages: Iterable[tuple[dict[str, Any], str]], budget: OutputBudget) -> Iterator[int]:
    """The :func:`result_bytes` of the read result holding the first 1, 2, ... messages, added
    up from each view's and envelope's size as Python's JSON encoder lays a list out.

    :param skeleton: the result with ``messages`` ``[]``, ``openCount`` 0 and ``renderedBlock``
        ``""`` (:func:`_assemble`); its other fields are those of every prefix.
    :param messages: ``(view with open, rendered envelope)`` of each message, in order, taken
        one at a time (a caller that stops early renders no more envelopes).
    """
    indent = budget.json_indent
    pad = 0 if indent is None else indent
    # the skeleton holds "[]", "0" and '""' where a prefix's views, open count and block go
    base = result_bytes(skeleton, budget) - 5
    listed = 2 if indent is None else 3 + pad  # "[" "]", and with an indent "\n" + pad before "]"
    block = 2 + _escaped_bytes("</agent-link-inbox>") + 2  # the quotes, the footer and the newline before it
    opened = 0
    for k, (view, envelope) in enumerate(messages, 1):
        text = json.dumps(view, ensure_ascii=False, indent=indent)
        size = len(text.encode("utf-8"))
        if indent is None:
            listed += size + (2 if k > 1 else 0)  # ", " between items
        else:  # each item on its own line two levels in, its own lines as much deeper; "," between
            listed += size + text.count("\n") * 2 * pad + 1 + 2 * pad + (1 if k > 1 else 0)
        block += _escaped_bytes(envelope) + 2  # the envelope and the escaped newline before it
        opened += 1 if view["open"] else 0
        header = len(f'<agent-link-inbox count="{k}">') + 2  # its two quotes escaped
        yield base + listed + block + header + len(str(opened))


def _escaped_bytes(text: str) -> int:
    """UTF-8 bytes of ``text`` inside a JSON string (without the quotes)."""
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8")) - 2


def _views(app: App, rows: list[Any], metas: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The views of ``rows`` with ``open`` (what the reader still has to do)."""
    views = app.mailbox.to_views(rows, metas=metas)
    for row, view in zip(rows, views, strict=True):
        view["open"] = view["status"] in ("pending", "unresolved", "expired") if row["anticipation"] != "fyi" else row["delivered_at"] is None
    return views


def _remaining(app: App, address: str, held: set[str]) -> int:
    """Undelivered open mail of ``address`` not left to a running wait (``held``)."""
    return max(app.mailbox.count_open(address, undelivered_only=True) - len(held), 0)


def _assemble(address: str, marked: list[str], views: list[dict[str, Any]], remaining: int, held: int, block: str,
              page: dict[str, Any] | None) -> dict[str, Any]:
    """The read's result (``held``: how many messages a wait holds)."""
    more = None
    if page is not None and page["nextOffset"] is not None:
        more = (f"This message continues: call read_agent_link_inbox with messageId {page['messageId']} and offset "
                f"{page['nextOffset']} to read the next part.")
    elif remaining:
        more = f"{remaining} more message(s) wait: call read_agent_link_inbox again to read them."
    return {
        "address": address,
        "markedDelivered": marked,
        "messages": views,
        "openCount": sum(1 for v in views if v["open"]),
        "remainingCount": remaining,
        "heldByActiveWait": held,
        "renderedBlock": block,
        "more": more,
        "page": page,
    }


def _page(app: App, caller: Caller, row: Any, budget: OutputBudget | None, offset: int, mark: bool,
          envelope: str | None = None) -> dict[str, Any]:
    """The largest page of ``row``'s envelope from ``offset`` that fits (bisecting its end)."""
    envelope = app.mailbox.envelope(row) if envelope is None else envelope
    total = len(envelope)
    if not 0 <= offset < total:
        raise AgentLinkError("invalid_arguments", f"offset {offset} is outside the message's {total} characters.",
                             {"errors": [{"path": "offset", "rule": "range", "expected": f"0-{total - 1}"}]})
    [view] = _views(app, [row])
    held = app.hooks.held_messages(caller.address) - {row["id"]}
    remaining = _remaining(app, caller.address, held)

    def build(end: int) -> dict[str, Any]:
        page = {"messageId": row["id"], "offset": offset, "nextOffset": end if end < total else None, "totalChars": total}
        return _assemble(caller.address, [], [view], remaining, len(held), envelope[offset:end], page)

    end = total
    if budget is not None and not fits(build(total), budget, 1):
        from bisect import bisect_left

        # the largest end that fits (at least one character per page): ends offset+1 .. offset+n fit
        n = bisect_left(range(offset + 1, total), True, key=lambda e: not fits(build(e), budget, 1))
        end = offset + max(n, 1)
    out = build(end)
    if end == total and mark and row["delivered_at"] is None and app.mailbox.mark_delivered(row["id"], "inbox"):
        [view] = _views(app, app.mailbox.rows([row["id"]]))
        held = app.hooks.held_messages(caller.address) - {row["id"]}
        out = _assemble(caller.address, [row["id"]], [view], _remaining(app, caller.address, held), len(held),
                        out["renderedBlock"], out["page"])
    return out


def oversized_notice(row: Any, size: int) -> str:
    """The ``<agent-link-notice>`` pushed instead of an envelope of ``size`` bytes that the host
    would cut: who sent which message and how to read it in pages."""
    from agent_link_core.envelope import render_element

    text = (f"A message from another agent is too large ({size} bytes) to show here. Read it with read_agent_link_inbox "
            f"(messageId {row['id']}); it comes in pages, follow `more` until it ends.")
    return render_element("agent-link-notice", [("id", row["id"]), ("from", row["from_addr"])], text)
