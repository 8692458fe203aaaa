"""Delivered means the model saw it, for what the host shows (a scripted harness declaring a small budget):

* an inbox read returns only what fits the calling host's budget, marks only that, says what is left; a message
  larger than the budget comes in pages and is delivered with its last one;
* a push larger than the host shows is announced instead and stays undelivered;
* without an answer of this plugin both are whole (tests/test_hookspecs.py).

The real-host versions live with the codex and claude plugins' tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agent_link_budgets import fit
from agent_link_core import reading
from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError
from agent_link_core.harness import Delivery, Harness, OutputBudget
from agent_link_core.mailbox import new_message_id
from agent_link_core.model import Caller, Session
from agent_link_core.records import OutgoingMessage
from agent_link_testing.harnesses import HarnessPlugin

ME = Caller("team:me", "explicit", "team")


class Host(Harness):
    """Sessions ``hx:<id>``: ``ok`` shows pushes at once, anything else keeps them queued. A small output budget."""

    name = "hx"
    output_budget = OutputBudget(tool_result_bytes=4_000, json_indent=2, push_bytes=2_000)

    def __init__(self) -> None:
        self.pushed: list[tuple[str, str]] = []

    async def get_session(self, session_id: str) -> Session | None:
        return Session(f"hx:{session_id}", "hx", session_id)

    async def deliver(self, message: dict[str, Any], envelope: str, options: Any) -> Delivery:
        self.pushed.append((message["id"], envelope))
        if message["recipient"] == "hx:ok":
            return Delivery(delivered=True, via="hx-push", evidence={"echo": message["id"]})
        return Delivery()


@pytest.fixture
def host() -> Host:
    return Host()


@pytest.fixture
def app(host: Host) -> Iterator[App]:
    application = App.create(extra_plugins=(HarnessPlugin(host),))
    yield application
    application.close()


def store(app: App, to: str, body: str) -> str:
    row, _ = app.mailbox.store_message(OutgoingMessage(new_message_id(), ME, to, to, body, "fyi", None, None))
    return str(row["id"])


def test_an_inbox_read_returns_what_fits_marks_only_that_and_says_what_is_left(app: App, host: Host) -> None:
    me = Caller("hx:quiet", "runtime_context", "hx")
    ids = [store(app, "hx:quiet", f"report {n}: " + "x" * 1_000) for n in range(5)]
    first = reading.inbox(app, me, limit=20, mark=True, include_open=True)
    assert fit.result_bytes(first, host.output_budget) <= host.output_budget.tool_result_bytes
    assert 1 <= len(first["markedDelivered"]) < 5 and first["markedDelivered"] == ids[: len(first["markedDelivered"])]
    assert first["remainingCount"] == 5 - len(first["markedDelivered"]) and "call read_agent_link_inbox again" in first["more"]
    assert first["page"] is None and all(f'id="{i}"' in first["renderedBlock"] for i in first["markedDelivered"])
    marked = list(first["markedDelivered"])
    for _ in range(5):
        out = reading.inbox(app, me, limit=20, mark=True, include_open=False)
        marked += out["markedDelivered"]
        if not out["more"]:
            break
    assert marked == ids and out["remainingCount"] == 0
    peek = reading.inbox(app, me, limit=20, mark=False, include_open=True)
    assert len(peek["messages"]) == 0 and peek["more"] is None  # fyi mail is closed once read


def test_a_message_larger_than_the_budget_is_read_in_pages_and_delivered_with_the_last(app: App, host: Host) -> None:
    me = Caller("hx:quiet", "runtime_context", "hx")
    big = store(app, "hx:quiet", "".join(f"line {n} of a long text\n" for n in range(600)))
    envelope = app.mailbox.envelope(app.mailbox.get_row(big))
    out = reading.inbox(app, me, limit=20, mark=True, include_open=True)
    pages = [out]
    while out["page"]["nextOffset"] is not None:
        assert out["markedDelivered"] == [] and app.mailbox.get_row(big)["first_delivered_at"] is None
        assert f"messageId {big} and offset {out['page']['nextOffset']}" in out["more"]
        out = reading.inbox(app, me, limit=20, mark=True, include_open=True, message_id=big,
                            offset=out["page"]["nextOffset"])
        pages.append(out)
    assert len(pages) >= 3 and all(fit.result_bytes(p, host.output_budget) <= 4_000 for p in pages)
    assert "".join(p["renderedBlock"] for p in pages) == envelope and pages[-1]["page"]["totalChars"] == len(envelope)
    assert pages[-1]["markedDelivered"] == [big] and app.mailbox.get_row(big)["delivered_via"] == "inbox"
    with pytest.raises(AgentLinkError) as info:
        reading.inbox(app, me, limit=20, mark=True, include_open=True, message_id=big, offset=len(envelope))
    assert info.value.code == "invalid_arguments"
    with pytest.raises(AgentLinkError) as info:
        reading.inbox(app, Caller("hx:other", "runtime_context", "hx"), limit=20, mark=True, include_open=True, message_id=big)
    assert info.value.code == "wrong_recipient"


@pytest.mark.anyio
async def test_a_push_larger_than_the_host_shows_is_announced_and_stays_undelivered(app: App, host: Host) -> None:
    sent = await app.send(caller=ME, to="hx:ok", body="y" * 3_000)
    mid = sent.message["id"]
    [(pushed_id, text)] = host.pushed
    assert pushed_id == mid and text.startswith("<agent-link-notice") and mid in text and "yyyy" not in text
    assert sent.delivery is not None and not sent.delivery.delivered and sent.delivery.state == "announced"
    assert sent.delivery.warnings[0]["code"] == "too_large_to_push" and sent.delivery.warnings[0]["details"]["announced"] is True
    assert app.mailbox.get_row(mid)["first_delivered_at"] is None
    small = await app.send(caller=ME, to="hx:ok", body="short")
    assert small.delivery is not None and small.delivery.delivered and host.pushed[-1][1].startswith("<agent-link-message")
