"""A retried MCP send is stored once: every core send tool takes the CLI's idempotency key
(``messageId`` on message_agent, ``replyMessageId`` on reply_agent_link_message). The same key
with the same content returns the first message marked ``duplicate``; other content under it is
refused naming what differs. (Through a real MCP client session: tests/test_mcp_tools.py.)"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from agent_link_core.app import App
from agent_link_core.mailbox import new_message_id, ulid_of_uuid
from agent_link_testing.tool_app import app_as, call_tool, stored_count

pytestmark = pytest.mark.anyio


@pytest.fixture
def app(monkeypatch: pytest.MonkeyPatch) -> Iterator[App]:
    with app_as(monkeypatch, "team:alice") as application:
        yield application


def test_every_core_send_tool_declares_its_key(app: App) -> None:
    tools = app.hooks.tools()
    key = tools["message_agent"].input_schema["properties"]["messageId"]
    assert key["type"] == "string" and "duplicate" in key["description"] and "idempotency" in key["description"]
    assert tools["reply_agent_link_message"].input_schema["properties"]["replyMessageId"]["pattern"] == key["pattern"]
    assert "duplicate" in tools["reply_agent_link_message"].output_fields


async def test_a_retried_message_agent_is_stored_once(app: App) -> None:
    mid = new_message_id()
    first = await call_tool(app, "message_agent", to="team:bob", message="deploy?", anticipation="reply", messageId=mid)
    assert first["ok"] and first["messageId"] == mid and first["duplicate"] is False
    again = await call_tool(app, "message_agent", to="team:bob", message="deploy?", anticipation="reply", messageId=mid.lower())
    assert again["ok"] and again["messageId"] == mid and again["duplicate"] is True
    assert stored_count(app) == 1


async def test_a_uuid_key_maps_to_one_message(app: App) -> None:
    key = str(uuid.uuid4())
    first = await call_tool(app, "message_agent", to="team:bob", message="hi", messageId=key)
    again = await call_tool(app, "message_agent", to="team:bob", message="hi", messageId=key.upper())
    assert first["messageId"] == again["messageId"] == ulid_of_uuid(key) and again["duplicate"] is True
    assert stored_count(app) == 1


async def test_other_content_under_a_used_key_is_refused_naming_what_differs(app: App) -> None:
    mid = new_message_id()
    assert (await call_tool(app, "message_agent", to="team:bob", message="one", messageId=mid))["ok"]
    out = await call_tool(app, "message_agent", to="team:bob", message="two", anticipation="action", messageId=mid)
    assert out["error"]["code"] == "invalid_arguments"
    assert out["error"]["details"]["differs"] == ["message", "anticipation"]
    assert out["error"]["details"]["errors"][0] == {"path": "messageId", "rule": "idempotency",
                                                     "expected": "the same content as the first send with this id (a new message needs a new id)"}
    assert "its text, anticipation differ" in out["error"]["message"]  # the fields in words, their keys in details
    out = await call_tool(app, "message_agent", to="team:carol", message="one", messageId=mid)
    assert out["error"]["details"]["differs"] == ["to"] and "its recipient differs" in out["error"]["message"]
    out = await call_tool(app, "message_agent", to="team:bob", message="x", messageId="not-an-id")
    assert out["error"]["details"]["errors"][0]["path"] == "messageId"
    assert stored_count(app) == 1


@pytest.mark.installed_plugins("waits")
async def test_wait_for_reply_uses_the_given_key(app: App) -> None:
    mid = new_message_id()
    out = await call_tool(app, "message_agent", to="team:bob", message="q", waitForReply=True, timeoutMs=0, messageId=mid)
    assert out["ok"] and out["messageId"] == mid and out["wait"]["outcome"] == "timeout"
    again = await call_tool(app, "message_agent", to="team:bob", message="q", waitForReply=True, timeoutMs=0, messageId=mid)
    assert again["duplicate"] is True and stored_count(app) == 1


async def test_a_retried_reply_returns_the_first_answer(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = await call_tool(app, "message_agent", to="team:bob", message="q", anticipation="reply")
    with app_as(monkeypatch, "team:bob") as bob:
        rid = new_message_id()
        first = await call_tool(bob, "reply_agent_link_message", messageId=asked["messageId"], message="yes", replyMessageId=rid)
        assert first["ok"] and first["messageId"] == rid and first["duplicate"] is False
        again = await call_tool(bob, "reply_agent_link_message", messageId=asked["messageId"], message="yes", replyMessageId=rid)
        assert again["ok"] and again["duplicate"] is True and again["messageId"] == rid
        assert again["resolution"] == first["resolution"] and again["status"] == "replied"
        changed = await call_tool(bob, "reply_agent_link_message", messageId=asked["messageId"], message="no", replyMessageId=rid)
        assert changed["error"]["code"] == "invalid_arguments" and changed["error"]["details"]["differs"] == ["message"]
        declined = await call_tool(bob, "reply_agent_link_message", messageId=asked["messageId"], resolution="decline",
                              message="yes", replyMessageId=rid)
        assert declined["error"]["details"]["differs"] == ["resolution"]
        # without the key a second resolution is still already_resolved
        out = await call_tool(bob, "reply_agent_link_message", messageId=asked["messageId"], message="yes")
        assert out["error"]["code"] == "already_resolved"
        # a key used for a message elsewhere is not an answer to this one
        other = await call_tool(app, "message_agent", to="team:bob", message="q2", anticipation="reply")
        out = await call_tool(bob, "reply_agent_link_message", messageId=other["messageId"], message="yes", replyMessageId=rid)
        assert out["error"]["details"]["differs"] == ["replyToMessageId"]
        assert bob.mailbox.state(bob.mailbox.stored(other["messageId"])).resolution is None
        assert stored_count(bob) == 3


async def test_a_retried_done_without_a_note_is_the_first_resolution(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = await call_tool(app, "message_agent", to="team:bob", message="do it", anticipation="action")
    with app_as(monkeypatch, "team:bob") as bob:
        rid = new_message_id()
        first = await call_tool(bob, "reply_agent_link_message", messageId=asked["messageId"], resolution="done", replyMessageId=rid)
        again = await call_tool(bob, "reply_agent_link_message", messageId=asked["messageId"], resolution="done", replyMessageId=rid)
        assert first["ok"] and again["ok"] and again["duplicate"] is True and again["messageId"] is None
        out = await call_tool(bob, "reply_agent_link_message", messageId=asked["messageId"], resolution="decline", message="no",
                         replyMessageId=rid)
        assert out["error"]["code"] == "already_resolved"
