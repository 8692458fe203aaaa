"""Send options only a harness understands are declared by that harness (SendOption): the core
adds them to message_agent's schemas and refuses them for other harnesses' sessions."""

from __future__ import annotations

from typing import Any

import pytest

from agent_link_core import hookimpl
from agent_link_core.app import App
from agent_link_core.harness import Delivery, Harness, SendOption
from agent_link_core.model import Caller, Session
from agent_link_core.tools.registry import run_tool

ALICE = Caller("plain:alice", "runtime_context", "plain")


class Stepper(Harness):
    """A host with steps: it understands ``pace`` and can change its ``gear``."""

    name = "stepper"
    send_option_specs = (
        SendOption("pace", {"type": "string", "enum": ["slow", "fast"], "description": "How to deliver."}),
        SendOption("gear", {"type": "string", "description": "Change the session's gear."}, capability="gear_changes"),
    )
    send_result_fields = {"stepId": {"type": "string"}}

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
    def __init__(self) -> None:
        self.stepper = Stepper()

    @hookimpl
    def agent_link_register_harnesses(self, register: Any) -> None:
        register(self.stepper)
        register(Plain())


@pytest.fixture
def hosts() -> Hosts:
    return Hosts()


@pytest.fixture
def app(hosts: Hosts) -> App:
    application = App.create(extra_plugins=(("hosts", hosts),))
    yield application
    application.close()


async def send(app: App, **args: Any) -> dict[str, Any]:
    return await run_tool(app, app.hooks.tools()["message_agent"], {"message": "hi", **args}, {})


def test_declared_options_and_fields_are_in_the_schemas(app: App) -> None:
    spec = app.hooks.tools()["message_agent"]
    assert spec.input_schema["properties"]["pace"]["enum"] == ["slow", "fast"]
    assert "gear" in spec.input_schema["properties"] and "stepId" in spec.output_fields


@pytest.mark.anyio
async def test_options_reach_the_declaring_harness(app: App, hosts: Hosts) -> None:
    out = await send(app, to="stepper:one", pace="fast", gear="3")
    assert out["ok"] and out["stepId"] == "s1", out
    assert hosts.stepper.options == [{"pace": "fast", "gear": "3"}]


@pytest.mark.anyio
async def test_options_aimed_at_another_harness_are_refused_before_storing(app: App) -> None:
    out = await send(app, to="plain:bob", gear="3")
    assert out["error"]["code"] == "unsupported"
    assert out["error"]["details"] == {"capability": "gear_changes", "arguments": ["gear"]}
    out = await send(app, to="plain:bob", pace="slow")
    assert out["error"]["code"] == "invalid_arguments"
    assert out["error"]["details"]["errors"] == [{"path": "pace", "rule": "unsupported_for_target", "expected": "omit it for this target"}]
    out = await send(app, to="stepper:one", pace="sideways")
    assert out["error"]["details"]["errors"][0]["rule"] == "enum"
    assert app.store.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0


def test_a_declaration_shadowing_a_core_argument_is_refused() -> None:
    class Greedy(Harness):
        name = "greedy"
        send_option_specs = (SendOption("message", {"type": "string"}),)

    class Plugin:
        @hookimpl
        def agent_link_register_harnesses(self, register: Any) -> None:
            register(Greedy())

    app = App.create(extra_plugins=(("greedy", Plugin()),))
    try:
        assert "message_agent" in app.hooks.tools()  # where the declarations are checked
        assert "greedy" not in app.harnesses
        assert "message_agent's own argument" in app.plugin_report.failed["greedy"]
    finally:
        app.close()
