"""Every tool argument naming a stored message takes a UUID as well as a ULID, as the CLI
does: a message sent with a UUID ``messageId`` is found again by that UUID (status,
wait; the conversations plugin's tool: its tests), and a bad id is refused in words, not with a regular expression."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError
from agent_link_core.mailbox import ulid_of_uuid
from agent_link_core.tools.registry import validate_arguments
from agent_link_core.tools.schemas import ULID
from agent_link_testing.tool_app import app_as, call_tool

pytestmark = pytest.mark.anyio


@pytest.fixture
def app(monkeypatch: pytest.MonkeyPatch) -> Iterator[App]:
    with app_as(monkeypatch, "team:alice") as application:
        yield application


def message_id_arguments(app: App) -> list[tuple[str, str]]:
    """``(tool, argument)`` for every top-level argument holding a stored message's id."""
    return [(name, arg) for name, spec in sorted(app.hooks.tools().items())
            for arg, prop in spec.input_schema.get("properties", {}).items() if prop.get("pattern") == ULID["pattern"]]


@pytest.mark.installed_plugins("waits")
def test_every_message_id_argument_maps_a_uuid_to_its_ulid(app: App) -> None:
    found = message_id_arguments(app)
    assert {("wait_for_agent", "replyToMessageId"), ("get_agent_link_message_status", "messageId")} <= set(found)
    key = str(uuid.uuid4())
    for tool, arg in found:
        spec = app.hooks.tools()[tool]
        required = {name: "team:bob" for name in spec.input_schema.get("required", ()) if name != arg}
        try:
            args, _ = validate_arguments(spec, {**required, arg: key})
        except AgentLinkError as exc:  # another required argument of another shape: only ours matters
            assert not [e for e in exc.details["errors"] if e["path"] == arg], (tool, exc.details)
            continue
        assert args[arg] == ulid_of_uuid(key), tool
        assert validate_arguments(spec, {**required, arg: key.replace("-", "").upper()})[0][arg] == ulid_of_uuid(key)


@pytest.mark.installed_plugins("waits")
async def test_a_message_sent_with_a_uuid_is_found_by_it(app: App) -> None:
    key = str(uuid.uuid4())
    sent = await call_tool(app, "message_agent", to="team:bob", message="deploy?", anticipation="reply", messageId=key)
    assert sent["ok"] and sent["messageId"] == ulid_of_uuid(key)
    status = await call_tool(app, "get_agent_link_message_status", messageId=key)
    assert status["ok"] and status["messageId"] == sent["messageId"]
    waited = await call_tool(app, "wait_for_agent", agent="team:bob", replyToMessageId=key, timeoutMs=0)
    assert "error" not in waited or waited["error"]["code"] != "invalid_arguments", waited


@pytest.mark.parametrize("tool,args,words", [
    ("get_agent_link_message_status", {"messageId": "nope"}, "a message id (a 26-character ULID, or a UUID)"),
    ("wait_for_agent", {"agent": "team:bob", "replyToMessageId": "{" + str(uuid.UUID(int=7)) + "}"},
     "a message id (a 26-character ULID, or a UUID)"),
    ("message_agent", {"to": "team:bob", "message": "x", "messageId": "nope"}, "a message id (a 26-character ULID, or a UUID)"),
])
@pytest.mark.installed_plugins("waits")
async def test_a_bad_id_is_refused_in_words(app: App, tool: str, args: dict[str, Any], words: str) -> None:
    out = await call_tool(app, tool, **args)
    assert out["error"]["code"] == "invalid_arguments"
    assert [e["expected"] for e in out["error"]["details"]["errors"]] == [words]
    assert "^" not in str(out["error"])


def test_no_tool_argument_is_explained_by_a_regular_expression(app: App) -> None:
    """Every pattern an argument carries is said in words in its error (the whole kind)."""
    from agent_link_core.tools.registry import _expected

    for name, spec in app.hooks.tools().items():
        for arg, prop in spec.input_schema.get("properties", {}).items():
            if isinstance(prop, dict) and "pattern" in prop:
                assert "^" not in _expected(prop) and "$" not in _expected(prop), (name, arg, _expected(prop))


async def test_a_uuid_through_a_real_mcp_client_session(isolated_env: Any) -> None:
    from agent_link_testing.mcp_client import agent_link_mcp

    key = str(uuid.uuid4())
    async with agent_link_mcp({"AGENT_LINK_ADDRESS": "test:alice"}) as alice:
        sent = await alice.call("message_agent", {"to": "test:bob", "message": "hi", "anticipation": "reply", "messageId": key})
        status = await alice.call("get_agent_link_message_status", {"messageId": key})
        assert status["ok"] and status["messageId"] == sent["messageId"] == ulid_of_uuid(key)
        bad = await alice.call("reply_agent_link_message", {"messageId": "not-an-id"})
        assert bad["error"]["details"]["errors"][0]["expected"] == "a message id (a 26-character ULID, or a UUID)"
