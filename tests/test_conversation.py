"""Conversations and the visibility rule they read through: the chain of a message, the
``get_agent_link_conversation`` tool through a real client (each of its errors), and
``agent-link show --thread``. (Full-text search is the search plugin's: plugins/search.)"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_link_testing.cli_identity import named_address_env
from agent_link_testing.mcp_client import agent_link_mcp
from agent_link_testing.tool_app import app_as, call_tool
from click.testing import CliRunner

from agent_link_core.app import App
from agent_link_core.cli import build_cli
from agent_link_core.errors import AgentLinkError
from agent_link_core.mailbox import Visibility
from agent_link_core.model import Caller

ALICE = Caller("team:alice", "config", "team")
BOB = Caller("team:bob", "config", "team")
CAROL = Caller("team:carol", "config", "team")


@pytest.fixture
def app(isolated_env: Path) -> Iterator[App]:
    a = App.create(dict(os.environ))
    yield a
    a.close()


def send(app: App, sender: Caller, to: str, body: str, **kw: Any) -> str:
    return str(asyncio.run(app.send(caller=sender, to=to, body=body, **kw)).message["id"])


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


@pytest.mark.anyio
async def test_conversation_tool_over_mcp(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with agent_link_mcp({"AGENT_LINK_ADDRESS": "team:alice"}) as alice:
        tools = await alice.tools()
        assert tools["get_agent_link_conversation"].output_schema["properties"]["ok"] == {"type": "boolean"}
        assert tools["get_agent_link_conversation"].annotations.read_only_hint is True
        sent = await alice.call("message_agent", {"to": "team:bob", "message": "deploy <b>staging</b> now", "anticipation": "reply"})
        mid = sent["messageId"]
        conv = await alice.call("get_agent_link_conversation", {"messageId": mid})
        assert conv["ok"] and conv["messages"][0]["envelope"].count("&lt;b&gt;staging") == 1
        # every error the tool can return (another agent's: in this process)
        with app_as(monkeypatch, "team:carol") as carol:
            assert (await call_tool(carol, "get_agent_link_conversation", messageId=mid))["error"]["code"] == "permission_denied"
        missing = await alice.call("get_agent_link_conversation", {"messageId": "01J0000000000000000000ZZZZ"})
        assert missing["error"]["code"] == "not_found"
        assert (await alice.call("get_agent_link_conversation", {"messageId": "nope"}))["error"]["code"] == "invalid_arguments"


def test_cli_show_thread(isolated_env: Path) -> None:
    app = App.create(dict(os.environ))
    root = send(app, ALICE, "team:bob", "ship the <release> today", anticipation="reply")
    reply = asyncio.run(app.reply(caller=BOB, message_id=root, message="shipped"))["messageId"]
    app.close()
    runner = CliRunner()

    def invoke(args: list[str]) -> Any:  # as the address --from names (a script of that agent)
        return runner.invoke(build_cli(), args, env=named_address_env(args))

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
