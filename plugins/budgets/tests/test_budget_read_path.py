"""A budgeted read costs in proportion to what it returns (issue 32; the core's side: tests/test_read_path.py):

* a read cut by the budget renders at most one envelope it does not return (the envelope hook is asked about each
  message once, in one call), a paged read its envelope once per page (counted through the envelope hook);
* :func:`agent_link_budgets.fit.prefix_bytes` gives exactly the size ``result_bytes`` measures for every prefix of a
  read, for each JSON layout a host may declare.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from agent_link_budgets import fit
from agent_link_core.app import App
from agent_link_core.harness import OutputBudget
from agent_link_core.records import OutgoingMessage
from agent_link_testing.envelope_calls import ME, PEER, Counting



@pytest.fixture
def counting() -> Counting:
    return Counting()


@pytest.fixture
def app(counting: Counting) -> Iterator[App]:
    application = App.create(extra_plugins=(counting,))
    yield application
    application.close()


_IDS = itertools.count(1)


def store(app: App, n: int, body: str = "hello", anticipation: str = "reply") -> list[str]:
    """Store ``n`` messages to ``team:me`` with ids in the order they are stored (ULIDs of one millisecond would sort
    at random)."""
    ids = []
    for i in range(n):
        msg = OutgoingMessage(f"01J{next(_IDS):023d}", PEER, "team:me", "team:me", f"{body} {i}", anticipation, None, None)
        ids.append(app.mailbox.store_message(msg)[0]["id"])
    return ids


def test_a_read_cut_by_the_budget_renders_one_envelope_more_than_it_returns(app: App, counting: Counting, read: Any,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_link_core import mailbox

    rendered: list[str] = []
    render = mailbox.render_envelope
    monkeypatch.setattr(mailbox, "render_envelope", lambda msg, **kw: rendered.append(msg.id) or render(msg, **kw))
    ids = store(app, 20, body="x" * 600)
    out = read(app, ME, OutputBudget(6_000, json_indent=2), limit=20, mark=False, include_open=True)
    shown = [m["id"] for m in out["messages"]]
    assert 1 <= len(shown) < 20 and out["remainingCount"] == 20 - len(shown)
    assert rendered == ids[: len(shown) + 1]
    assert counting.calls == Counter({i: 1 for i in ids}) and counting.batches == 1


def test_a_paged_read_renders_its_envelope_once_per_page(app: App, counting: Counting, read: Any) -> None:
    [big] = store(app, 1, body="line of a long text\n" * 400)
    out = read(app, ME, OutputBudget(3_000), limit=20, mark=True, include_open=True)
    pages = 1
    while out["page"]["nextOffset"] is not None:
        out = read(app, ME, OutputBudget(3_000), limit=20, mark=True, include_open=True, message_id=big,
                   offset=out["page"]["nextOffset"])
        pages += 1
    assert pages >= 3 and out["markedDelivered"] == [big]
    assert counting.calls == Counter({big: pages})


@pytest.mark.parametrize("indent", [None, 0, 1, 2, 4])
def test_prefix_sizes_are_what_result_bytes_measures(app: App, indent: int | None, read: Any) -> None:
    rng = random.Random(indent)
    for n in range(1, 13):  # bodies of every kind of character JSON escapes or widens
        body = "".join(rng.choice(['a', 'é', '漢', '😀', '"', '\\', '\n', '\t', '<', '&', '\x01', '\u200b', ' ']) for _ in range(rng.randint(1, 300)))
        store(app, 1, body=body + f" {n}", anticipation=rng.choice(["fyi", "reply", "action"]))
    shape = OutputBudget(10**9, json_indent=indent)
    whole = read(app, ME, None, limit=100, mark=False, include_open=True)
    rows = app.mailbox.open_for("team:me", 100)
    # a read that marks nothing leaves what it shows out of remainingCount; the fitting measures it counting them
    counted = {"remainingCount": 12, "more": "12 more message(s) wait: call read_agent_link_inbox again to read them."}
    skeleton = {**whole, "messages": [], "openCount": 0, "renderedBlock": "", **counted}
    sizes = list(fit.prefix_bytes(skeleton, zip(whole["messages"], [app.mailbox.envelope(r) for r in rows]), shape))
    expected = [fit.result_bytes({**read(app, ME, None, limit=k, mark=False, include_open=True), **counted}, shape)
                for k in range(1, len(rows) + 1)]
    assert len(rows) == 12 and sizes == expected

