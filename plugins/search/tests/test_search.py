"""Search over the mail (FTS5): the index, the query language, the visibility rule, snippets,
titles kept from listings, the MCP tool through a real client, the CLI, and a page's cost."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_link_testing.mcp_client import agent_link_mcp
from click.testing import CliRunner

from agent_link_core.app import App
from agent_link_core.cli import build_cli
from agent_link_core.errors import AgentLinkError
from agent_link_core.model import Caller
from agent_link_core.store import CORE_MIGRATIONS, Store
from agent_link_testing.cli_identity import named_address_env
from agent_link_testing.tool_app import app_as, call_tool
from agent_link_testing.handover import hand_over

from agent_link_search.index import fts_query, note_session_titles, search_messages

ONLY_SEARCH = {"AGENT_LINK_LOAD_PLUGINS": "search"}
ALICE = Caller("team:alice", "config", "team")
BOB = Caller("team:bob", "config", "team")
CAROL = Caller("team:carol", "config", "team")
SQL_WORDS = ("fts5", "syntax error", "no such column", "sqlite", "MATCH", "unterminated")


def make_app(**extra: str) -> App:
    return App.create({**os.environ, **ONLY_SEARCH, **extra})


@pytest.fixture
def app(isolated_env: Path) -> Iterator[App]:
    a = make_app()
    yield a
    a.close()


def send(app: App, sender: Caller, to: str, body: str, **kw: Any) -> str:
    return str(asyncio.run(app.send(caller=sender, to=to, body=body, **kw)).message["id"])


def ids(result: dict[str, Any]) -> list[str]:
    return [r["id"] for r in result["results"]]


# -- the query language ----------------------------------------------------------------------


@pytest.mark.parametrize(("query", "expected"), [
    ("login bug", '"login" AND "bug"'),
    ('"exact phrase" OR other', '"exact phrase" OR "other"'),
    ("codex:0199-abc e-mail it's c++", '"codex:0199-abc" AND "e-mail" AND "it\'s" AND "c++"'),
    ("deploy* NOT staging", '"deploy"* NOT "staging"'),
    ("(a OR b) c", '( "a" OR "b" ) AND "c"'),
])
def test_fts_query_quotes_every_word(query: str, expected: str) -> None:
    assert fts_query(query) == expected


@pytest.mark.parametrize(("query", "reason"), [
    ('"never closed', "unclosed_quote"),
    ("(a OR b", "unbalanced_parentheses"),
    ("a) b", "unbalanced_parentheses"),
    ("AND", "dangling_operator"),
    ("a OR", "dangling_operator"),
    ("NOT a", "dangling_operator"),
    ("()", "dangling_operator"),
    ("--- ***", "empty"),
    ("   ", "empty"),
    ("x" * 1001, "too_long"),
])
def test_malformed_queries_get_a_clear_error_never_sql_text(app: App, query: str, reason: str) -> None:
    send(app, ALICE, "team:bob", "hello")
    with pytest.raises(AgentLinkError) as caught:
        search_messages(app, ALICE, query)
    error = caught.value.to_dict()
    assert error["code"] == "invalid_arguments"
    assert error["details"]["reason"] == reason
    assert error["details"]["errors"][0]["path"] == "query"
    assert not any(word.lower() in json.dumps(error).lower() for word in SQL_WORDS), error


def test_punctuation_that_breaks_raw_fts5_just_searches(app: App) -> None:
    mid = send(app, ALICE, "team:bob", "The e-mail to codex:0199 isn't sent; c++ build & <tags>")
    for query in ("e-mail", "codex:0199", "isn't", "c++ build", "<tags>", "e-mail*"):
        assert ids(search_messages(app, BOB, query)) == [mid], query
    # a NUL would end FTS5's reading of the expression inside a quoted word: it separates words
    for query in ("build\x00tags", '"c++\x00build"', "\x00sent"):
        assert ids(search_messages(app, BOB, query)) == [mid], repr(query)


# -- the index -------------------------------------------------------------------------------


def test_index_follows_inserts_and_handover_in_the_same_transaction(app: App) -> None:
    mid = send(app, ALICE, "role-less:x", "please rotate the signing keys")
    assert ids(search_messages(app, ALICE, "signing keys")) == [mid]
    assert hand_over(app, mid, "team:dave", "test")
    # the index moved with the row: the new holder finds it by its own address, the old one no longer
    assert ids(search_messages(app, Caller("team:dave", "config", "team"), "team:dave")) == [mid]
    assert ids(search_messages(app, Caller("role-less:x", "config", "role-less"), "rotate")) == [mid]  # still to_addr
    rows = app.store.conn.execute("SELECT rowid FROM message_fts WHERE message_fts MATCH '\"role-less:x\"'").fetchall()
    assert len(rows) == 1
    integrity = app.store.conn.execute("INSERT INTO message_fts (message_fts, rank) VALUES ('integrity-check', 1)")
    assert integrity is not None  # raises on a mismatch between index and table


def test_a_failed_insert_leaves_no_index_entry(app: App) -> None:
    with pytest.raises(sqlite3.IntegrityError), app.store.write() as conn:
        conn.execute("INSERT INTO messages (id, from_addr, from_source, to_addr, recipient, body, body_bytes, content_hash,"
                     " sent_at, anticipation) VALUES ('X', 'a:b', 's', 'a:c', 'a:c', 'ghostword', 9, 'h', 1, 'fyi')")
        conn.execute("INSERT INTO messages (id, from_addr, from_source, to_addr, recipient, body, body_bytes, content_hash,"
                     " sent_at, anticipation) VALUES ('X', 'a:b', 's', 'a:c', 'a:c', 'dup', 3, 'h', 1, 'fyi')")
    assert app.store.conn.execute("SELECT COUNT(*) FROM message_fts WHERE message_fts MATCH 'ghostword'").fetchone()[0] == 0


def test_migration_indexes_a_database_made_before_search(isolated_env: Path) -> None:
    db = isolated_env / "agent-link.db"
    old = Store(db, CORE_MIGRATIONS)
    with old.write() as conn:
        for i in range(3):
            conn.execute("INSERT INTO messages (id, from_addr, from_source, to_addr, recipient, body, body_bytes,"
                         " content_hash, sent_at, anticipation) VALUES (?, 'team:alice', 'config', 'team:bob', 'team:bob',"
                         " ?, 10, 'h', ?, 'fyi')", (f"01J00000000000000000000AA{i}", f"legacy note number{i}", 1000 + i))
    assert not old.conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'message_fts'").fetchone()
    old.close()
    app = make_app()
    try:
        found = search_messages(app, BOB, "legacy")
        assert ids(found) == [f"01J00000000000000000000AA{i}" for i in (2, 1, 0)]
        assert ids(search_messages(app, BOB, "number1")) == ["01J00000000000000000000AA1"]
    finally:
        app.close()


# -- visibility, snippets, filters, pages -------------------------------------------------------


def test_a_caller_sees_only_what_it_sent_or_received(app: App) -> None:
    ab = send(app, ALICE, "team:bob", "shared secret plan")
    bc = send(app, BOB, "team:carol", "secret plan for carol")
    assert set(ids(search_messages(app, ALICE, "secret"))) == {ab}
    assert set(ids(search_messages(app, BOB, "secret"))) == {ab, bc}
    assert set(ids(search_messages(app, CAROL, "secret"))) == {bc}
    assert ids(search_messages(app, Caller("team:eve", "config", "team"), "secret")) == []
    with pytest.raises(AgentLinkError) as caught:
        search_messages(app, Caller(), "secret")
    assert caught.value.code == "no_current_session"
    assert search_messages(app, ALICE, "secret")["scope"] == "caller"


def test_inspect_all_sees_everything(isolated_env: Path) -> None:
    app = make_app(AGENT_LINK_INSPECT_ALL="1")
    try:
        a = send(app, ALICE, "team:bob", "alpha words")
        b = send(app, BOB, "team:carol", "alpha words again")
        found = search_messages(app, Caller("team:eve", "config", "team"), "alpha")
        assert found["scope"] == "all" and set(ids(found)) == {a, b}
        assert set(ids(search_messages(app, Caller(), "alpha"))) == {a, b}
    finally:
        app.close()


def test_snippets_are_escaped_and_mark_hits(app: App) -> None:
    send(app, ALICE, "team:bob", 'look: <script>alert("x")</script> \u202e reversed & done')
    result = search_messages(app, BOB, "alert")["results"][0]
    snippet = result["snippet"]
    assert "<script>" not in snippet and "\u202e" not in snippet
    assert "&lt;script&gt;<hit>alert</hit>" in snippet
    assert snippet.replace("<hit>", "").replace("</hit>", "").count("<") == 0
    assert "body" not in result and "pieces" not in result


def test_filters_status_time_and_pages(app: App) -> None:
    first = send(app, ALICE, "team:bob", "report one", anticipation="reply")
    second = send(app, ALICE, "team:bob", "report two", anticipation="reply")
    third = send(app, BOB, "team:alice", "report three")
    asyncio.run(app.reply(caller=BOB, message_id=first, message="report answered"))
    assert ids(search_messages(app, BOB, "report", status="replied")) == [first]
    assert ids(search_messages(app, BOB, "report", status="pending")) == [second]
    assert third in ids(search_messages(app, BOB, "report", from_address="team:bob"))
    assert first not in ids(search_messages(app, BOB, "report", from_address="team:bob"))
    assert set(ids(search_messages(app, BOB, "report", to_address="team:bob"))) == {first, second}
    assert ids(search_messages(app, BOB, "report", since="2999-01-01T00:00:00Z")) == []
    assert len(ids(search_messages(app, BOB, "report", until="2999-01-01T00:00:00Z"))) == 4
    page1 = search_messages(app, BOB, "report", limit=3)
    assert len(page1["results"]) == 3 and page1["nextCursor"]
    page2 = search_messages(app, BOB, "report", limit=3, cursor=page1["nextCursor"])
    assert page2["nextCursor"] is None
    assert len(set(ids(page1)) | set(ids(page2))) == 4
    with pytest.raises(AgentLinkError) as caught:
        search_messages(app, BOB, "report", cursor="; DROP TABLE messages")
    assert caught.value.details["errors"][0]["path"] == "cursor"
    with pytest.raises(AgentLinkError) as caught:
        search_messages(app, BOB, "report", since="yesterday")
    assert caught.value.details["errors"][0]["path"] == "since"


def test_session_titles_find_the_mail_of_those_sessions(app: App) -> None:
    mid = send(app, ALICE, "team:bob", "nothing about the title here")
    send(app, ALICE, "team:carol", "nor here")
    assert note_session_titles(app.store.conn, [("team:bob", "Payment refactor"), ("team:zed", None)]) == 1
    assert note_session_titles(app.store.conn, [("team:bob", "Payment refactor")]) == 0
    assert ids(search_messages(app, ALICE, "payment")) == [mid]
    note_session_titles(app.store.conn, [("team:bob", "Docs cleanup")])
    assert ids(search_messages(app, ALICE, "payment")) == []
    assert ids(search_messages(app, ALICE, "docs AND cleanup")) == [mid]


# -- the MCP tools through a real client --------------------------------------------------------


@pytest.mark.anyio
async def test_search_tool_over_mcp(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through alice's real server; what another agent and a caller with no address get, in
    this process."""
    env = ONLY_SEARCH
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    async with agent_link_mcp({**env, "AGENT_LINK_ADDRESS": "team:alice"}) as alice:
        tools = await alice.tools()
        assert tools["search_agent_link_messages"].output_schema["properties"]["ok"] == {"type": "boolean"}
        assert tools["search_agent_link_messages"].annotations.read_only_hint is True
        assert tools["search_agent_link_messages"].input_schema["required"] == ["query"]
        sent = await alice.call("message_agent", {"to": "team:bob", "message": "deploy <b>staging</b> now", "anticipation": "reply"})
        mid = sent["messageId"]
        found = await alice.call("search_agent_link_messages", {"query": "staging", "limit": 5})
        assert found["ok"] and [r["id"] for r in found["results"]] == [mid]
        assert "&lt;b&gt;<hit>staging</hit>&lt;/b&gt;" in found["results"][0]["snippet"]
        with app_as(monkeypatch, "team:carol") as carol:
            assert (await call_tool(carol, "search_agent_link_messages", query="staging"))["results"] == []
        # every error the tool can return
        bad = await alice.call("search_agent_link_messages", {"query": '"open'})
        assert bad["error"]["code"] == "invalid_arguments" and "quote" in bad["error"]["message"]
        assert (await alice.call("search_agent_link_messages", {"query": "x", "cursor": "zzz"}))["error"]["code"] == "invalid_arguments"
        assert (await alice.call("search_agent_link_messages", {"query": "x", "limit": 101}))["error"]["code"] == "invalid_arguments"
        assert (await alice.call("search_agent_link_messages", {"query": "x", "status": "lost"}))["error"]["code"] == "invalid_arguments"
        monkeypatch.delenv("AGENT_LINK_ADDRESS")
        nobody = App.create()
        try:
            assert (await call_tool(nobody, "search_agent_link_messages", query="x"))["error"]["code"] == "no_current_session"
        finally:
            await nobody.aclose()


# -- the CLI -------------------------------------------------------------------------------------


def test_cli_search(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app()
    root = send(app, ALICE, "team:bob", "ship the <release> today", anticipation="reply")
    app.close()
    runner = CliRunner()

    def invoke(args: list[str]) -> Any:  # as the address --from names (a script of that agent)
        return runner.invoke(build_cli(), args, env=named_address_env(args))

    out = invoke(["search", "release", "--from", "team:bob", "--json"])
    assert out.exit_code == 0, out.output
    assert [r["id"] for r in json.loads(out.output)["results"]] == [root]
    table = invoke(["search", "release", "--from", "team:bob"])
    # people read the words, scripts the escaped snippet with its hits marked
    assert root in table.output and "ship the <release> today" in table.output and "<hit>" not in table.output
    # delivery and the answer's state each in their own column (STATUS showed one or the other)
    header, row = table.output.splitlines()[:2]
    assert header.split()[4:6] == ["DELIVERY", "STATUS"] and row.split()[4:6] == ["queued", "pending"], table.output
    assert json.loads(out.output)["results"][0]["snippet"] == "ship the &lt;<hit>release</hit>&gt; today"
    assert "pieces" not in json.loads(out.output)["results"][0]
    bad = invoke(["search", "(release", "--from", "team:bob"])
    assert bad.exit_code == 2 and "parenthesis" in bad.output and "fts5" not in bad.output
    assert invoke(["search", "release", "--from", " "]).exit_code == 2
    denied = invoke(["search", "release", "--status", "lost", "--from", "team:bob"])
    assert denied.exit_code == 2 and "lost" in denied.output
    since = invoke(["search", "x", "--since", "yesterday", "--from", "team:bob"])
    assert since.exit_code != 0 and "Traceback" not in since.output
    # --from on a command that shows mail states the rule it is held to, as the core's do
    help_text = " ".join(invoke(["search", "--help"]).output.split())
    assert "Read as this address: only inside that address's own session" in help_text
    assert "(unverified)" not in help_text


# -- titles from listings, a page's cost ---------------------------------------------------------


def test_listed_titles_reach_the_index_through_the_hook(app: App) -> None:
    mid = send(app, ALICE, "team:bob", "nothing about the title here")
    app.hooks.call("agent_link_sessions_listed", sessions=[{"address": "team:bob", "title": "Quarterly migration"}])
    assert ids(search_messages(app, ALICE, "quarterly")) == [mid]
    assert app.hooks.boundary.report() == []


def test_without_the_plugin_no_titles_are_known_and_nothing_fails(isolated_env: Path) -> None:
    from agent_link_search.index import session_titles

    bare = App.create({**os.environ, "AGENT_LINK_LOAD_PLUGINS": ""})
    try:
        assert session_titles(bare.store.conn, ["team:bob"]) == {}
        with pytest.raises(AgentLinkError) as caught:  # e.g. the web page's search box where the plugin is off
            search_messages(bare, ALICE, "anything")
        assert caught.value.code == "unsupported" and caught.value.details == {"capability": "search"}
    finally:
        bare.close()


def _statements(app: App, fn: Any) -> int:
    """SQL statements agent-link runs (not those SQLite runs inside a virtual table: ``-- ...``)."""
    seen: list[str] = []
    app.store.conn.set_trace_callback(seen.append)
    try:
        fn()
    finally:
        app.store.conn.set_trace_callback(None)
    return sum(not sql.startswith("--") for sql in seen)


def test_a_page_runs_as_many_statements_for_many_messages_as_for_few(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counts = []
    for n, tag in ((3, "few"), (24, "batch")):
        monkeypatch.setenv("AGENT_LINK_STATE_DIR", str(isolated_env / tag))
        app = make_app()
        try:
            for i in range(n):
                mid = send(app, BOB if i % 4 == 3 else ALICE, "team:alice" if i % 4 == 3 else "team:bob", f"{tag} {i}",
                           anticipation=("reply", "action", "fyi")[i % 3])
                if i % 3 == 0 and i % 4 != 3:  # some answered, so a status is computed from a resolution
                    asyncio.run(app.reply(caller=BOB, message_id=mid, message="answered"))
            search_messages(app, ALICE, "batch OR few", limit=100)  # the first call may prepare what later ones reuse
            counts.append(_statements(app, functools.partial(search_messages, app, ALICE, "batch OR few", limit=100)))
        finally:
            app.close()
    assert counts[0] == counts[1], counts
