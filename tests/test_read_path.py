"""Reads cost in proportion to what they return (issue 32).

* an inbox read renders each message's envelope once, the envelope hook asked once for all its
  messages (a read cut by the budgets plugin: plugins/budgets/tests/test_budget_read_path.py);
  an answer of that hook with one refused contribution leaves out that plugin's only; a fitting
  plugin interrupted while an envelope renders for it leaves the read whole;
* every list (inbox, inbox --all; the conversations and web plugins' lists: their tests) runs as
  many SQL statements for many messages as for a few;
* escaping skips only text it would leave as it is;
* the envelope hook, called once per read without pluggy's machinery, gives the contributions
  in pluggy's order (and goes through pluggy when a wrapper is registered).
"""

from __future__ import annotations

import functools
import itertools
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_link_core import hookimpl, reading
from agent_link_core.app import App
from agent_link_core.envelope import MAX_ATTR_CODEPOINTS, escape_attr, escape_text
from agent_link_core.records import OutgoingMessage
from agent_link_core.model import Caller
from agent_link_core.records import EnvelopeContribution
from agent_link_testing.envelope_calls import ME, PEER, Counting



@pytest.fixture
def counting() -> Counting:
    return Counting()


@pytest.fixture
def app(counting: Counting):
    application = App.create(extra_plugins=(counting,))
    yield application
    application.close()


_IDS = itertools.count(1)


def store(app: App, n: int, body: str = "hello", to: str = "team:me", sender: Caller = PEER,
          reply_to: str | None = None, anticipation: str = "reply") -> list[str]:
    """Store ``n`` messages with ids in the order they are stored (ULIDs of one millisecond
    would sort at random)."""
    ids = []
    for i in range(n):
        msg = OutgoingMessage(f"01J{next(_IDS):023d}", sender, to, to, f"{body} {i}", anticipation, None, reply_to)
        ids.append(app.mailbox.store_message(msg)[0]["id"])
    return ids


def test_a_read_renders_each_envelope_once(app: App, counting: Counting) -> None:
    ids = store(app, 20)
    out = reading.inbox(app, ME, limit=20, mark=True, include_open=True)
    assert out["markedDelivered"] == ids
    assert counting.calls == Counter({i: 1 for i in ids}) and counting.batches == 1


class Statements:
    """Counts the SQL statements a connection runs while active (those agent-link asks for:
    not the ones SQLite runs inside them for a virtual table, traced as ``-- ...``)."""

    def __init__(self, app: App) -> None:
        self.app, self.count = app, 0

    def __enter__(self) -> Statements:
        self.app.store.conn.set_trace_callback(self._seen)
        return self

    def _seen(self, sql: str) -> None:
        self.count += not sql.startswith("--")

    def __exit__(self, *exc: object) -> None:
        self.app.store.conn.set_trace_callback(None)


def statements(app: App, fn: Any) -> int:
    with Statements(app) as seen:
        fn()
    return seen.count


def _mail(app: App, n: int, tag: str) -> list[str]:
    """``n`` messages between team:me and team:peer, each answering the one before (one
    conversation); most to team:me, some delivered, reminded, resolved or accepted by a host."""
    ids: list[str] = []
    for i in range(n):
        sender, to = (ME, "team:peer") if i % 4 == 3 else (PEER, "team:me")
        [mid] = store(app, 1, body=f"{tag} {i}", to=to, sender=sender, reply_to=ids[-1] if ids else None,
                      anticipation=("reply", "action", "fyi")[i % 3])
        ids.append(mid)
        if i % 5 == 1:
            app.mailbox.mark_delivered(mid, "test")
        if i % 5 == 2:
            app.mailbox.record_event(mid, "delivery_accepted", None, None, {"note": "accepted, awaiting"})
        if i % 6 == 1:
            app.mailbox.record_reminder(mid, 1, "test", to)
        if i % 7 == 4 and to == "team:me":
            app.mailbox.resolve(mid, ME, "done")
    return ids


LISTS = {
    "inbox": lambda app, ids: app.inbox(ME, limit=100, mark=False),
    "read": lambda app, ids: reading.inbox(app, ME, limit=100, mark=False, include_open=True),
    "inbox --all": lambda app, ids: app.mailbox.addressed_to(ME.address, 100),
    "due reminders": lambda app, ids: app.mailbox.due_reminders("team:me"),
}


@pytest.mark.parametrize("name", sorted(LISTS))
def test_a_list_runs_as_many_statements_for_many_messages_as_for_few(name: str, isolated_env: Any,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    counts = []
    for n, tag in ((3, "few"), (24, "batch")):
        monkeypatch.setenv("AGENT_LINK_STATE_DIR", str(isolated_env / tag))
        app = App.create()
        try:
            ids = _mail(app, n, tag)
            LISTS[name](app, ids)  # the first call may prepare what later ones reuse
            counts.append(statements(app, functools.partial(LISTS[name], app, ids)))
        finally:
            app.close()
    assert counts[0] == counts[1], counts


def test_states_of_many_rows_are_their_states_one_by_one(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = _mail(app, 14, "mixed")
    rows = app.mailbox.rows(list(reversed(ids)))
    assert [r["id"] for r in rows] == list(reversed(ids))
    monkeypatch.setattr("agent_link_core.mailbox.STATE_BATCH", 4)  # batches split across rows
    together = app.mailbox.states(rows, 1_900_000_000_000)
    alone = [app.mailbox.states([row], 1_900_000_000_000)[0] for row in rows]
    assert [slots(s) for s in together] == [slots(s) for s in alone]
    assert {s.delivery for s in together} >= {"accepted", "queued", "delivered", "acknowledged"}


def slots(state: Any) -> dict[str, Any]:
    return {k: getattr(state, k) for k in state.__slots__}


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_escaping_skips_only_text_it_leaves_as_it_is(text: str) -> None:
    # an "&" after the text always takes the full escaping steps, and escapes alone
    assert escape_text(text + "&") == escape_text(text) + "&amp;"
    if len(text) < MAX_ATTR_CODEPOINTS:
        assert escape_attr(text + "&") == escape_attr(text) + "&amp;"


def test_a_read_marks_what_it_returns_in_one_write_transaction(app: App) -> None:
    ids = store(app, 12)
    seen: list[str] = []
    app.store.conn.set_trace_callback(seen.append)
    try:
        out = reading.inbox(app, ME, limit=20, mark=True, include_open=True)
    finally:
        app.store.conn.set_trace_callback(None)
    assert out["markedDelivered"] == ids
    assert sum(1 for sql in seen if sql.startswith("BEGIN")) == 1
    kinds = [r["kind"] for i in ids for r in app.store.conn.execute("SELECT kind FROM message_events WHERE message_id = ? ORDER BY seq", (i,))]
    assert kinds == ["sent", "delivered"] * 12


def test_the_cli_shows_a_message_s_envelope_rendering_it_once(counting: Counting, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from agent_link_core import cli as cli_mod
    from agent_link_testing.cli_identity import named_address_env
    from agent_link_testing.cli_plugins import add_cli_plugins

    add_cli_plugins(monkeypatch, counting)
    app = App.create()  # with the counting plugin (add_cli_plugins)
    try:
        ids = _mail(app, 9, "cli")
    finally:
        app.close()
    counting.calls.clear()
    args = ["show", ids[-1], "--envelope", "--from", "team:me"]
    shown = CliRunner().invoke(cli_mod.build_cli(), args, env=named_address_env(args), catch_exceptions=False)
    assert shown.exit_code == 0, shown.output
    assert shown.output.count("<agent-link-message ") == 1
    assert counting.calls == Counter({ids[-1]: 1})


def contributing(name: str, *, tryfirst: bool = False) -> object:
    """A plugin contributing ``via`` and one element, both naming ``name``."""

    class Via:
        @hookimpl(tryfirst=tryfirst)
        def agent_link_render_envelopes(self, messages: list[dict[str, Any]], app: App) -> dict[str, EnvelopeContribution]:
            from agent_link_core.envelope import render_element

            assert app is not None
            return {m["id"]: EnvelopeContribution({"via": f"role:{name}"}, [render_element("note", [("by", name)])]) for m in messages}

    return Via()


def test_envelope_contributions_come_in_pluggy_s_order() -> None:
    """tryfirst first, then the later registered before the earlier, as pluggy calls them."""
    plugins = [contributing("first"), contributing("second"), contributing("eager", tryfirst=True)]
    application = App.create(extra_plugins=tuple(plugins))
    try:
        [message_id] = store(application, 1)
        message = application.mailbox.row_dict(application.mailbox.require(message_id))
        direct = application.hooks.call("agent_link_render_envelopes", messages=[message])
        assert [c[message_id].attributes["via"] for c in direct] == ["role:eager", "role:second", "role:first"]
    finally:
        application.close()


class Refused:
    """Answers well for every message but the last, whose contribution has an attribute no envelope renders, and for
    a message outside the read."""

    @hookimpl
    def agent_link_render_envelopes(self, messages: list[dict[str, Any]]) -> dict[str, EnvelopeContribution]:
        from agent_link_core.envelope import render_element

        added = {m["id"]: EnvelopeContribution({}, [render_element("refused", [])]) for m in messages}
        return {**added, messages[-1]["id"]: EnvelopeContribution({"colour": "red"}), "01ARZ3NDEKTSV4RRFFQ69G5FAV": added[messages[0]["id"]]}


class Foreign:
    """Answers only for a message outside the read."""

    @hookimpl
    def agent_link_render_envelopes(self) -> dict[str, EnvelopeContribution]:
        from agent_link_core.envelope import render_element

        return {"01ARZ3NDEKTSV4RRFFQ69G5FAV": EnvelopeContribution({}, [render_element("foreign", [])])}


def test_a_refused_envelope_answer_leaves_out_that_plugin_s_contributions_to_the_read_only() -> None:
    application = App.create(extra_plugins=(("refused", Refused()), ("foreign", Foreign()), contributing("good")))
    try:
        ids = store(application, 3)
        out = reading.inbox(application, ME, limit=10, mark=False, include_open=True)
        envelopes = out["renderedBlock"].split("\n</agent-link-message>")[:-1]
        assert len(envelopes) == 3 and [m["id"] for m in out["messages"]] == ids
        assert all('via="role:good"' in e and '<note by="good" />' in e for e in envelopes)
        assert "<refused" not in out["renderedBlock"] and "<foreign" not in out["renderedBlock"]
        [problem] = [p for p in application.hooks.boundary.report() if p["plugin"] == "refused"]
        assert problem["hook"] == "agent_link_render_envelopes" and "'via' and 'procedure'" in problem["error"]
        assert not [p for p in application.hooks.boundary.report() if p["plugin"] in ("foreign", "good")]
    finally:
        application.close()


class Fitting:
    """Fits a read by looking at each message's envelope (as the budgets plugin does)."""

    @hookimpl
    def agent_link_fit_read(self, read: reading.ReadDraft) -> int:
        return sum(1 for _ in read.messages)


@pytest.mark.timeout(300, method="thread")  # SIGALRM stays the boundary's, as in the MCP server
def test_a_fitting_plugin_interrupted_while_an_envelope_renders_leaves_the_read_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """The read's envelopes are made by one generator, which the fitting plugin's call drives; when that call is
    interrupted after its budget while the core renders an envelope for it, the generator ends, and the read must still
    be returned whole, as for any failed fitting plugin (found by review: it failed with 'generator raised StopIteration')."""
    import time

    from agent_link_core import boundary, mailbox

    boundary.watch_interrupts()
    if boundary._arm(60) is None:
        pytest.skip("another handler owns SIGALRM in this process")
    boundary._disarm(boundary._frames[-1])
    monkeypatch.setenv("AGENT_LINK_HOOK_TIMEOUT_MS", "100")
    render, calls = mailbox.render_envelope, itertools.count(1)

    def rendering(msg: Any, **kw: Any) -> str:
        if next(calls) == 2:  # the second envelope: the fitting plugin's budget runs out while it renders
            time.sleep(5)
        return render(msg, **kw)

    monkeypatch.setattr(mailbox, "render_envelope", rendering)
    application = App.create(extra_plugins=(("fitting", Fitting()), contributing("good")))
    try:
        ids = store(application, 4)
        out = reading.inbox(application, ME, limit=10, mark=True, include_open=True)
        assert out["markedDelivered"] == ids and out["renderedBlock"].count('via="role:good"') == 4
        assert [w["details"]["plugin"] for w in out["warnings"]] == ["fitting"]
    finally:
        application.close()
