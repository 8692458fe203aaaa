"""Every failed tool result carries a ``hint``: an error raised without one of its own gets its
code's default (:data:`agent_link_core.errors.DEFAULT_HINTS`)."""

from __future__ import annotations

import pytest

from agent_link_core.app import App
from agent_link_core.errors import DEFAULT_HINTS, ERROR_CODES, UNAVAILABLE_HINT, AgentLinkError
from agent_link_core.model import Caller
from agent_link_testing.mcp_client import agent_link_mcp


def test_every_code_has_a_default_hint() -> None:
    assert set(DEFAULT_HINTS) == set(ERROR_CODES)
    assert all(hint.strip().endswith(".") for hint in DEFAULT_HINTS.values())


def test_an_error_without_a_hint_gets_its_codes_and_its_own_hint_wins() -> None:
    assert AgentLinkError("archived", "x is archived.").to_dict()["hint"] == DEFAULT_HINTS["archived"]
    assert AgentLinkError("somehost_unavailable", "down").to_dict()["hint"] == UNAVAILABLE_HINT
    assert AgentLinkError("archived", "x", hint="Do this.").to_dict()["hint"] == "Do this."
    assert AgentLinkError("archived", "x").hint is None  # the CLI's one-line errors stay as they were


@pytest.mark.anyio
async def test_a_real_mcp_session_gets_the_hint() -> None:
    app = App.create()  # the mail, stored in this process
    try:
        sent = await app.send(caller=Caller("test:alice", "config", "test"), to="test:bob", body="for bob", anticipation="reply")
    finally:
        await app.aclose()
    async with agent_link_mcp({"AGENT_LINK_ADDRESS": "test:carol"}) as carol:
        # raised without a hint of its own (agent_link_core.reading: a page of someone else's message)
        failed = await carol.call("read_agent_link_inbox", {"messageId": sent.message["id"]})
        assert failed["ok"] is False and failed["error"]["code"] == "wrong_recipient"
        assert failed["error"]["hint"] == DEFAULT_HINTS["wrong_recipient"]
