"""Conversations read in proportion to what they return (issue 32): a conversation and the
recent conversations run as many SQL statements for many messages as for a few, the roots of
many messages are found in one query (a ``reply_to`` cycle ends), and ``show --thread``
renders each message's envelope once."""

from __future__ import annotations

import functools
import itertools
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from agent_link_conversations.conversation import conversation_of, recent_conversations, root_of, roots_of

from agent_link_core.app import App
from agent_link_core.records import OutgoingMessage
from agent_link_core.model import Caller
from agent_link_testing.envelope_calls import ME, PEER, Counting

_IDS = itertools.count(1)


def store(app: App, body: str, to: str = "team:me", sender: Caller = PEER, reply_to: str | None = None,
          anticipation: str = "reply") -> str:
    """Store one message, its id in the order stored (ULIDs of one millisecond would sort at random)."""
    msg = OutgoingMessage(f"01J{next(_IDS):023d}", sender, to, to, body, anticipation, None, reply_to)
    return str(app.mailbox.store_message(msg)[0]["id"])


def mail(app: App, n: int, tag: str) -> list[str]:
    """``n`` messages between team:me and team:peer, each answering the one before (one
    conversation); some delivered, reminded, resolved or accepted by a host."""
    ids: list[str] = []
    for i in range(n):
        sender, to = (ME, "team:peer") if i % 4 == 3 else (PEER, "team:me")
        ids.append(store(app, f"{tag} {i}", to=to, sender=sender, reply_to=ids[-1] if ids else None,
                         anticipation=("reply", "action", "fyi")[i % 3]))
        if i % 5 == 1:
            app.mailbox.mark_delivered(ids[-1], "test")
        if i % 5 == 2:
            app.mailbox.record_event(ids[-1], "delivery_accepted", None, None, {"note": "accepted, awaiting"})
        if i % 6 == 1:
            app.mailbox.record_reminder(ids[-1], 1, "test", to)
        if i % 7 == 4 and to == "team:me":
            app.mailbox.resolve(ids[-1], ME, "done")
    return ids


def statements(app: App, fn: Any) -> int:
    """The SQL statements ``fn()`` runs (not those SQLite runs inside them, traced as ``-- ...``)."""
    seen: list[str] = []
    app.store.conn.set_trace_callback(seen.append)
    try:
        fn()
    finally:
        app.store.conn.set_trace_callback(None)
    return sum(not sql.startswith("--") for sql in seen)


LISTS = {
    "conversation": lambda app, ids: conversation_of(app, ME, ids[-1]),
    "recent conversations": lambda app, ids: recent_conversations(app.mailbox, app.mailbox.visible_to("team:me")),
}


@pytest.mark.parametrize("name", sorted(LISTS))
def test_a_list_runs_as_many_statements_for_many_messages_as_for_few(name: str, isolated_env: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    counts = []
    for n, tag in ((3, "few"), (24, "batch")):
        monkeypatch.setenv("AGENT_LINK_STATE_DIR", str(isolated_env / tag))
        app = App.create()
        try:
            ids = mail(app, n, tag)
            LISTS[name](app, ids)  # the first call may prepare what later ones reuse
            counts.append(statements(app, functools.partial(LISTS[name], app, ids)))
        finally:
            app.close()
    assert counts[0] == counts[1], counts


def test_roots_of_many_messages_are_their_roots_one_by_one(isolated_env: Path) -> None:
    app = App.create()
    try:
        chain = [store(app, "root")]
        for i in range(6):
            chain.append(store(app, f"answer {i}", reply_to=chain[-1 if i % 2 else 0]))
        loop_a, loop_b = store(app, "cycle a"), store(app, "cycle b")
        app.store.conn.execute("UPDATE messages SET reply_to = ? WHERE id = ?", (loop_b, loop_a))
        app.store.conn.execute("UPDATE messages SET reply_to = ? WHERE id = ?", (loop_a, loop_b))
        ids = [*chain, loop_a, loop_b, "01J00000000000000000000000"]
        one_by_one = {i: root_of(app.store.conn, i) for i in ids}
        assert roots_of(app.store.conn, ids) == {i: r for i, r in one_by_one.items() if i != ids[-1]}
    finally:
        app.close()
    assert one_by_one[ids[-1]] == ids[-1] and {one_by_one[i] for i in chain} == {chain[0]}


def test_the_cli_prints_a_conversation_s_envelopes_rendering_each_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from agent_link_core import cli as cli_mod
    from agent_link_testing.cli_identity import named_address_env
    from agent_link_testing.cli_plugins import add_cli_plugins

    counting = Counting()
    add_cli_plugins(monkeypatch, counting)
    app = App.create()  # with the counting plugin (add_cli_plugins)
    try:
        ids = mail(app, 9, "cli")
    finally:
        app.close()
    counting.calls.clear()
    args = ["show", ids[-1], "--thread", "--envelope", "--from", "team:me"]
    shown = CliRunner().invoke(cli_mod.build_cli(), args, env=named_address_env(args), catch_exceptions=False)
    assert shown.exit_code == 0, shown.output
    assert shown.output.count("<agent-link-message ") == 9
    assert counting.calls == Counter({i: 1 for i in ids}) and counting.batches == 1
