"""Send options only one host understands are added to message_agent by its plugin (agent_link_extend_tools), which
refuses them for other hosts' sessions (agent_link_tool_send): the core passes what plugins added to the recipient's
Harness.deliver; the result fields its harness's Delivery.fields fill are added the same way."""

from __future__ import annotations

from typing import Any

import pytest

from agent_link_core import hookimpl
from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.harness import Delivery, Harness
from agent_link_core.model import Caller, Session
from agent_link_core.tools.registry import run_tool

ALICE = Caller("plain:alice", "runtime_context", "plain")


class Stepper(Harness):
    """A host with steps: it understands ``pace`` and can change its ``gear``."""

    name = "stepper"

    def __init__(self) -> None:
        self.options: list[dict[str, Any]] = []

    async def get_session(self, session_id: str) -> Session | None:
        return Session(f"stepper:{session_id}", "stepper", session_id)

    async def deliver(self, message: dict[str, Any], envelope: str, options: Any) -> Delivery:
        self.options.append(dict(options))
        return Delivery(delivered=True, via="step", fields={"stepId": "s1"})


class Plain(Harness):
    name = "plain"

    async def get_session(self, session_id: str) -> Session | None:
        return Session(f"plain:{session_id}", "plain", session_id)


class Hosts:
    """The stepper host's plugin: its harness, its send options, and their refusal for other hosts' sessions."""

    def __init__(self) -> None:
        self.stepper = Stepper()

    @hookimpl
    def agent_link_register_harnesses(self, register: Any) -> None:
        register(self.stepper)

    @hookimpl
    def agent_link_extend_tools(self) -> dict[str, Any]:
        return {"message_agent": {"input": {"pace": {"type": "string", "enum": ["slow", "fast"], "description": "How to deliver."},
                                            "gear": {"type": "string", "description": "Change the session's gear."}},
                                  "output": {"stepId": {"type": "string"}}}}

    @hookimpl(tryfirst=True)
    def agent_link_tool_send(self, arguments: dict[str, Any], recipient: str, app: App) -> None:
        if recipient.startswith("stepper:") or not {"gear", "pace"} & set(arguments):
            return
        theirs = app.hooks.host_arguments(recipient)  # what the recipient's own host adds is its to take
        if "gear" in arguments and "gear" not in theirs:
            raise AgentLinkError("unsupported", f"{recipient} cannot take gear changes.", {"capability": "gear_changes", "arguments": ["gear"]})
        if "pace" in arguments and "pace" not in theirs:
            raise invalid_arguments([{"path": "pace", "rule": "unsupported_for_target", "expected": "omit it for this target"}])


class Plains:
    """The plain host's plugin: it adds no send option."""

    @hookimpl
    def agent_link_register_harnesses(self, register: Any) -> None:
        register(Plain())


@pytest.fixture
def hosts() -> Hosts:
    return Hosts()


@pytest.fixture
def app(hosts: Hosts) -> App:
    application = App.create(extra_plugins=(("hosts", hosts), ("plains", Plains())))
    yield application
    application.close()


async def send(app: App, **args: Any) -> dict[str, Any]:
    return await run_tool(app, app.hooks.tools()["message_agent"], {"message": "hi", **args}, {})


def test_added_options_and_declared_fields_are_in_the_schemas(app: App) -> None:
    spec = app.hooks.tools()["message_agent"]
    assert spec.input_schema["properties"]["pace"]["enum"] == ["slow", "fast"]
    assert "gear" in spec.input_schema["properties"] and "stepId" in spec.output_fields


@pytest.mark.anyio
async def test_added_options_reach_the_recipients_harness(app: App, hosts: Hosts) -> None:
    out = await send(app, to="stepper:one", pace="fast", gear="3")
    assert out["ok"] and out["stepId"] == "s1", out
    assert hosts.stepper.options == [{"pace": "fast", "gear": "3"}]
    assert (await send(app, to="stepper:two"))["ok"] and hosts.stepper.options[-1] == {}


@pytest.mark.anyio
async def test_options_the_plugin_refuses_for_another_harness_store_nothing(app: App) -> None:
    out = await send(app, to="plain:bob", gear="3")
    assert out["error"]["code"] == "unsupported"
    assert out["error"]["details"] == {"capability": "gear_changes", "arguments": ["gear"]}
    out = await send(app, to="plain:bob", pace="slow")
    assert out["error"]["code"] == "invalid_arguments"
    assert out["error"]["details"]["errors"] == [{"path": "pace", "rule": "unsupported_for_target", "expected": "omit it for this target"}]
    out = await send(app, to="stepper:one", pace="sideways")
    assert out["error"]["details"]["errors"][0]["rule"] == "enum"
    assert app.store.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0


@pytest.mark.anyio
async def test_a_forwarded_argument_no_loaded_plugin_adds_is_refused_before_storing(app: App) -> None:
    """A plugin tool sending through message_agent with an argument a missing plugin would add (waitForReply without the
    waits plugin) is refused (unsupported); given as false it is no request and the message goes."""
    from agent_link_core.errors import AgentLinkError
    from agent_link_core.tools.core_tools import message_agent
    from agent_link_core.tools.registry import ToolCall

    call = ToolCall({}, ALICE)
    with pytest.raises(AgentLinkError) as refused:
        await message_agent(app, {"to": "plain:bob", "message": "ready?", "waitForReply": True}, call)
    assert refused.value.code == "unsupported" and refused.value.details == {"arguments": ["waitForReply"]}
    assert app.store.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0
    assert (await message_agent(app, {"to": "plain:bob", "message": "hi", "waitForReply": False}, call))["to"] == "plain:bob"


class Walker(Stepper):
    name = "walker"

    async def get_session(self, session_id: str) -> Session | None:
        return Session(f"walker:{session_id}", "walker", session_id)


class Walkers:
    """A second host's plugin that adds a send option of the same name (``pace``) and refuses it, as the stepper's
    plugin does, for sessions of hosts that do not add it themselves."""

    def __init__(self) -> None:
        self.walker = Walker()

    @hookimpl
    def agent_link_register_harnesses(self, register: Any) -> None:
        register(self.walker)

    @hookimpl
    def agent_link_extend_tools(self) -> dict[str, Any]:
        return {"message_agent": {"input": {"pace": {"type": "string", "enum": ["slow", "fast"], "description": "How to walk."}}}}

    @hookimpl(tryfirst=True)
    def agent_link_tool_send(self, arguments: dict[str, Any], recipient: str, app: App) -> None:
        if "pace" in arguments and not recipient.startswith("walker:") and "pace" not in app.hooks.host_arguments(recipient):
            raise invalid_arguments([{"path": "pace", "rule": "unsupported_for_target", "expected": "omit it for this target"}])


@pytest.mark.anyio
async def test_two_hosts_adding_one_option_each_take_it_for_their_own_sessions(hosts: Hosts) -> None:
    """Two host plugins that add a send option of one name: neither refuses it for the other's sessions; a host that
    adds none still has it refused, with nothing stored."""
    walkers = Walkers()
    app = App.create(extra_plugins=(("hosts", hosts), ("plains", Plains()), ("walkers", walkers)))
    try:
        assert (await send(app, to="walker:w1", pace="slow"))["ok"] and walkers.walker.options == [{"pace": "slow"}]
        assert (await send(app, to="stepper:s1", pace="fast"))["ok"] and hosts.stepper.options == [{"pace": "fast"}]
        assert app.hooks.host_arguments("walker:w1") == {"pace"} and app.hooks.host_arguments("plain:bob") == set()
        out = await send(app, to="walker:w1", gear="3")  # the stepper's own option stays its own
        assert out["error"]["details"] == {"capability": "gear_changes", "arguments": ["gear"]}
        out = await send(app, to="plain:bob", pace="slow")
        assert out["error"]["details"]["errors"] == [{"path": "pace", "rule": "unsupported_for_target", "expected": "omit it for this target"}]
        assert app.store.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 2
    finally:
        app.close()


def test_a_plugin_extends_a_core_tool_and_a_bad_extension_is_refused() -> None:
    """agent_link_extend_tools adds arguments, result fields and a description's end after the tool's own; an answer
    naming what the tool has, a tool that is not the core's or an invalid schema is left out and reported."""
    answers = {
        "adds": {"message_agent": {"input": {"shout": {"type": "boolean"}}, "output": {"echoed": {"type": "string"}},
                                   "description": " Shout if you must."}, "list_agents": {"output": {"mood": {"type": "string"}}}},
        "clash": {"message_agent": {"input": {"message": {"type": "string"}}}},
        "greedy": {"message_agent": {"output": {"to": {"type": "string"}}}},
        "stranger": {"wait_for_agent": {"input": {"x": {"type": "string"}}}},
        "broken": {"message_agent": {"output": {"bad": {"type": "no such type"}}}},
    }

    def plugin(answer: dict[str, Any]) -> Any:
        class Extender:
            @hookimpl
            def agent_link_extend_tools(self) -> dict[str, Any]:
                return answer

        return Extender()

    app = App.create(extra_plugins=tuple((name, plugin(answer)) for name, answer in answers.items()))
    try:
        tools = app.hooks.tools()
        spec = tools["message_agent"]
        assert list(spec.input_schema["properties"])[-1] == "shout" and "echoed" in spec.output_fields
        assert spec.input_schema["properties"]["message"]["minLength"] == 1 and "bad" not in spec.output_fields
        assert spec.description.endswith("when you expect an answer. Shout if you must.")
        assert "mood" in tools["list_agents"].output_fields
        problems = {p["plugin"]: p["error"] for p in app.hooks.boundary.report()}
        assert "argument 'message', which message_agent has already" in problems["clash"]
        assert "result field 'to', which message_agent has already" in problems["greedy"]
        assert "'wait_for_agent', which is no core tool" in problems["stranger"]
        assert "invalid JSON schema" in problems["broken"] and "adds" not in problems
    finally:
        app.close()
