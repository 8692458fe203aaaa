"""How much of an inbox read the caller's host shows the model in full (README.md): whole messages that fit, else
one larger message in pages of its envelope (``messageId`` + ``offset``, in characters); and the notice pushed instead
of an envelope larger than the host shows in one piece."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from agent_link_core.config import Setting
from agent_link_core.harness_decl import OutputBudget

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - typing only
    from typing import Any
    from agent_link_core.app import App
    from agent_link_core.model import Caller
    from agent_link_core.reading import ReadDraft

SETTINGS = (
    Setting("AGENT_LINK_READ_BYTES", "int", 40000, minimum=2000, maximum=4_000_000,
            doc="bytes one inbox read returns when the caller's host declares no limit (plain addresses, the CLI); "
                "a larger message comes in pages"),
)

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


def fit(read: ReadDraft, budget: OutputBudget) -> int:
    """The ``agent_link_fit_read`` answer for ``budget``: the most whole messages that fit (0: the first is paged),
    each envelope rendered only as far as needed; for a page, its largest end that fits (at least one character)."""
    if read.page:
        if fits(read.result(read.stop), budget, 1):
            return read.stop
        from bisect import bisect_left

        # ends start .. start+n-1 fit
        n = bisect_left(range(read.start, read.stop), True, key=lambda end: not fits(read.result(end), budget, 1))
        return read.start - 1 + max(n, 1)
    if read.body_bytes + RESERVE_BYTES <= budget.tool_result_bytes and fits(read.result(read.stop), budget, read.stop):
        return read.stop  # all may fit (the bodies alone do): the whole result measured once, not each prefix
    count = 0
    for size in prefix_bytes({**read.result(0), "renderedBlock": ""}, read.messages, budget):
        if size + RESERVE_BYTES + PER_MESSAGE_RESERVE_BYTES * (count + 1) > budget.tool_result_bytes:
            break
        count += 1
    return count


def prefix_bytes(skeleton: dict[str, Any], messages: Iterable[tuple[dict[str, Any], str]], budget: OutputBudget) -> Iterator[int]:
    """The :func:`result_bytes` of the read result holding the first 1, 2, ... messages, added
    up from each view's and envelope's size as Python's JSON encoder lays a list out.

    :param skeleton: the result with ``messages`` ``[]``, ``openCount`` 0 and ``renderedBlock``
        ``""``; its other fields are those of every prefix.
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


def oversized_notice(message: dict[str, Any], size: int) -> str:
    """The ``<agent-link-notice>`` pushed instead of an envelope of ``size`` bytes that the host
    would cut: who sent which message and how to read it in pages."""
    from agent_link_core.envelope import render_element

    text = (f"A message from another agent is too large ({size} bytes) to show here. Read it with read_agent_link_inbox "
            f"(messageId {message['id']}); it comes in pages, follow `more` until it ends.")
    return render_element("agent-link-notice", [("id", message["id"]), ("from", message["from_addr"])], text)
