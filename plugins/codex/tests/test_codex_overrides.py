"""Turn overrides on existing Codex threads (docs/behaviour.md §19 "Override policy", §5.3) and
get_codex_thread's receipts, against a scripted app-server.

Each rule of :mod:`agent_link_codex.overrides`: no policy plugin (launcher may change effort,
nothing else), a fake policy plugin's grants and refusals, unchanged values asking nobody,
overrides refused for a running turn, launchers recorded by launch_codex_thread (whose first
message's turn waits for agent-link's MCP server start-up, reported after the thread/start
answer); and ``includeReceipts`` with and without the receipts plugin.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_link_codex import overrides
from agent_link_codex import tools as codex_tools
from agent_link_core import hookimpl
from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError
from agent_link_core.model import Caller
from agent_link_core.tools import core_tools
from agent_link_core.tools.registry import ToolCall, ToolSpec

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

TID = "01a22a93-0000-7000-8000-0000000000ee"
ADDRESS = f"codex:{TID}"
ALICE = Caller("codex:01a22a93-0000-7000-8000-00000000a11c", "runtime_context", "codex")
BOB = Caller("codex:01a22a93-0000-7000-8000-000000000b0b", "runtime_context", "codex")


class FakePolicy:
    """A policy plugin answering ``agent_link_check_override`` from a table of decisions."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.decisions: dict[str, dict[str, Any]] = {}

    @hookimpl
    def agent_link_check_override(self, target: str, sender: Caller, setting: str, value: str, context: dict[str, Any]) -> dict[str, Any]:
        self.calls.append({"target": target, "sender": sender.address, "setting": setting, "value": value, "context": context})
        return self.decisions.get(setting, {"allowed": False, "reason": {"model": "model_switch_requires_fork_or_opt_in",
                                                                           "effort": "effort_not_permitted",
                                                                           "cwd": "cwd_change_not_permitted"}[setting],
                                            "message": "fake policy says no"})


class Thread:
    """The scripted thread: status, model settings, recorded turn/start params."""

    def __init__(self, mini: Any) -> None:
        self.mini = mini
        self.status = "idle"
        self.starts: list[dict[str, Any]] = []
        self.obj = {"id": TID, "status": {"type": "idle"}, "path": "", "cwd": "/w/proj", "model": "gpt-a",
                    "reasoningEffort": "low"}
        mini.handlers.update({"thread/read": self.read, "thread/resume": self.read, "turn/start": self.start,
                              "thread/start": self.thread_start, "thread/items/list": lambda m, p: {"data": []},
                              "thread/name/set": lambda m, p: {}})

    def read(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"thread": {**self.obj, "status": {"type": self.status}}}

    def thread_start(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.mini.report_mcp_startup(TID)
        return {"thread": {**self.obj, "cwd": params.get("cwd", "/w/proj")}, "model": "gpt-a", "reasoningEffort": "low"}

    async def start(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.starts.append(params)
        item = {"type": "userMessage", "id": f"i{len(self.starts)}", "clientId": params.get("clientUserMessageId")}
        asyncio.get_running_loop().call_later(0.01, lambda: asyncio.ensure_future(
            self.mini.notify("item/completed", {"threadId": TID, "turnId": "t", "item": item})))
        return {"turn": {"id": f"t{len(self.starts)}", "status": "inProgress"}}


@pytest.fixture
def make_app(mini: Any, monkeypatch: pytest.MonkeyPatch, isolated_env: Path) -> Callable[..., App]:
    """An App on the scripted app-server; each test closes the Apps it makes."""
    monkeypatch.setenv("AGENT_LINK_CODEX_SOCK", str(mini.path))
    monkeypatch.setenv("AGENT_LINK_CODEX_AUTOSTART", "0")

    def make(*plugins: Any, disabled: str = "claude roles receipts") -> App:
        monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", disabled)
        return App.create(extra_plugins=plugins)

    return make


@pytest.fixture
async def thread(mini: Any) -> Thread:
    return Thread(mini)


async def send(app: App, sender: Caller, **args: Any) -> dict[str, Any]:
    call = ToolCall(meta={}, caller=sender)
    return await codex_tools.message_codex_thread(app, {"threadId": TID, "message": "hi", **args}, call)


async def refused(app: App, sender: Caller, **args: Any) -> AgentLinkError:
    with pytest.raises(AgentLinkError) as info:
        await send(app, sender, **args)
    return info.value


def stored(app: App) -> int:
    return app.store.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]


async def test_without_policy_only_the_launcher_may_change_effort(make_app: Any, thread: Thread) -> None:
    app = make_app()
    try:
        for setting, value, reason in (("model", "gpt-b", "model_switch_requires_fork_or_opt_in"),
                                       ("effort", "high", "effort_not_permitted"),
                                       ("cwd", "/w/proj/sub", "cwd_change_not_permitted")):
            error = await refused(app, ALICE, **{setting: value})
            assert error.code == "permission_denied" and error.details["reason"] == reason
            assert error.details["setting"] == setting and error.details["current"] is not None
        assert stored(app) == 0 and thread.starts == []
        # the launcher may change effort: passed on turn/start, reported as a switch
        app.harnesses["codex"].launches.record(TID, ALICE.address, model="gpt-a", effort="low", cwd="/w/proj")
        out = await send(app, ALICE, effort="high")
        assert out["delivery"] == "delivered"
        assert out["switches"] == [{"setting": "effort", "previous": "low", "current": "high", "grantedBy": "launcher",
                                    "persists": True, "expectedCost": None}]
        assert thread.starts[-1]["effort"] == "high" and "model" not in thread.starts[-1]
        # ... but still not the model, and nobody else the effort
        assert (await refused(app, ALICE, model="gpt-b")).details["reason"] == "model_switch_requires_fork_or_opt_in"
        assert (await refused(app, BOB, effort="xhigh")).details["reason"] == "effort_not_permitted"
        assert stored(app) == 1
    finally:
        await app.aclose()


async def test_switches_carry_their_expected_cost_and_the_version_it_was_measured_on(make_app: Any, thread: Thread,
                                                                                     tmp_path: Path) -> None:
    """A model or effort switch costs about the last request's input tokens (from the thread's
    rollout); the figures were measured on another Codex than the scripted one (0.169.0)."""
    rollout = tmp_path / "rollout.jsonl"
    counts = [{"type": "event_msg", "payload": {"type": "task_started", "turn_id": "t1"}},
              {"type": "event_msg", "payload": {"type": "token_count", "info": {
                  "total_token_usage": {"input_tokens": 9000}, "last_token_usage": {"input_tokens": 4000}}}},
              {"type": "event_msg", "payload": {"type": "token_count", "info": {
                  "total_token_usage": {"input_tokens": 21345}, "last_token_usage": {"input_tokens": 12345}}}}]
    rollout.write_text("".join(json.dumps(c) + "\n" for c in counts))
    thread.obj["path"] = str(rollout)
    policy = FakePolicy()
    policy.decisions["model"] = {"allowed": True, "grantedBy": {"rule": "policy", "policyKey": ADDRESS, "entry": "*"}}
    policy.decisions["effort"] = policy.decisions["model"]
    app = make_app(policy)
    try:
        out = await send(app, BOB, model="gpt-b", effort="high")
        assert [s["expectedCost"] for s in out["switches"]] == [{"uncachedInputTokens": 12345, "basis": "last-turn-input"}] * 2
        [mismatch] = [w for w in out.get("warnings", []) if w["code"] == "override_costs_version_mismatch"]
        assert mismatch["details"] == {"verifiedOn": overrides.OVERRIDE_COSTS_VERIFIED_ON, "codexVersion": "0.169.0"}
        plain = await send(app, BOB)  # no switch: no cost warning
        assert "override_costs_version_mismatch" not in [w["code"] for w in plain.get("warnings", [])]
    finally:
        await app.aclose()


class ForkTool:
    """A plugin registering a tool named fork_codex_thread (as agent-link-forks does)."""

    @hookimpl
    def agent_link_register_tools(self, register: Any) -> None:
        async def handler(app: App, args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
            return {}

        register(ToolSpec("fork_codex_thread", "Fork.", {"type": "object", "properties": {}, "additionalProperties": False}, {}, handler))


async def test_model_refusal_hint_names_the_fork_tool_only_when_one_is_loaded(make_app: Any, thread: Thread) -> None:
    for plugins, named in (((), False), ((ForkTool(),), True)):
        app = make_app(*plugins, disabled="claude roles receipts forks")
        try:
            error = await refused(app, ALICE, model="gpt-b")
            assert error.details["reason"] == "model_switch_requires_fork_or_opt_in"
            assert ("fork_codex_thread" in (error.hint or "")) is named, error.hint
            assert "override policy" in (error.hint or "")
        finally:
            await app.aclose()


async def test_policy_plugin_grants_and_refusals(make_app: Any, thread: Thread) -> None:
    policy = FakePolicy()
    app = make_app(policy)
    try:
        error = await refused(app, BOB, model="gpt-b")
        assert error.details["reason"] == "model_switch_requires_fork_or_opt_in" and error.message == "fake policy says no"
        assert policy.calls[-1] == {"target": ADDRESS, "sender": BOB.address, "setting": "model", "value": "gpt-b",
                                    "context": {"currentCwd": "/w/proj", "launchedBy": None}}
        policy.decisions["cwd"] = {"allowed": False, "reason": "cwd_outside_workspace", "workspace": "/w/proj",
                                   "message": "outside the workspace"}
        error = await refused(app, BOB, cwd="/tmp")
        assert error.details["reason"] == "cwd_outside_workspace" and error.details["workspace"] == "/w/proj"
        assert stored(app) == 0 and thread.starts == []
        policy.decisions["model"] = {"allowed": True, "grantedBy": {"rule": "policy", "policyKey": ADDRESS, "entry": "*"}}
        policy.decisions["cwd"] = {"allowed": True, "grantedBy": {"rule": "policy", "policyKey": ADDRESS, "entry": BOB.address}}
        out = await send(app, BOB, model="gpt-b", cwd="/w/proj/sub")
        assert out["delivery"] == "delivered"
        assert [(s["setting"], s["previous"], s["current"], s["grantedBy"]) for s in out["switches"]] == [
            ("model", "gpt-a", "gpt-b", "policy"), ("cwd", "/w/proj", "/w/proj/sub", "policy")]
        assert out["switches"][0]["policy"] == {"policyKey": ADDRESS, "entry": "*"}
        assert out["switches"][1]["expectedCost"] == {"uncachedInputTokens": 0, "basis": "cwd-cache-neutral"}
        assert thread.starts[-1]["model"] == "gpt-b" and thread.starts[-1]["cwd"] == "/w/proj/sub"
        # the change persists: asking for the same model again is no change and asks nobody
        asked = len(policy.calls)
        again = await send(app, BOB, model="gpt-b")
        assert "switches" not in again and len(policy.calls) == asked
    finally:
        await app.aclose()


async def test_unchanged_values_need_no_permission_and_relative_cwd_is_invalid(make_app: Any, thread: Thread) -> None:
    policy = FakePolicy()
    app = make_app(policy)
    try:
        out = await send(app, BOB, model="gpt-a", effort="low", cwd="/w/proj/")
        assert out["delivery"] == "delivered" and "switches" not in out and policy.calls == []
        error = await refused(app, BOB, cwd="relative/dir")
        assert error.code == "invalid_arguments"
    finally:
        await app.aclose()


async def test_overrides_are_refused_for_a_running_turn(make_app: Any, thread: Thread) -> None:
    policy = FakePolicy()
    policy.decisions["effort"] = {"allowed": True, "grantedBy": {"rule": "policy"}}
    app = make_app(policy)
    try:
        thread.status = "active"
        await app.harnesses["codex"].service.connect(spawn=False)
        await send(app, BOB)  # fills the tracker (a steer without overrides is fine)
        before = stored(app)
        error = await refused(app, BOB, effort="high")
        assert error.code == "active_turn_conflict" and error.details["settings"] == ["effort"]
        assert stored(app) == before
    finally:
        await app.aclose()


async def test_message_agent_takes_overrides_for_codex_and_launch_records_the_launcher(make_app: Any, thread: Thread) -> None:
    app = make_app()
    try:
        call = ToolCall(meta={}, caller=ALICE)
        launched = await codex_tools.launch_codex_thread(app, {"name": "x"}, call)
        assert launched["threadId"] == TID
        row = app.harnesses["codex"].launches.get(TID)
        assert (row["launched_by"], row["model"], row["effort"], row["cwd"]) == (ALICE.address, "gpt-a", "low", "/w/proj")
        out = await core_tools.message_agent(app, {"to": ADDRESS, "message": "m", "effort": "medium"}, call)
        assert out["switches"][0]["grantedBy"] == "launcher" and thread.starts[-1]["effort"] == "medium"
        with pytest.raises(AgentLinkError) as info:
            await core_tools.message_agent(app, {"to": ADDRESS, "message": "m", "effort": "high"}, ToolCall(meta={}, caller=BOB))
        assert info.value.details["reason"] == "effort_not_permitted"
    finally:
        await app.aclose()


async def test_codex_send_options_are_refused_for_another_hosts_session(make_app: Any, thread: Thread) -> None:
    """The plugin adds the Codex send options to message_agent and startAppServer to health
    (agent_link_extend_tools); aimed at a session that is no Codex thread they are refused before
    anything is stored (agent_link_tool_send), also when another plugin takes the send (waitForReply)."""
    from agent_link_core.tools.registry import run_tool

    app = make_app()
    try:
        tools = app.hooks.tools()
        assert {"mode", "model", "cwd", "allowTargetOverride"} <= set(tools["message_agent"].input_schema["properties"])
        assert "startAppServer" in tools["agent_link_health"].input_schema["properties"]
        for args, code in (({"mode": "auto", "model": "gpt-b", "cwd": "/w"}, "unsupported"), ({"mode": "auto", "waitForReply": True}, "invalid_arguments")):
            out = await run_tool(app, tools["message_agent"], {"to": "team:bob", "message": "m", **args}, {})
            assert out["error"]["code"] == code, out
        assert out["error"]["details"]["errors"] == [{"path": "mode", "rule": "unsupported_for_target", "expected": "omit it for this target"}]
        out = await run_tool(app, tools["message_agent"], {"to": "team:bob", "message": "m", "effort": "low", "model": "x"}, {})
        assert out["error"]["details"] == {"capability": "turn_overrides", "arguments": ["model", "effort"]}
        assert stored(app) == 0
    finally:
        await app.aclose()


async def test_a_host_adding_a_codex_option_name_itself_takes_it_for_its_sessions(make_app: Any, thread: Thread) -> None:
    """Another host's plugin adding send options of the Codex names (``mode``, ``model``) gets them for its own
    sessions; the codex plugin still refuses them for a host that adds none (``team``)."""
    from agent_link_core.harness import Delivery, Harness
    from agent_link_core.model import Session
    from agent_link_core.tools.registry import run_tool

    class Other(Harness):
        name = "other"

        def __init__(self) -> None:
            self.options: list[dict[str, Any]] = []

        async def get_session(self, session_id: str) -> Session | None:
            return Session(f"other:{session_id}", "other", session_id)

        async def deliver(self, message: dict[str, Any], envelope: str, options: Any) -> Delivery:
            self.options.append(dict(options))
            return Delivery(delivered=True, via="other")

    class OtherHost:
        harness = Other()

        @hookimpl
        def agent_link_register_harnesses(self, register: Any) -> None:
            register(self.harness)

        @hookimpl
        def agent_link_extend_tools(self) -> dict[str, Any]:
            return {"message_agent": {"input": {"mode": {"type": "string"}, "model": {"type": "string"}}}}

    host = OtherHost()
    app = make_app(("otherhost", host))
    try:
        tools = app.hooks.tools()
        out = await run_tool(app, tools["message_agent"], {"to": "other:o1", "message": "m", "mode": "auto", "model": "m2"}, {})
        assert out.get("ok"), out
        assert host.harness.options == [{"mode": "auto", "model": "m2"}]
        out = await run_tool(app, tools["message_agent"], {"to": "other:o1", "message": "m", "effort": "low", "cwd": "/w"}, {})
        assert out["error"]["details"] == {"capability": "turn_overrides", "arguments": ["effort", "cwd"]}
        out = await run_tool(app, tools["message_agent"], {"to": "team:bob", "message": "m", "mode": "auto", "model": "m2"}, {})
        assert out["error"]["details"] == {"capability": "turn_overrides", "arguments": ["model"]}
        assert stored(app) == 1
    finally:
        await app.aclose()


async def test_get_codex_thread_receipts_with_and_without_the_receipts_plugin(make_app: Any, thread: Thread) -> None:
    app = make_app(disabled="claude roles receipts")
    try:
        call = ToolCall(meta={}, caller=ALICE)
        out = await codex_tools.get_codex_thread(app, {"threadId": TID, "recentItems": 0, "includeReceipts": True}, call)
        assert out["agentLinkReceipts"] is None
        assert [w["code"] for w in call.warnings] == ["receipts_unavailable"]
        plain = await codex_tools.get_codex_thread(app, {"threadId": TID, "recentItems": 0}, ToolCall(meta={}, caller=ALICE))
        assert "agentLinkReceipts" not in plain
    finally:
        await app.aclose()
    app = make_app(disabled="claude roles")
    try:
        if "list_agent_link_receipts" not in app.hooks.tools():
            pytest.skip("the receipts plugin is not installed here")
        await send(app, ALICE)
        await send(app, ALICE)
        call = ToolCall(meta={}, caller=ALICE)
        out = await codex_tools.get_codex_thread(app, {"threadId": TID, "recentItems": 0, "includeReceipts": True}, call)
        receipts = out["agentLinkReceipts"]
        assert receipts and all(ADDRESS in str(r.get("target")) for r in receipts) and call.warnings == []
        one = await codex_tools.get_codex_thread(app, {"threadId": TID, "recentItems": 0, "includeReceipts": True,
                                                       "receiptLimit": 1}, ToolCall(meta={}, caller=ALICE))
        assert len(one["agentLinkReceipts"]) == 1
        none = await codex_tools.get_codex_thread(app, {"threadId": TID, "recentItems": 0, "includeReceipts": True,
                                                        "receiptLimit": 0}, ToolCall(meta={}, caller=ALICE))
        assert none["agentLinkReceipts"] == []
    finally:
        await app.aclose()


async def test_switch_receipts_are_written_in_the_transaction_of_the_send(make_app: Any, thread: Thread,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    policy = FakePolicy()
    policy.decisions["model"] = {"allowed": True, "grantedBy": {"rule": "policy", "policyKey": ADDRESS, "entry": "*"}}
    app = make_app(policy, disabled="claude roles")
    try:
        if "list_agent_link_receipts" not in app.hooks.tools():
            pytest.skip("the receipts plugin is not installed here")
        # A process that dies right after the commit runs no observer: what the transaction
        # recorded is all there is.
        real_call = app.hooks.call
        monkeypatch.setattr(app.hooks, "call", lambda hook, **kw: None if hook == "agent_link_on_event" else real_call(hook, **kw))
        out = await send(app, BOB, model="gpt-b")
        [slot] = out["switchReceipts"]
        assert (slot["action"], slot["recorded"]) == ("model_switch", True) and slot["id"]
        rows = app.store.conn.execute("SELECT json_extract(data, '$.action'), id FROM receipts ORDER BY seq").fetchall()
        assert [(r[0], r[1]) for r in rows if r[0] == "model_switch"] == [("model_switch", slot["id"])]
    finally:
        await app.aclose()


async def test_switch_events_read_no_row_for_a_send_to_another_harness(make_app: Any, thread: Thread) -> None:
    """Only a Codex recipient can be granted switches, so the ``sent`` event of any other send
    gets none without its row being read back (a send's hot path); a Codex send still does."""
    from agent_link_core.records import Event

    app = make_app()
    try:
        reads: list[str] = []
        real_get_row = app.mailbox.get_row

        def get_row(message_id: str) -> Any:
            reads.append(message_id)
            return real_get_row(message_id)

        app.mailbox.get_row = get_row  # type: ignore[method-assign]
        other = Event("sent", "01M8SH0PPZP75F0SSZA6JFDPMN", 1, BOB.address, {"to": "team:bob"})
        assert overrides.switch_events(other, app) == [] and reads == []
        codex = Event("sent", "01M8SH0PPZP75F0SSZA6JFDPMN", 1, BOB.address, {"to": ADDRESS})
        assert overrides.switch_events(codex, app) == [] and reads == ["01M8SH0PPZP75F0SSZA6JFDPMN"]
    finally:
        await app.aclose()


async def test_a_launch_with_a_message_starts_its_turn_once_agent_link_is_ready(make_app: Any, thread: Thread, mini: Any) -> None:
    reports_at_turn = mini.reports_seen_by("turn/start")
    app = make_app()
    try:
        call = ToolCall(meta={}, caller=ALICE)
        launched = await codex_tools.launch_codex_thread(app, {"message": "m"}, call)
    finally:
        await app.aclose()
    assert launched["delivery"] == "delivered" and launched["action"] == "started_thread+started_turn"
    assert "codex_tools_not_ready" not in [w["code"] for w in call.warnings]
    assert reports_at_turn == [[(TID, "agent-link", "starting"), (TID, "agent-link", "ready")]]
