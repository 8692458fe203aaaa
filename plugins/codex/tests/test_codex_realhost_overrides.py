"""Turn overrides reaching a REAL Codex thread (the pinned Codex CLI app-server, stub
Responses API): an allowed change travels on ``turn/start`` and shows in the model request the
stub records (``model``, ``reasoning.effort``); a refused one stores nothing and sends nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from agent_link_codex import tools as codex_tools
from agent_link_core import hookimpl
from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError
from agent_link_core.model import Caller
from agent_link_core.tools.registry import ToolCall
from agent_link_testing.codex_host import CodexAppServer
from agent_link_testing.responses_stub import ResponsesStub

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(90)]

ALICE = Caller("codex:01a22a93-0000-7000-8000-00000000a11c", "runtime_context", "codex")
BOB = Caller("codex:01a22a93-0000-7000-8000-000000000b0b", "runtime_context", "codex")


class AllowModelFor:
    """A policy plugin letting one sender switch models (and, like the roles plugin, the
    launcher change effort: ``context.launchedBy``)."""

    def __init__(self, sender: str) -> None:
        self.sender = sender

    @hookimpl
    def agent_link_check_override(self, target: str, sender: Caller, setting: str, value: str, context: dict[str, Any]) -> dict[str, Any]:
        if setting == "effort" and context.get("launchedBy") == sender.address:
            return {"allowed": True, "grantedBy": {"rule": "launcher"}}
        if setting == "model" and sender.address == self.sender:
            return {"allowed": True, "grantedBy": {"rule": "policy", "policyKey": target, "entry": self.sender}}
        return {"allowed": False, "reason": {"model": "model_switch_requires_fork_or_opt_in", "effort": "effort_not_permitted",
                                             "cwd": "cwd_change_not_permitted"}[setting], "message": "not for you"}


@pytest.fixture
async def app(host: CodexAppServer, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[App]:
    monkeypatch.setenv("AGENT_LINK_CODEX_SOCK", str(host.socket_path))
    monkeypatch.setenv("CODEX_HOME", str(host.codex_home))
    monkeypatch.setenv("AGENT_LINK_CODEX_AUTOSTART", "0")
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "claude roles receipts")
    application = App.create(extra_plugins=(AllowModelFor(BOB.address),))
    try:
        yield application
    finally:
        await application.aclose()


def count(app: App) -> int:
    return app.store.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]


async def test_allowed_overrides_reach_the_model_request_and_refused_ones_store_nothing(app: App, stub: ResponsesStub) -> None:
    launched = await codex_tools.launch_codex_thread(app, {"message": "first task"}, ToolCall(meta={}, caller=ALICE))
    tid = launched["threadId"]
    assert launched["delivery"] == "delivered"
    first = stub.wait_for(lambda r: r.thread_id == tid and r.contains("first task"), 30)
    assert first.body.get("model") == "mock-model"
    await codex_tools.wait_for_codex_thread(app, {"threadId": tid, "timeoutMs": 30_000}, ToolCall(meta={}, caller=ALICE))

    # the launcher changes effort: allowed (launcher rule), carried by turn/start to the model request
    out = await codex_tools.message_codex_thread(app, {"threadId": tid, "message": "think harder", "effort": "high"},
                                                 ToolCall(meta={}, caller=ALICE))
    assert out["delivery"] == "delivered", out
    assert [(s["setting"], s["current"], s["grantedBy"]) for s in out["switches"]] == [("effort", "high", "launcher")]
    request = stub.wait_for(lambda r: r.thread_id == tid and r.contains("think harder"), 30)
    assert (request.body.get("reasoning") or {}).get("effort") == "high", request.body.get("reasoning")
    await codex_tools.wait_for_codex_thread(app, {"threadId": tid, "timeoutMs": 30_000}, ToolCall(meta={}, caller=ALICE))

    # refused: the launcher may not switch models, nothing stored and nothing sent
    before, sent = count(app), len(stub.responses_requests())
    with pytest.raises(AgentLinkError) as info:
        await codex_tools.message_codex_thread(app, {"threadId": tid, "message": "use another model", "model": "mock-model-2"},
                                               ToolCall(meta={}, caller=ALICE))
    assert info.value.code == "permission_denied" and info.value.details["reason"] == "model_switch_requires_fork_or_opt_in"
    assert count(app) == before and len(stub.responses_requests()) == sent and not stub.saw_text("use another model")

    # the policy lets BOB switch the model: the next model request uses it
    out = await codex_tools.message_codex_thread(app, {"threadId": tid, "message": "switch now", "model": "mock-model-2"},
                                                 ToolCall(meta={}, caller=BOB))
    assert out["delivery"] == "delivered", out
    assert out["switches"][0]["setting"] == "model" and out["switches"][0]["previous"] == "mock-model"
    request = stub.wait_for(lambda r: r.thread_id == tid and r.contains("switch now"), 30)
    assert request.body.get("model") == "mock-model-2"


async def test_a_granted_switch_returns_its_receipt(host: CodexAppServer, stub: ResponsesStub, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the receipts plugin: the send that switched a real thread's model returns the
    receipt written for the switch (switchReceipts), the same one list_agent_link_receipts shows."""
    monkeypatch.setenv("AGENT_LINK_CODEX_SOCK", str(host.socket_path))
    monkeypatch.setenv("CODEX_HOME", str(host.codex_home))
    monkeypatch.setenv("AGENT_LINK_CODEX_AUTOSTART", "0")
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "claude roles")
    app = App.create(extra_plugins=(AllowModelFor(BOB.address),))
    try:
        launched = await codex_tools.launch_codex_thread(app, {"message": "first task"}, ToolCall(meta={}, caller=ALICE))
        tid = launched["threadId"]
        stub.wait_for(lambda r: r.thread_id == tid and r.contains("first task"), 30)
        await codex_tools.wait_for_codex_thread(app, {"threadId": tid, "timeoutMs": 30_000}, ToolCall(meta={}, caller=ALICE))
        out = await codex_tools.message_codex_thread(app, {"threadId": tid, "message": "switch now", "model": "mock-model-2",
                                                           "receipt": {"purpose": "switch check"}}, ToolCall(meta={}, caller=BOB))
        assert out["delivery"] == "delivered", out
        request = stub.wait_for(lambda r: r.thread_id == tid and r.contains("switch now"), 30)
        assert request.body.get("model") == "mock-model-2"
        [slot] = out["switchReceipts"]
        assert (slot["action"], slot["setting"], slot["record"], slot["recorded"]) == ("model_switch", "model", True, True)
        listed = await app.hooks.tools()["list_agent_link_receipts"].handler(app, {"action": "model_switch"}, ToolCall(meta={}, caller=BOB))
        [receipt] = listed["data"]
        assert receipt["id"] == slot["id"] and receipt["messageId"] == out["messageId"] and receipt["purpose"] == "switch check"
        assert (receipt["details"]["previous"], receipt["details"]["current"]) == ("mock-model", "mock-model-2")
        assert out["receipt"]["id"] != slot["id"]  # the message's own receipt is another one
    finally:
        await app.aclose()
