"""The page's sections cost the same number of SQL statements for many messages as for a few
(issue 32): states, rows, conversation roots and session titles are read in batches."""

from __future__ import annotations

import asyncio
import functools
import itertools
from pathlib import Path
from typing import Any

import pytest
from agent_link_web import views

from agent_link_core.app import App
from agent_link_core.records import OutgoingMessage
from agent_link_core.model import Caller
from agent_link_search.index import note_session_titles

PERSON = Caller("user:me", "explicit", "user")
_IDS = itertools.count(1)


def fill(app: App, n: int) -> list[str]:
    """``n`` messages between the person and a few agents, in a handful of conversations;
    some delivered, some resolved; every agent has a title."""
    ids: list[str] = []
    for i in range(n):
        agent = Caller(f"team:a{i % (n // 2)}", "explicit", "team")  # agents as many as the messages allow
        sender, to = (PERSON, agent.address) if i % 4 == 3 else (agent, PERSON.address)
        reply_to = ids[-1] if ids and i % 5 else None
        msg = OutgoingMessage(f"01J{next(_IDS):023d}", sender, to, to, f"note {i}", ("reply", "action", "fyi")[i % 3], None, reply_to)
        ids.append(app.mailbox.store_message(msg)[0]["id"])
        if i % 5 == 1:
            app.mailbox.mark_delivered(ids[-1], "test")
        if i % 7 == 4 and to == PERSON.address:
            app.mailbox.resolve(ids[-1], PERSON, "done")
    with app.store.write() as conn:
        note_session_titles(conn, [(f"team:a{k}", f"agent {k}") for k in range(n // 2)])
    return ids


SECTIONS = {
    "inbox": lambda app, ids: views.inbox(app, PERSON.address),
    "conversations": lambda app, ids: views.conversations(app, PERSON.address),
    "conversation": lambda app, ids: views.conversation_view(app, PERSON.address, ids[-1], ()),
    "agents": lambda app, ids: asyncio.run(views.agents(app, PERSON.address)),
}


def statements(app: App, fn: Any) -> int:
    seen: list[str] = []
    app.store.conn.set_trace_callback(seen.append)
    try:
        fn()
    finally:
        app.store.conn.set_trace_callback(None)
    return sum(1 for sql in seen if not sql.startswith("--"))  # not SQLite's own inside a virtual table


@pytest.mark.parametrize("name", sorted(SECTIONS))
def test_a_section_runs_as_many_statements_for_many_messages_as_for_few(name: str, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    counts = []
    for n in (6, 30):
        monkeypatch.setenv("AGENT_LINK_STATE_DIR", str(tmp_path / str(n)))
        app = App.create()
        try:
            ids = fill(app, n)
            SECTIONS[name](app, ids)
            counts.append(statements(app, functools.partial(SECTIONS[name], app, ids)))
        finally:
            app.close()
    assert counts[0] == counts[1], counts


def test_cards_carry_the_titles_and_the_conversations_their_roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_STATE_DIR", str(tmp_path))
    app = App.create()
    try:
        ids = fill(app, 12)
        found = views.conversation_view(app, PERSON.address, ids[-1], ())
        assert {c["fromTitle"] for c in found["cards"] if c["from"] != PERSON.address} <= {f"agent {k}" for k in range(6)}
        assert all(c["toTitle"] is None for c in found["cards"] if c["to"] == PERSON.address)
        listed = views.conversations(app, PERSON.address)
        assert {c["rootId"] for c in listed} == {ids[0], ids[5], ids[10]}
        assert sum(c["count"] for c in listed) == 12
        agents = asyncio.run(views.agents(app, PERSON.address))["agents"]
        assert {(a["address"], a["title"]) for a in agents} == {(f"team:a{k}", f"agent {k}") for k in range(6)}
    finally:
        app.close()


def test_agents_of_another_machine_show_the_machine_and_a_stale_listing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_link_core import hookimpl
    from agent_link_core.harness import Harness, SessionListing
    from agent_link_core.model import Session
    from agent_link_web.server import templates

    class Far(Harness):
        name = "far"

        async def list_sessions(self, *, include_archived: bool = False, limit: int = 200) -> SessionListing:
            return SessionListing([Session("codex:t1", "codex", "t1", title="Thread on beta", extra={"machine": "beta", "machineStale": True}),
                                   Session("far:here", "far", "here", title="Local one")])

        async def get_session(self, session_id: str) -> Session | None:
            return None

    class FarPlugin:
        @hookimpl
        def agent_link_register_harnesses(self, register: Any) -> None:
            register(Far())

    monkeypatch.setenv("AGENT_LINK_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "")
    app = App.create(extra_plugins=(("farhost", FarPlugin()),))
    try:
        data = asyncio.run(views.agents(app, PERSON.address))
    finally:
        app.close()
    rows = {a["address"]: a for a in data["agents"]}
    assert (rows["codex:t1"]["machine"], rows["codex:t1"]["machineStale"]) == ("beta", True)
    assert (rows["far:here"]["machine"], rows["far:here"]["machineStale"]) == (None, False)
    html = templates().get_template("_agents.html").render(data=data, person=PERSON.address)
    assert 'on <span class="machine">beta</span> <span class="warn">(listing stale)</span>' in html
    assert html.count('class="machine"') == 1
