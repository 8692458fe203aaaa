"""An inbox read (``read_agent_link_inbox``, ``agent-link inbox``): the caller's open mail but what a running wait
returns itself (``heldByActiveWait``), or one message's envelope from an offset in characters (``messageId`` +
``offset``). How much of it the caller's host shows the model in full is a plugin's answer (``agent_link_fit_read``:
plugins/budgets); without one a read returns everything up to its limit, a message whole (docs/plugins.md section 3)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from agent_link_core.envelope import render_inbox
from agent_link_core.errors import AgentLinkError

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - typing only
    from typing import Any
    from agent_link_core.app import App
    from agent_link_core.model import Caller


class ReadDraft:
    """What an inbox read may return, offered to ``agent_link_fit_read`` to choose how much the host shows in full.

    :ivar page: False: the answer ``n`` counts the first messages returned (0 with messages pages the first one); True:
        one message's envelope is read in pages and ``n`` is where this page ends, in characters.
    :ivar start: the smallest answer (a page: one character past its offset); :ivar stop: the largest, everything.
    :ivar body_bytes: UTF-8 bytes of the messages' bodies (0 for a page); :ivar messages: ``(view, envelope)`` of each, in
        order, each envelope rendered as it is taken (a page: none).
    """

    def __init__(self, start: int, stop: int, build: Callable[[int], dict[str, Any]], *, page: bool = False,
                 messages: Iterator[tuple[dict[str, Any], str]] = iter(()), body_bytes: int = 0) -> None:
        self.start, self.stop, self.page, self.messages, self.body_bytes = start, stop, page, messages, body_bytes
        self._build = build
        self._last: tuple[int, dict[str, Any]] | None = None

    def result(self, n: int) -> dict[str, Any]:
        """The read's result with answer ``n`` (``start`` <= n <= ``stop``) before anything is marked delivered."""
        if self._last is None or self._last[0] != n:  # the last one is kept: the read returns it when chosen
            self._last = (n, self._build(n))
        return self._last[1]


def inbox(app: App, caller: Caller, *, limit: int, mark: bool, include_open: bool, message_id: str | None = None,
          offset: int = 0) -> dict[str, Any]:
    """The caller's inbox read, each view and envelope made once.

    :param message_id: read this message's envelope from ``offset`` (characters) instead; marked delivered (with
        ``mark``) with the envelope's last page.
    :returns: the fields of :meth:`App.inbox` plus ``more`` (what is left and how to read it, or None), ``page``
        (``{messageId, offset, nextOffset, totalChars}`` or None), ``heldByActiveWait`` (mail left to a running wait,
        counted in neither ``messages`` nor ``remainingCount``: the unread mail not shown) and ``warnings`` when the
        fitting plugin failed.
    :raises AgentLinkError: ``not_found``, ``wrong_recipient`` (another session's message), ``invalid_arguments`` (an
        offset past the envelope's end).
    """
    app.require_caller(caller)
    if message_id is not None:
        row = app.mailbox.require(message_id)
        if row["recipient"] != caller.address:
            raise AgentLinkError("wrong_recipient", f"Message {row['id']} is not addressed to you.",
                                 {"messageId": row["id"], "expected": row["recipient"], "caller": caller.address})
        return _page(app, caller, row, offset, mark)
    held = app.hooks.held_messages(caller.address)
    rows = app.mailbox.drain(caller.address, limit + len(held), include_open=include_open)
    rows = [r for r in rows if r["id"] not in held][:limit]
    messages = [app.mailbox.row_dict(row) for row in rows]  # each row's metadata decoded once, for its view and its envelope
    views = _views(app, rows, [m["metadata"] for m in messages])
    envelopes: list[str] = []
    making = [app.mailbox.envelopes(rows, messages)]  # the last makes the next envelope

    def rendered(upto: int) -> list[str]:  # the envelopes, the first `upto` made: each once, only as far as needed
        for k in range(len(envelopes), upto):
            if (made := next(making[-1], None)) is None:  # ended early (a fitting plugin interrupted while one rendered): again from k
                making.append(app.mailbox.envelopes(rows[k:]))
            envelopes.append(made if made is not None else next(making[-1]))
        return envelopes

    def unmarked(n: int) -> dict[str, Any]:  # the result holding the first n messages (fitted counting them as remaining)
        return _assemble(caller.address, [], views[:n], remaining, len(held), render_inbox(rendered(n)[:n]), None)

    remaining = _remaining(app, caller.address, held)
    draft = ReadDraft(0, len(rows), unmarked, messages=((views[k], rendered(k + 1)[k]) for k in range(len(rows))),
                      body_bytes=sum(row["body_bytes"] for row in rows))
    count, warnings = app.hooks.fit_read(caller, draft) if rows else (None, [])
    count = len(rows) if count is None else count
    if rows and not count:  # the first message alone is larger than the host shows: page it
        return _page(app, caller, rows[0], 0, mark, rendered(1)[0])
    unread = [row["id"] for row in rows[:count] if row["delivered_at"] is None]
    if not (mark and unread):
        return _warned(_unshown(draft.result(count), len(unread)), warnings)
    marked = app.mailbox.mark_many_delivered(unread, "inbox")
    return _warned(_marked(app, caller.address, marked, [row["id"] for row in rows[:count]], render_inbox(rendered(count)[:count]),
                           None), warnings)


def _warned(result: dict[str, Any], warnings: list[dict[str, Any]]) -> dict[str, Any]:
    return {**result, "warnings": warnings} if warnings else result


def _views(app: App, rows: list[Any], metas: Sequence[dict[str, Any] | None] | None = None) -> list[dict[str, Any]]:
    """The views of ``rows``, with ``open``: what the reader still has to do; a reader seeing a message become unresolved
    or expired records it (:meth:`~agent_link_core.mailbox.Mailbox.note_transition`)."""
    views = []
    for row, state, meta in zip(rows, app.mailbox.states(rows), metas or [None] * len(rows), strict=True):
        app.mailbox.note_transition(row, state)
        view = app.mailbox.to_view(row, state, meta=meta)
        view["open"] = view["status"] in ("pending", "unresolved", "expired") if row["anticipation"] != "fyi" else row["delivered_at"] is None
        views.append(view)
    return views


def _remaining(app: App, address: str, held: set[str]) -> int:  # undelivered mail not left to a running wait
    return max(app.mailbox.count_open(address, undelivered_only=True) - len(held), 0)


def _assemble(address: str, marked: list[str], views: list[dict[str, Any]], remaining: int, held: int, block: str,
              page: dict[str, Any] | None) -> dict[str, Any]:  # ``held``: how many messages a wait holds
    return {"address": address, "markedDelivered": marked, "messages": views, "openCount": sum(1 for v in views if v["open"]),
            "remainingCount": remaining, "heldByActiveWait": held, "renderedBlock": block, "more": _more(remaining, page), "page": page}


def _more(remaining: int, page: dict[str, Any] | None) -> str | None:
    if page is not None and page["nextOffset"] is not None:
        return (f"This message continues: call read_agent_link_inbox with messageId {page['messageId']} and offset "
                f"{page['nextOffset']} to read the next part.")
    return f"{remaining} more message(s) wait: call read_agent_link_inbox again to read them." if remaining else None


def _unshown(result: dict[str, Any], shown_unread: int) -> dict[str, Any]:  # fitted counting them: it only gets shorter
    left = max(result["remainingCount"] - shown_unread, 0)
    return {**result, "remainingCount": left, "more": _more(left, result["page"])} if shown_unread else result


def _page(app: App, caller: Caller, row: Any, offset: int, mark: bool, envelope: str | None = None) -> dict[str, Any]:
    """The page of ``row``'s envelope from ``offset`` the host shows (``agent_link_fit_read``; without it the rest)."""
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

    draft = ReadDraft(offset + 1, total, build, page=True)
    end, warnings = app.hooks.fit_read(caller, draft)
    out = draft.result(total if end is None else end)
    if end in (None, total) and mark and row["delivered_at"] is None and app.mailbox.mark_delivered(row["id"], "inbox"):
        out = _marked(app, caller.address, [row["id"]], [row["id"]], out["renderedBlock"], out["page"])
    return _warned(out if out["markedDelivered"] or end not in (None, total) else _unshown(out, row["delivered_at"] is None), warnings)


def _marked(app: App, address: str, marked: list[str], shown: list[str], block: str, page: dict[str, Any] | None) -> dict[str, Any]:
    """The result once ``marked`` are delivered: ``shown`` viewed again, what remains (held mail is never shown) counted again."""
    held = app.hooks.held_messages(address) - set(shown)
    return _assemble(address, marked, _views(app, app.mailbox.rows(shown)), _remaining(app, address, held), len(held), block, page)


def shown_unread(app: App, data: dict[str, Any]) -> list[str]:
    """Ids of the unread messages an inbox read shows whole (a paged message: with its last page)."""
    page = data.get("page")
    if page is not None:
        row = app.mailbox.get_row(page["messageId"])
        return [row["id"]] if page["nextOffset"] is None and row is not None and row["delivered_at"] is None else []
    return [m["id"] for m in data["messages"] if m.get("deliveredAt") is None]


def as_read(app: App, data: dict[str, Any], ids: list[str]) -> dict[str, Any]:
    """An inbox read made without marking, as it reads once ``ids`` are marked delivered (views and counts)."""
    from agent_link_core.store import now_ms

    data = {**data, "markedDelivered": list(ids)}
    if not ids:
        return data
    at, marked = now_ms(), set(ids)
    views = []
    for view in data["messages"]:
        if view["id"] in marked:
            row = dict(app.mailbox.stored(view["id"]))
            row.update(delivered_at=at, first_delivered_at=row["first_delivered_at"] or at, delivered_via="inbox")
            state = app.mailbox.state(row)  # type: ignore[arg-type]
            fresh = app.mailbox.to_view(row, state)  # type: ignore[arg-type]
            if "open" in view:
                fresh["open"] = state.status in ("pending", "unresolved", "expired") if row["anticipation"] != "fyi" else False
            view = {**view, **fresh}
        views.append(view)
    data["messages"] = views
    if "openCount" in data:
        data["openCount"] = sum(1 for v in views if v.get("open"))
    return data  # remainingCount already leaves out what the read showed
