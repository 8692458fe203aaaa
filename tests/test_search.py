"""Search over the mail (FTS5) and conversations: the index, the query language, the
visibility rule, snippets, the MCP tools through a real client, and the CLI."""

from __future__ import annotations

import asyncio
import importlib.metadata
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
from agent_link_core.mailbox import Visibility
from agent_link_core.model import Caller
from agent_link_core.search import fts_query, note_session_titles
from agent_link_core.store import CORE_MIGRATIONS, Store
from agent_link_testing.cli_identity import named_address_env

ALL_PLUGINS = " ".join(sorted(ep.name for ep in importlib.metadata.entry_points(group="agent_link")))
ALICE = Caller("team:alice", "config", "team")
BOB = Caller("team:bob", "config", "team")
CAROL = Caller("team:carol", "config", "team")
SQL_WORDS = ("fts5", "syntax error", "no such column", "sqlite", "MATCH", "unterminated")


def make_app(**extra: str) -> App:
    return App.create({**os.environ, "AGENT_LINK_DISABLE_PLUGINS": ALL_PLUGINS, **extra})


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
        app.search(ALICE, query)
    error = caught.value.to_dict()
    assert error["code"] == "invalid_arguments"
    assert error["details"]["reason"] == reason
    assert error["details"]["errors"][0]["path"] == "query"
    assert not any(word.lower() in json.dumps(error).lower() for word in SQL_WORDS), error


def test_punctuation_that_breaks_raw_fts5_just_searches(app: App) -> None:
    mid = send(app, ALICE, "team:bob", "The e-mail to codex:0199 isn't sent; c++ build & <tags>")
    for query in ("e-mail", "codex:0199", "isn't", "c++ build", "<tags>", "e-mail*"):
        assert ids(app.search(BOB, query)) == [mid], query
    # a NUL would end FTS5's reading of the expression inside a quoted word: it separates words
    for query in ("build\x00tags", '"c++\x00build"', "\x00sent"):
        assert ids(app.search(BOB, query)) == [mid], repr(query)


# -- the index -------------------------------------------------------------------------------


def test_index_follows_inserts_and_handover_in_the_same_transaction(app: App) -> None:
    mid = send(app, ALICE, "role-less:x", "please rotate the signing keys")
    assert ids(app.search(ALICE, "signing keys")) == [mid]
    assert app.mailbox.reassign(mid, "team:dave", "test")
    # the index moved with the row: the new holder finds it by its own address, the old one no longer
    assert ids(app.search(Caller("team:dave", "config", "team"), "team:dave")) == [mid]
    assert ids(app.search(Caller("role-less:x", "config", "role-less"), "rotate")) == [mid]  # still to_addr
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
        found = app.search(BOB, "legacy")
        assert ids(found) == [f"01J00000000000000000000AA{i}" for i in (2, 1, 0)]
        assert ids(app.search(BOB, "number1")) == ["01J00000000000000000000AA1"]
    finally:
        app.close()


# -- visibility, snippets, filters, pages -------------------------------------------------------


def test_a_caller_sees_only_what_it_sent_or_received(app: App) -> None:
    ab = send(app, ALICE, "team:bob", "shared secret plan")
    bc = send(app, BOB, "team:carol", "secret plan for carol")
    assert set(ids(app.search(ALICE, "secret"))) == {ab}
    assert set(ids(app.search(BOB, "secret"))) == {ab, bc}
    assert set(ids(app.search(CAROL, "secret"))) == {bc}
    assert ids(app.search(Caller("team:eve", "config", "team"), "secret")) == []
    with pytest.raises(AgentLinkError) as caught:
        app.search(Caller(), "secret")
    assert caught.value.code == "no_current_session"
    assert app.search(ALICE, "secret")["scope"] == "caller"


def test_inspect_all_sees_everything(isolated_env: Path) -> None:
    app = make_app(AGENT_LINK_INSPECT_ALL="1")
    try:
        a = send(app, ALICE, "team:bob", "alpha words")
        b = send(app, BOB, "team:carol", "alpha words again")
        found = app.search(Caller("team:eve", "config", "team"), "alpha")
        assert found["scope"] == "all" and set(ids(found)) == {a, b}
        assert set(ids(app.search(Caller(), "alpha"))) == {a, b}
    finally:
        app.close()


def test_visible_to_is_one_rule_for_sql_and_rows(app: App) -> None:
    send(app, ALICE, "team:bob", "one")
    send(app, BOB, "team:carol", "two")
    rows = app.store.conn.execute("SELECT * FROM messages").fetchall()
    for vis in (app.mailbox.visible_to("team:alice"), app.mailbox.visible_to("team:carol"), app.mailbox.visible_to(None),
                app.mailbox.visible_to("not an address"), Visibility.everything_for("user:me", "person")):
        where, params = vis.sql("messages")
        by_sql = {r[0] for r in app.store.conn.execute(f"SELECT id FROM messages WHERE {where}", params)}
        assert by_sql == {r["id"] for r in rows if vis.allows(r)}
    with pytest.raises(AgentLinkError) as caught:
        app.mailbox.visible_to("team:alice", all_mail=True)
    assert caught.value.code == "permission_denied" and caught.value.details["reason"] == "inspect_all_disabled"


def test_snippets_are_escaped_and_mark_hits(app: App) -> None:
    send(app, ALICE, "team:bob", 'look: <script>alert("x")</script> \u202e reversed & done')
    result = app.search(BOB, "alert")["results"][0]
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
    assert ids(app.search(BOB, "report", status="replied")) == [first]
    assert ids(app.search(BOB, "report", status="pending")) == [second]
    assert third in ids(app.search(BOB, "report", from_address="team:bob"))
    assert first not in ids(app.search(BOB, "report", from_address="team:bob"))
    assert set(ids(app.search(BOB, "report", to_address="team:bob"))) == {first, second}
    assert ids(app.search(BOB, "report", since="2999-01-01T00:00:00Z")) == []
    assert len(ids(app.search(BOB, "report", until="2999-01-01T00:00:00Z"))) == 4
    page1 = app.search(BOB, "report", limit=3)
    assert len(page1["results"]) == 3 and page1["nextCursor"]
    page2 = app.search(BOB, "report", limit=3, cursor=page1["nextCursor"])
    assert page2["nextCursor"] is None
    assert len(set(ids(page1)) | set(ids(page2))) == 4
    with pytest.raises(AgentLinkError) as caught:
        app.search(BOB, "report", cursor="; DROP TABLE messages")
    assert caught.value.details["errors"][0]["path"] == "cursor"
    with pytest.raises(AgentLinkError) as caught:
        app.search(BOB, "report", since="yesterday")
    assert caught.value.details["errors"][0]["path"] == "since"


def test_session_titles_find_the_mail_of_those_sessions(app: App) -> None:
    mid = send(app, ALICE, "team:bob", "nothing about the title here")
    send(app, ALICE, "team:carol", "nor here")
    assert note_session_titles(app.store.conn, [("team:bob", "Payment refactor"), ("team:zed", None)]) == 1
    assert note_session_titles(app.store.conn, [("team:bob", "Payment refactor")]) == 0
    assert ids(app.search(ALICE, "payment")) == [mid]
    note_session_titles(app.store.conn, [("team:bob", "Docs cleanup")])
    assert ids(app.search(ALICE, "payment")) == []
    assert ids(app.search(ALICE, "docs AND cleanup")) == [mid]


# -- conversations -----------------------------------------------------------------------------


def test_conversation_is_the_whole_chain_oldest_first(app: App) -> None:
    root = send(app, ALICE, "team:bob", "question?", anticipation="reply")
    answer = asyncio.run(app.reply(caller=BOB, message_id=root, message="answer", anticipation="reply"))["messageId"]
    follow = asyncio.run(app.reply(caller=ALICE, message_id=answer, message="follow-up"))["messageId"]
    aside = send(app, BOB, "team:carol", "by the way", reply_to=follow)
    send(app, ALICE, "team:bob", "another conversation")
    for start in (root, answer, follow):
        conv = app.conversation(ALICE, start)
        assert conv["rootId"] == root
        assert [m["id"] for m in conv["messages"]] == [root, answer, follow]
        assert conv["hiddenCount"] == 1  # bob's aside to carol is not alice's to see
        assert all(m["envelope"].startswith("<agent-link-message") and "body" not in m for m in conv["messages"])
    assert [m["id"] for m in app.conversation(BOB, aside)["messages"]] == [root, answer, follow, aside]
    assert app.conversation(CAROL, aside)["hiddenCount"] == 3
    with pytest.raises(AgentLinkError) as caught:
        app.conversation(CAROL, root)
    assert caught.value.code == "permission_denied"
    with pytest.raises(AgentLinkError) as caught:
        app.conversation(ALICE, "01J0000000000000000000ZZZZ")
    assert caught.value.code == "not_found"


# -- the MCP tools through a real client --------------------------------------------------------


@pytest.mark.anyio
async def test_search_and_conversation_tools_over_mcp(isolated_env: Path) -> None:
    env = {"AGENT_LINK_DISABLE_PLUGINS": ALL_PLUGINS}
    async with agent_link_mcp({**env, "AGENT_LINK_ADDRESS": "team:alice"}) as alice, \
            agent_link_mcp({**env, "AGENT_LINK_ADDRESS": "team:carol"}) as carol, \
            agent_link_mcp(env) as nobody:
        tools = await alice.tools()
        for name in ("search_agent_link_messages", "get_agent_link_conversation"):
            assert tools[name].output_schema["properties"]["ok"] == {"type": "boolean"}
            assert tools[name].annotations.read_only_hint is True
        assert tools["search_agent_link_messages"].input_schema["required"] == ["query"]
        sent = await alice.call("message_agent", {"to": "team:bob", "message": "deploy <b>staging</b> now", "anticipation": "reply"})
        mid = sent["messageId"]
        found = await alice.call("search_agent_link_messages", {"query": "staging", "limit": 5})
        assert found["ok"] and [r["id"] for r in found["results"]] == [mid]
        assert "&lt;b&gt;<hit>staging</hit>&lt;/b&gt;" in found["results"][0]["snippet"]
        assert (await carol.call("search_agent_link_messages", {"query": "staging"}))["results"] == []
        conv = await alice.call("get_agent_link_conversation", {"messageId": mid})
        assert conv["ok"] and conv["messages"][0]["envelope"].count("&lt;b&gt;staging") == 1
        # every error each tool can return
        bad = await alice.call("search_agent_link_messages", {"query": '"open'})
        assert bad["error"]["code"] == "invalid_arguments" and "quote" in bad["error"]["message"]
        assert (await alice.call("search_agent_link_messages", {"query": "x", "cursor": "zzz"}))["error"]["code"] == "invalid_arguments"
        assert (await alice.call("search_agent_link_messages", {"query": "x", "limit": 101}))["error"]["code"] == "invalid_arguments"
        assert (await alice.call("search_agent_link_messages", {"query": "x", "status": "lost"}))["error"]["code"] == "invalid_arguments"
        assert (await nobody.call("search_agent_link_messages", {"query": "x"}))["error"]["code"] == "no_current_session"
        assert (await carol.call("get_agent_link_conversation", {"messageId": mid}))["error"]["code"] == "permission_denied"
        missing = await alice.call("get_agent_link_conversation", {"messageId": "01J0000000000000000000ZZZZ"})
        assert missing["error"]["code"] == "not_found"
        assert (await alice.call("get_agent_link_conversation", {"messageId": "nope"}))["error"]["code"] == "invalid_arguments"


# -- the CLI -------------------------------------------------------------------------------------


def test_cli_search_and_show(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", ALL_PLUGINS)
    app = make_app()
    root = send(app, ALICE, "team:bob", "ship the <release> today", anticipation="reply")
    reply = asyncio.run(app.reply(caller=BOB, message_id=root, message="shipped"))["messageId"]
    app.close()
    runner = CliRunner()

    def invoke(args: list[str]) -> Any:  # as the address --from names (a script of that agent)
        return runner.invoke(build_cli(), args, env=named_address_env(args))

    out = invoke(["search", "release", "--from", "team:bob", "--json"])
    assert out.exit_code == 0, out.output
    assert [r["id"] for r in json.loads(out.output)["results"]] == [root]
    table = invoke(["search", "release", "--from", "team:bob"])
    assert root in table.output and "&lt;<hit>release</hit>&gt;" in table.output
    bad = invoke(["search", "(release", "--from", "team:bob"])
    assert bad.exit_code == 2 and "parenthesis" in bad.output and "fts5" not in bad.output
    shown = invoke(["show", reply, "--thread", "--from", "team:alice"])
    assert shown.exit_code == 0, shown.output
    assert shown.output.index(root) < shown.output.index(reply) and "<agent-link-message" not in shown.output
    assert "  ship the <release> today" in shown.output  # for people: the text itself
    enveloped = invoke(["show", reply, "--thread", "--envelope", "--from", "team:alice"])
    assert "<agent-link-message" in enveloped.output and "&lt;release&gt;" in enveloped.output
    one = invoke(["show", root, "--from", "team:bob", "--json"])
    assert json.loads(one.output)["message"]["id"] == root
    denied = invoke(["show", root, "--from", "team:carol"])
    assert denied.exit_code == 1 and "sender or the recipient" in denied.output
