"""Conversations (agent_link_conversations): the chain of a message, the
``get_agent_link_conversation`` tool through a real client (its schema, each of its errors, a
UUID for the id), and ``agent-link show --thread``. The plugin loads alone (conftest.py)."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_link_conversations.conversation import conversation_of
from agent_link_testing.cli_identity import named_address_env
from agent_link_testing.mcp_client import agent_link_mcp
from agent_link_testing.tool_app import app_as, call_tool
from click.testing import CliRunner

from agent_link_core.app import App
from agent_link_core.cli import build_cli
from agent_link_core.errors import AgentLinkError
from agent_link_core.mailbox import ulid_of_uuid
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


def test_conversation_is_the_whole_chain_oldest_first(app: App) -> None:
    root = send(app, ALICE, "team:bob", "question?", anticipation="reply")
    answer = asyncio.run(app.reply(caller=BOB, message_id=root, message="answer", anticipation="reply"))["messageId"]
    follow = asyncio.run(app.reply(caller=ALICE, message_id=answer, message="follow-up"))["messageId"]
    aside = send(app, BOB, "team:carol", "by the way", reply_to=follow)
    send(app, ALICE, "team:bob", "another conversation")
    for start in (root, answer, follow):
        conv = conversation_of(app, ALICE, start)
        assert conv["rootId"] == root
        assert [m["id"] for m in conv["messages"]] == [root, answer, follow]
        assert conv["hiddenCount"] == 1  # bob's aside to carol is not alice's to see
        assert all(m["envelope"].startswith("<agent-link-message") and "body" not in m for m in conv["messages"])
    assert [m["id"] for m in conversation_of(app, BOB, aside)["messages"]] == [root, answer, follow, aside]
    assert conversation_of(app, CAROL, aside)["hiddenCount"] == 3
    with pytest.raises(AgentLinkError) as caught:
        conversation_of(app, CAROL, root)
    assert caught.value.code == "permission_denied"
    with pytest.raises(AgentLinkError) as caught:
        conversation_of(app, ALICE, "01J0000000000000000000ZZZZ")
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
        bad = await alice.call("get_agent_link_conversation", {"messageId": "nope"})
        assert bad["error"]["code"] == "invalid_arguments"
        assert bad["error"]["details"]["errors"][0]["expected"] == "a message id (a 26-character ULID, or a UUID)"
        unknown = await alice.call("get_agent_link_conversation", {"messageId": mid, "bogus": 1})
        assert unknown["error"]["code"] == "invalid_arguments"
        assert [e["path"] for e in unknown["error"]["details"]["errors"]] == ["bogus"]


@pytest.mark.anyio
async def test_the_tool_is_declared_as_when_the_core_had_it(isolated_env: Path) -> None:
    async with agent_link_mcp({"AGENT_LINK_ADDRESS": "team:alice"}) as alice:
        tool = (await alice.tools())["get_agent_link_conversation"]
    assert tool.title == "agent-link conversation"
    assert tool.description and tool.description.startswith("The whole conversation a message belongs to:")
    assert tool.input_schema["required"] == ["messageId"] and tool.input_schema["additionalProperties"] is False
    assert set(tool.input_schema["properties"]) == {"messageId"}
    out = tool.output_schema
    assert out is not None and out["additionalProperties"] is False
    assert {"messageId", "rootId", "messages", "hiddenCount", "truncated", "ok", "error", "warnings"} <= set(out["properties"])
    ann = tool.annotations
    assert ann is not None and (ann.read_only_hint, ann.idempotent_hint, ann.destructive_hint, ann.open_world_hint) == (
        True, True, False, False)


@pytest.mark.anyio
async def test_a_message_sent_with_a_uuid_is_found_by_it(monkeypatch: pytest.MonkeyPatch) -> None:
    key = str(uuid.uuid4())
    with app_as(monkeypatch, "team:alice") as app:
        sent = await call_tool(app, "message_agent", to="team:bob", message="deploy?", anticipation="reply", messageId=key)
        assert sent["ok"] and sent["messageId"] == ulid_of_uuid(key)
        found = await call_tool(app, "get_agent_link_conversation", messageId=key)
    assert found["ok"] and found["messageId"] == sent["messageId"]


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


def test_show_thread_through_the_console_script(isolated_env: Path) -> None:
    """The fast path does not know --thread: it leaves the command to click, where the plugin added it."""
    from agent_link_testing.cli_runner import run_main

    app = App.create(dict(os.environ))
    root = send(app, ALICE, "team:bob", "question?", anticipation="reply")
    reply = asyncio.run(app.reply(caller=BOB, message_id=root, message="answer"))["messageId"]
    app.close()
    env = {"AGENT_LINK_ADDRESS": "team:alice"}
    shown = run_main("show", reply, "--thread", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    assert [m["id"] for m in json.loads(shown.stdout)["messages"]] == [root, reply]
    assert "message" in json.loads(run_main("show", reply, "--json", env=env).stdout)
    helped = run_main("show", "--help", env=env).stdout
    assert "--thread" in helped and "(--thread: its conversation, oldest first)" in " ".join(helped.split())
