"""Fault injection at the plugin boundary: for every hook (and every harness method the core
calls), a plugin named ``bad`` raises, answers with the wrong type, or hangs. Each case checks
that the other plugin (``good``) and the core still serve (send, inbox, tools/list, health)
and that the failure is reported naming ``bad`` and ``AGENT_LINK_DISABLE_PLUGINS=bad``."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import click
import pytest
from click.testing import CliRunner

from agent_link_core import hookimpl, reading
from agent_link_core.app import App
from agent_link_core.lazy import hookspec
from agent_link_core.boundary import Refused, expect
from agent_link_core.config import Setting
from agent_link_core.envelope import render_element
from agent_link_core.harness import Delivery, Harness, OutputBudget, SessionListing
from agent_link_core.hook import HookContext
from agent_link_core.records import EnvelopeContribution
from agent_link_core.model import Caller, Session
from agent_link_core.records import PromptHook
from agent_link_core.server import tool_definition
from agent_link_core.store import Migration
from agent_link_core.tools.registry import ToolSpec, run_tool

# The boundary interrupts a hung synchronous hook with SIGALRM; pytest-timeout's default method
# owns SIGALRM, so this file's time limit runs on a thread instead.
pytestmark = pytest.mark.timeout(300, method="thread")
# the hook budget in hang cases: a hung hook costs this much once (21 cases). In this process
# the healthy hooks it also bounds are already imported and take milliseconds; a subprocess's
# startup needs more (tests/test_fault_matrix.py)
HANG_BUDGET_MS = "1000"
GOOD_ONE = Caller("good:one", "runtime_context", "good")


class GoodHarness(Harness):
    name = "good"
    output_budget = OutputBudget(tool_result_bytes=40_000, push_bytes=5_000)  # a larger push asks agent_link_push_notice

    def __init__(self) -> None:
        self.pushed: list[str] = []

    def identify_caller(self, meta: Any, env: Any) -> Caller | None:
        session = meta.get("goodSession")
        return Caller(f"good:{session}", "runtime_context", "good") if session else None

    async def list_sessions(self, *, include_archived: bool = False, limit: int = 200) -> SessionListing:
        return SessionListing([Session("good:one", "good", "one", title="Good one", last_activity_ms=2),
                               Session("good:two", "good", "two", title="Good two", last_activity_ms=1)])

    async def get_session(self, session_id: str) -> Session | None:
        return next((s for s in (await self.list_sessions()).sessions if s.id == session_id), None)

    async def deliver(self, message: dict[str, Any], envelope: str, options: Any) -> Delivery:
        self.pushed.append(envelope)
        return Delivery(delivered=True, via="good-push", state="pushed", evidence={"echo": message["id"]})

    def health(self) -> dict[str, Any]:
        return {"sessions": 2}


async def echo(app: App, args: dict[str, Any], call: Any) -> dict[str, Any]:
    return {"echo": args.get("text", "")}


ECHO = ToolSpec("good_echo", "Echo the text.", {"type": "object", "properties": {"text": {"type": "string"}},
                                                "additionalProperties": False}, {"echo": {"type": "string"}}, echo)


@hookspec
def agent_link_register_sections(register: Any) -> None:
    """Contribute sections (a hook :class:`Good` specifies, as the web plugin its panels). Called by :func:`consume_sections`.

    :param register: call it with a :class:`Section`.
    """


@hookspec(firstresult=True, refuses=True, check=expect(lambda r: isinstance(r, dict) and isinstance(r.get("allowed"), bool),
                                                       "expected None or a dict with a boolean 'allowed'"))
def agent_link_judge_change(target: str, sender: Caller, setting: str, value: str, context: dict[str, Any], app: App) -> dict[str, Any] | None:
    """Allow or refuse a change (a hook :class:`Good` specifies, as the codex plugin its overrides). Called by the tests.

    :param target: the session's address.
    :param sender: who asks.
    :param setting: what changes.
    :param value: to what.
    :param context: what else is known.
    :param app: the App.
    :returns: ``{"allowed": bool, ...}`` or None.
    """


class Good:
    """A well-behaved plugin implementing every hook, and specifying two hooks of its own."""

    AGENT_LINK_HOOKSPECS = {__name__: ("agent_link_register_sections", "agent_link_judge_change")}

    def __init__(self) -> None:
        self.harness = GoodHarness()
        self.events: list[str] = []
        self.read_by: list[str] = []

    @hookimpl
    def agent_link_register_harnesses(self, register: Any) -> None:
        register(self.harness)

    @hookimpl
    def agent_link_register_tools(self, register: Any) -> None:
        register(ECHO)

    @hookimpl
    def agent_link_register_settings(self, register: Any) -> None:
        register(Setting("AGENT_LINK_GOOD_FLAG", "flag", True))

    @hookimpl
    def agent_link_register_commands(self, cli: click.Group) -> None:
        @cli.command("good-hello")
        def good_hello() -> None:
            click.echo("hello from good")

    @hookimpl
    def agent_link_schema(self) -> list[Migration]:
        return [Migration("good", 1, "CREATE TABLE good_things (id INTEGER PRIMARY KEY);")]

    @hookimpl
    def agent_link_resolve_address(self, address: str, caller_address: str) -> dict[str, Any] | None:
        return {"address": "good:one", "via": "role:lead", "metadata": {}} if address == "role:lead" else None

    @hookimpl
    def agent_link_before_send(self, message: Any, context: Any) -> list[dict[str, Any]]:
        message.metadata["good"] = True
        return [{"code": "good_seen", "message": "checked by good"}]

    @hookimpl
    def agent_link_render_envelopes(self, messages: list[dict[str, Any]]) -> dict[str, EnvelopeContribution]:
        return {m["id"]: EnvelopeContribution({}, [render_element("good-note", [], "checked")]) for m in messages if m["metadata"].get("good")}

    @hookimpl
    def agent_link_on_event(self, event: Any) -> None:
        self.events.append(event.kind)

    @hookimpl
    def agent_link_health(self) -> tuple[str, dict[str, Any]]:
        return "good", {"ok": True}

    @hookimpl
    def agent_link_judge_change(self, target: str, sender: Caller, setting: str, value: str, context: Any) -> dict[str, Any]:
        return {"allowed": True, "grantedBy": {"kind": "good"}}

    @hookimpl
    def agent_link_register_prompt_hooks(self, register: Any) -> None:
        register(PromptHook("good", "agent_link_good.hook"))

    @hookimpl
    def agent_link_server_tasks(self) -> list[Any]:
        return [self.background]

    @hookimpl
    def agent_link_present_sessions(self, harness: str) -> list[Session]:
        return [Session("plain:good", "plain", "good", surface=("address",))] if harness in ("all", "plain") else []

    @hookimpl
    def agent_link_inbox_read(self, address: str) -> None:
        self.read_by.append(address)

    @hookimpl
    def agent_link_check_recipient(self, address: str, require_known: bool) -> dict[str, Any]:
        if address == "plain:good":
            return {"known": True}
        return {"known": False, "warning": {"code": "unknown_address", "message": f"good never saw {address}"}}

    @hookimpl
    def agent_link_suggest_addresses(self, query: str) -> list[str] | None:
        return ["plain:good"] if query == "plaingood" else None

    @hookimpl
    def agent_link_held_messages(self, address: str, rows: list[Any] | None) -> list[str] | None:
        return [] if address == "good:one" else None  # nobody waits: nothing held

    @hookimpl
    def agent_link_fit_read(self, read: Any) -> int:
        return int(read.stop)  # everything fits

    @hookimpl
    def agent_link_push_notice(self, message: dict[str, Any], size: int) -> str:
        return f"<agent-link-notice>{message['id']}: {size} bytes, read it from the inbox</agent-link-notice>"

    async def background(self) -> None:
        return None

    @hookimpl
    def agent_link_register_sections(self, register: Any) -> None:
        register(Section("good-things"))


@dataclass(frozen=True)
class Section:
    """A record of a plugin's hook whose type belongs to that plugin (the web plugin's panels): the
    core runs the hook and settles names; the plugin checks the records."""

    name: str


def consume_sections(app: App) -> list[str]:
    """What the caller of ``agent_link_register_sections`` gets, with its own check."""

    def check(record: Any) -> None:
        if not isinstance(record, Section):
            raise Refused(f"registered a {type(record).__name__}, not a Section", "Register Section records.")

    return list(app.hooks.collect("panel", "agent_link_register_sections", check))


class Gate:
    """What a hanging hook waits on; opened at teardown so no thread outlives its test."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def wait(self) -> None:
        self.event.wait(600)


def misbehave(fault: str, wrong: Any, gate: Gate) -> Any:
    if fault == "raise":
        raise RuntimeError("boom from bad")
    if fault == "hang":
        gate.wait()
        return None
    return wrong


def bad_plugin(hook: str, fault: str, gate: Gate) -> object:
    """A plugin implementing only ``hook``, and that one badly."""

    def m(wrong: Any) -> Any:
        return misbehave(fault, wrong, gate)

    impls: dict[str, Any] = {
        "agent_link_register_harnesses": lambda self, register: register(m("not a harness")),
        "agent_link_register_tools": lambda self, register: register(m("not a tool")),
        "agent_link_register_settings": lambda self, register: register(m("not a setting")),
        "agent_link_register_commands": lambda self, cli: m("not nothing"),
        "agent_link_schema": lambda self: m("not migrations"),
        "agent_link_resolve_address": lambda self, address, caller_address: m("good:one"),
        "agent_link_before_send": lambda self, message, context: m("a warning?"),
        "agent_link_render_envelopes": lambda self, messages: m("<b>bold</b>"),
        "agent_link_on_event": lambda self, event: m(42),
        "agent_link_health": lambda self: m("all fine, honest"),
        "agent_link_judge_change": lambda self, target, sender, setting, value, context: m("yes"),
        "agent_link_register_prompt_hooks": lambda self, register: register(m("not a prompt hook")),
        "agent_link_register_sections": lambda self, register: register(m("not a panel")),
        "agent_link_server_tasks": lambda self: m("not a list of tasks"),
        "agent_link_present_sessions": lambda self, harness: m(["plain:bad"]),
        "agent_link_inbox_read": lambda self, address: m(42),
        "agent_link_app_opened": lambda self: m(42),
        "agent_link_check_recipient": lambda self, address, require_known: m("yes"),
        "agent_link_suggest_addresses": lambda self, query: m("plain:bad"),
        "agent_link_held_messages": lambda self, address, rows: m([42]),
        "agent_link_fit_read": lambda self, read: m("all of it"),
        "agent_link_push_notice": lambda self, message, size: m(42),
    }
    impl = impls[hook]
    impl.__name__ = hook
    return type("Bad", (), {hook: hookimpl(impl)})()


class BadHarness(Harness):
    """A harness with one misbehaving method."""

    name = "bad"

    def __init__(self, method: str, fault: str, gate: Gate) -> None:
        self.method, self.fault, self.gate = method, fault, gate

    def _m(self, method: str, wrong: Any, fine: Any) -> Any:
        return misbehave(self.fault, wrong, self.gate) if method == self.method else fine

    def attach(self, app: Any) -> None:
        super().attach(app)
        self._m("attach", None, None)

    def identify_caller(self, meta: Any, env: Any) -> Caller | None:
        return self._m("identify_caller", "bad:someone", None)

    async def list_sessions(self, *, include_archived: bool = False, limit: int = 200) -> SessionListing:
        return self._m("list_sessions", ["bad:one"], SessionListing([Session("bad:one", "bad", "one", title="Bad one")]))

    async def _am(self, method: str, wrong: Any, fine: Any) -> Any:
        """:meth:`_m` for an async method: its hang awaits forever (the server's loop runs on)."""
        if method == self.method and self.fault == "hang":
            await asyncio.Event().wait()
        return self._m(method, wrong, fine)

    async def get_session(self, session_id: str) -> Session | None:
        return await self._am("get_session", {"id": session_id}, Session("bad:one", "bad", "one") if session_id == "one" else None)

    async def deliver(self, message: dict[str, Any], envelope: str, options: Any) -> Delivery:
        return await self._am("deliver", True, Delivery())

    def health(self) -> dict[str, Any]:
        return self._m("health", "healthy", {})


class BadHarnessPlugin:
    def __init__(self, method: str, fault: str, gate: Gate) -> None:
        self.harness = BadHarness(method, fault, gate)

    @hookimpl
    def agent_link_register_harnesses(self, register: Any) -> None:
        register(self.harness)


HOOKS = [
    "agent_link_register_harnesses", "agent_link_register_tools", "agent_link_register_settings",
    "agent_link_register_commands", "agent_link_schema", "agent_link_resolve_address", "agent_link_before_send",
    "agent_link_render_envelopes", "agent_link_on_event", "agent_link_health", "agent_link_judge_change",
    "agent_link_register_prompt_hooks", "agent_link_register_sections",
    "agent_link_server_tasks", "agent_link_present_sessions", "agent_link_inbox_read", "agent_link_check_recipient",
    "agent_link_suggest_addresses", "agent_link_held_messages", "agent_link_app_opened",
    "agent_link_fit_read", "agent_link_push_notice",
]
# an async harness method that never ends holds only the call waiting on it, for a bound:
# list_sessions its own, get_session the hook budget, deliver a few hook budgets
HARNESS_METHODS = [
    ("attach", ("raise", "hang")), ("identify_caller", ("raise", "wrong", "hang")), ("list_sessions", ("raise", "wrong")),
    ("get_session", ("raise", "wrong", "hang")), ("deliver", ("raise", "wrong", "hang")), ("health", ("raise", "wrong", "hang")),
]


@pytest.fixture
def gate() -> Iterator[Gate]:
    g = Gate()
    yield g
    g.event.set()


def make_app(bad: object, monkeypatch: pytest.MonkeyPatch, fault: str) -> tuple[App, Good]:
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "")  # hermetic: only the plugins named here
    if fault == "hang":
        # what every hook first imports (the tools' schemas ...) is loaded within the default budget first: the short one
        # is for the hang, and a loaded machine once took longer than it to import for the core's own tools hook
        warm = App.create(extra_plugins=(("good", Good()),))
        try:
            tool_names(warm)
        finally:
            warm.close()
        monkeypatch.setenv("AGENT_LINK_HOOK_TIMEOUT_MS", HANG_BUDGET_MS)
    good = Good()
    return App.create(extra_plugins=(("good", good), ("bad", bad))), good


def tool_names(app: App) -> set[str]:
    """What tools/list would show (definitions built as the server builds them)."""
    return {tool_definition(spec).name for spec in app.hooks.tools().values()}


async def assert_core_serves(app: App, good: Good) -> None:
    """send, inbox, tools/list and health work, and good's contributions are all there."""
    me = app.caller({"goodSession": "two"})
    assert me.address == "good:two"
    sent = await app.send(caller=me, to="good:one", body="hello one", anticipation="reply")
    assert sent.delivery is not None and sent.delivery.delivered
    assert {"code": "good_seen", "message": "checked by good"} in sent.warnings
    assert "<good-note>checked</good-note>" in good.harness.pushed[-1]
    routed = await app.send(caller=me, to="role:lead", body="hello lead", anticipation="action")
    assert routed.message["recipient"] == "good:one"
    inbox = app.inbox(GOOD_ONE)
    assert good.read_by[-1] == "good:one"
    assert {m["id"] for m in inbox["messages"]} >= {sent.message["id"], routed.message["id"]}
    plain = await app.send(caller=me, to="plain:nobody", body="hello nobody")
    assert plain.address_warning == {"code": "unknown_address", "message": "good never saw plain:nobody"}
    assert (await app.send(caller=me, to="plain:good", body="hello good", require_known=True)).address_warning is None
    assert app.hooks.suggest_addresses("plaingood") == ["plain:good"]  # what a CLI target that found nothing is told
    assert inbox["renderedBlock"].count("<good-note>checked</good-note>") == 2
    read = reading.inbox(app, GOOD_ONE, limit=20, mark=False, include_open=True)  # fitted by good (or whole)
    assert {m["id"] for m in read["messages"]} >= {sent.message["id"], routed.message["id"]}
    large = await app.send(caller=me, to="good:one", body="x" * 6_000)  # announced by good (or pushed whole)
    assert large.delivery is not None and (large.delivery.state == "announced" or large.delivery.delivered)
    assert "sent" in good.events and "delivered" in good.events
    names = tool_names(app)
    assert {"agent_link_health", "message_agent", "read_agent_link_inbox", "good_echo"} <= names
    assert (await run_tool(app, app.hooks.tools()["good_echo"], {"text": "x"}, {}))["echo"] == "x"
    listing = await app.list_agents()
    assert {"good:one", "good:two", "plain:good"} <= {s["address"] for s in listing["sessions"]}
    assert app.hooks.call("agent_link_judge_change", target="good:one", sender=me, setting="model", value="m", context={}) == {"allowed": True, "grantedBy": {"kind": "good"}}
    health = app.health()
    json.dumps(health)
    assert health["sections"]["good"] == {"ok": True}
    assert health["harnesses"]["good"] == {"sessions": 2}
    assert app.config.get("AGENT_LINK_GOOD_FLAG") is True
    assert app.store.conn.execute("SELECT COUNT(*) FROM good_things").fetchone()[0] == 0
    assert app.config.state_dir.endswith(".agent-link")
    assert app.hooks.prompt_hooks()["good"][0].module == "agent_link_good.hook"
    assert consume_sections(app) == ["good-things"]
    assert app.hooks.server_tasks() == [("good", good.background)]
    with app.store.write() as conn:  # delivered long enough ago for reminder 1 to be due
        conn.execute("UPDATE messages SET first_delivered_at = first_delivered_at - 31000 WHERE id = ?", (sent.message["id"],))
    assert "reminder 1 of" in (HookContext(app.config).due_reminder_note("good:one", "good-prompt-hook") or "")


def assert_reported(app: App, hook: str) -> None:
    """The failure names the plugin, the hook and the way out, in health and both CLI commands."""
    problems = [p for p in app.health()["plugins"]["problems"] if p["plugin"] == "bad"]
    assert problems, app.health()["plugins"]
    assert any(hook in p["hook"] for p in problems), problems
    assert all("AGENT_LINK_DISABLE_PLUGINS=bad" in p["fix"] for p in problems)
    from agent_link_core import cli as cli_mod
    from agent_link_testing.cli_plugins import use_app_in_cli

    runner = CliRunner()
    with pytest.MonkeyPatch.context() as mp:
        use_app_in_cli(mp, app)
        for command, exit_code in ((["health"], 1), (["plugins"], 0)):  # a broken plugin is health's problem
            result = runner.invoke(cli_mod.build_cli(), command)
            assert result.exit_code == exit_code, result.output
            assert "bad" in result.output and "AGENT_LINK_DISABLE_PLUGINS=bad" in result.output, result.output


def trigger_commands(app: App) -> None:
    """Build the CLI's plugin commands (the only trigger of agent_link_register_commands)."""
    from agent_link_core import cli as cli_mod
    from agent_link_testing.cli_plugins import use_app_in_cli

    with pytest.MonkeyPatch.context() as mp:
        use_app_in_cli(mp, app)
        result = CliRunner().invoke(cli_mod.build_cli(), ["good-hello"])
    assert result.exit_code == 0 and "hello from good" in result.output, result.output


@pytest.mark.anyio
@pytest.mark.parametrize("fault", ["raise", "wrong", "hang"])
@pytest.mark.parametrize("hook", HOOKS)
async def test_a_faulty_hook_stays_in_its_plugin(hook: str, fault: str, gate: Gate, monkeypatch: pytest.MonkeyPatch) -> None:
    app, good = make_app(bad_plugin(hook, fault, gate), monkeypatch, fault)
    try:
        trigger_commands(app)
        await assert_core_serves(app, good)
        assert_reported(app, hook)
    finally:
        await app.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize(("method", "fault"), [(m, f) for m, faults in HARNESS_METHODS for f in faults])
async def test_a_faulty_harness_affects_only_its_own_sessions(method: str, fault: str, gate: Gate,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    app, good = make_app(BadHarnessPlugin(method, fault, gate), monkeypatch, fault)
    try:
        await assert_core_serves(app, good)
        if "bad" in app.harnesses and method != "get_session":  # mail to its sessions is still stored
            out = await app.send(caller=GOOD_ONE, to="bad:one", body="for bad")
            assert app.mailbox.get_row(out.message["id"]) is not None
            if (method, fault) == ("deliver", "hang"):  # the sender is told, and no resend pushes it blindly
                assert out.delivery is not None and out.delivery.unknown and not out.delivery.delivered
                assert [w["code"] for w in out.delivery.warnings] == ["push_timed_out"]
        assert (await app.resolve_agent("bad:one"))["status"] in ("resolved", "not_found")
        assert_reported(app, method)
    finally:
        await app.aclose()


class Contributes:
    """A plugin whose registrations the core must refuse (one kind per instance)."""

    def __init__(self, what: str) -> None:
        self.what = what

    @hookimpl
    def agent_link_register_settings(self, register: Any) -> None:
        if self.what == "core_setting":
            register(Setting("AGENT_LINK_STATE_DIR", "path", "/tmp/elsewhere"))
        if self.what == "core_alias":
            register(Setting("AGENT_LINK_BAD_DIR", "path", None, aliases=("AGENT_LINK_STATE_DIR",)))
        if self.what == "setting_clash":
            register(Setting("AGENT_LINK_GOOD_FLAG", "flag", False))

    @hookimpl
    def agent_link_register_harnesses(self, register: Any) -> None:
        if self.what in ("empty_harness", "harness_clash"):
            harness = Harness()
            harness.name = "" if self.what == "empty_harness" else "good"
            register(harness)

    @hookimpl
    def agent_link_register_tools(self, register: Any) -> None:
        schema = {"type": "object", "properties": {}, "additionalProperties": False}
        if self.what == "bad_output_schema":
            register(ToolSpec("bad_tool", "Bad.", schema, {"n": {"type": "no-such-type"}}, echo))
        if self.what == "bad_input_schema":
            register(ToolSpec("bad_tool", "Bad.", {"type": "object", "properties": {"n": {"minimum": "zero"}}}, {}, echo))
        if self.what == "tool_clash":
            register(ToolSpec("message_agent", "Mine now.", schema, {}, echo))
        if self.what == "sync_handler":
            register(ToolSpec("bad_tool", "Bad.", schema, {}, lambda app, args, call: {}))  # type: ignore[arg-type,return-value]

    @hookimpl
    def agent_link_schema(self) -> list[Migration]:
        if self.what == "foreign_migration":
            return [Migration("core", 99, "DROP TABLE messages;")]
        if self.what == "broken_migration":
            return [Migration("bad", 1, "CREATE TABLE oops (;")]
        return []

    @hookimpl
    def agent_link_register_commands(self, cli: click.Group) -> None:
        if self.what == "command_clash":
            @cli.command("send")
            def send() -> None:
                click.echo("hijacked")


@pytest.mark.anyio
@pytest.mark.parametrize("what", [
    "core_setting", "core_alias", "setting_clash", "empty_harness", "harness_clash", "bad_output_schema",
    "bad_input_schema", "tool_clash", "sync_handler", "foreign_migration", "broken_migration", "command_clash",
])
async def test_bad_contributions_are_refused_naming_plugin_hook_and_fix(what: str, monkeypatch: pytest.MonkeyPatch) -> None:
    app, good = make_app(Contributes(what), monkeypatch, "wrong")
    try:
        trigger_commands(app)
        await assert_core_serves(app, good)
        assert "bad" in app.hooks.failed  # left out whole
        assert "bad" not in app.harnesses and "bad_tool" not in tool_names(app)
        assert app.hooks.tools()["message_agent"].description.startswith("Send")
        assert app.store.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] >= 2
        assert_reported(app, "agent_link_")
    finally:
        await app.aclose()


def test_a_refusal_message_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    app, _ = make_app(Contributes("core_setting"), monkeypatch, "wrong")
    try:
        (problem,) = app.hooks.boundary.report()
        assert problem["hook"] == "agent_link_register_settings"
        assert "AGENT_LINK_STATE_DIR" in problem["error"] and "core's own setting" in problem["error"]
        assert problem["fix"].startswith("A plugin cannot redefine a core setting")
        assert problem["disabled"] is True
    finally:
        app.close()


def test_a_misspelt_hook_is_reported_and_the_rest_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    class Typo:
        @hookimpl
        def agent_link_health_section(self) -> None:
            return None

    app, _ = make_app(Typo(), monkeypatch, "wrong")
    try:
        assert "agent_link_health_section" in app.hooks.failed["bad"]
        assert "good" in app.harnesses
        assert_reported(app, "load")
    finally:
        app.close()


def test_pluggy_ordering_applies_to_guarded_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    """tryfirst/trylast order guarded implementations as pluggy would; a wrapper is refused
    (not supported), its plugin left out and reported, and the call goes on without it."""
    order: list[str] = []

    class First:
        @hookimpl(tryfirst=True)
        def agent_link_on_event(self, event: Any) -> None:
            order.append("first")

    class Middle:
        @hookimpl
        def agent_link_on_event(self, event: Any) -> None:
            order.append("middle")

    class Last:
        @hookimpl(trylast=True)
        def agent_link_on_event(self, event: Any) -> None:
            order.append("last")

    class Wraps:
        @hookimpl(wrapper=True)
        def agent_link_on_event(self, event: Any) -> Iterator[None]:
            order.append("wrap-in")
            yield
            order.append("wrap-out")

    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "")
    app = App.create(extra_plugins=(("last", Last()), ("wraps", Wraps()), ("middle", Middle()), ("first", First())))
    try:
        from agent_link_core.records import Event

        app.hooks.call("agent_link_on_event", event=Event("sent", None, 1))
        assert order == ["first", "middle", "last"]
        assert [(p["plugin"], p["hook"], p["disabled"]) for p in app.hooks.boundary.report()] == [("wraps", "load", True)]
        assert "wrappers are not supported" in app.hooks.failed["wraps"]
    finally:
        app.close()


@pytest.mark.anyio
async def test_a_fault_inside_one_process_shows_in_the_health_of_another(gate: Gate, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hook failing inside an MCP server is listed by a later `agent-link health` (which
    never runs that hook itself), with the plugin and the way out, while that plugin is
    installed: a health without it (uninstalled since) leaves its problem out."""
    import subprocess
    import sys

    app, good = make_app(bad_plugin("agent_link_render_envelopes", "raise", gate), monkeypatch, "raise")
    try:
        await assert_core_serves(app, good)
    finally:
        await app.aclose()
    # the health process has a plugin named "bad" too (given in code, as this test's is)
    with_bad = ("import sys; from agent_link_core import plugins; from agent_link_core.cli import main; "
                "load = plugins.load_plugins; "
                "plugins.load_plugins = lambda env=None, extra_plugins=(), declared=False: load(env, (*extra_plugins, ('bad', type('Bad', (), {})())));"
                "sys.argv = ['agent-link', 'health']; main()")
    out = subprocess.run([sys.executable, "-c", with_bad], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stderr  # a problem: health is not ok
    assert "BROKEN plugin bad: agent_link_render_envelopes" in out.stdout and "(in 1 other process" in out.stdout
    assert "AGENT_LINK_DISABLE_PLUGINS=bad" in out.stdout
    without = subprocess.run([sys.executable, "-m", "agent_link_core", "health"], capture_output=True, text=True, timeout=120)
    assert without.returncode == 0, without.stderr
    assert "agent_link_render_envelopes" not in without.stdout


@pytest.mark.anyio
async def test_a_hook_called_from_async_code_still_sees_its_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hooks run inline on the caller's thread, so they see its running loop (harness code
    checks which loop its connections belong to)."""
    import asyncio

    from agent_link_core.records import Event

    seen: list[Any] = []

    class LoopAware:
        @hookimpl
        def agent_link_on_event(self, event: Any) -> None:
            seen.append(asyncio.get_running_loop())

    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "")
    app = App.create(extra_plugins=(("aware", LoopAware()),))
    try:
        app.hooks.call("agent_link_on_event", event=Event("sent", None, 1))
        assert seen == [asyncio.get_running_loop()]
    finally:
        await app.aclose()


@pytest.mark.anyio
async def test_a_plugin_cannot_claim_another_plugins_harness_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plugin registered before ``good`` that registers a harness named ``good`` is the one
    refused and left out; ``good`` keeps its harness and everything it serves."""

    class Thief:
        @hookimpl
        def agent_link_register_harnesses(self, register: Any) -> None:
            harness = Harness()
            harness.name = "good"
            register(harness)

    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "")
    good = Good()
    app = App.create(extra_plugins=(("thief", Thief()), ("good", good)))
    try:
        assert app.harnesses["good"] is good.harness
        assert "thief" in app.hooks.failed and "good" not in app.hooks.failed
        (problem,) = [p for p in app.hooks.boundary.report() if p["plugin"] == "thief"]
        assert "plugin 'good' already registered" in problem["error"]
        await assert_core_serves(app, good)
    finally:
        await app.aclose()


@pytest.mark.anyio
async def test_a_tool_of_a_plugin_disabled_while_serving_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Left out after the tool list was built, a plugin's tool answers ``unsupported`` naming the
    plugin (never a KeyError from its missing harness)."""
    app, good = make_app(Contributes("none"), monkeypatch, "wrong")
    try:
        served = app.hooks.tools()["good_echo"]  # what a server listed before the plugin was left out
        app.hooks.boundary.fault("good", "agent_link_health", "broke", disable=True)
        out = await run_tool(app, served, {"text": "x"}, {})
        assert out["ok"] is False and out["error"]["code"] == "unsupported"
        assert out["error"]["details"] == {"capability": "good_echo", "plugin": "good"}
        assert "good" in out["error"]["message"] and "broke" in out["error"]["message"]
    finally:
        await app.aclose()


@pytest.mark.anyio
async def test_a_faulted_tool_says_what_the_guard_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool call the guard stopped says why (its exception; a hang and how long the tool is skipped), where it said
    only "failed unexpectedly" for every call of a tool skipped after a hang."""
    app, _ = make_app(Contributes("none"), monkeypatch, "wrong")
    try:
        raising = ToolSpec("good_exit", "Exit.", ECHO.input_schema, {"echo": {"type": "string"}}, exits)
        out = await run_tool(app, raising, {"text": "x"}, {})
        assert out["error"]["code"] == "internal_error" and out["error"]["details"] == {"cause": "plugin_fault", "plugin": "?"}
        assert out["error"]["message"] == "good_exit (plugin ?) failed: SystemExit: 3.", out["error"]
        app.hooks.boundary.skip("good", "tool good_echo", "did not return within 3000 ms and was interrupted", 600)
        skipped = await run_tool(app, app.hooks.tools()["good_echo"], {"text": "x"}, {})
        assert skipped["error"]["message"] == "good_echo (plugin good) failed: did not return within 3000 ms and was interrupted."
        assert "AGENT_LINK_DISABLE_PLUGINS=good" in skipped["error"]["hint"]
    finally:
        await app.aclose()


async def exits(app: App, args: dict[str, Any], call: Any) -> dict[str, Any]:
    raise SystemExit(3)


def test_only_a_call_that_holds_its_caller_is_reported_slow(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A wait tool awaiting its answer for seconds holds nothing; a synchronous hook as long does."""
    import time

    from agent_link_core import boundary as module

    monkeypatch.setattr(module, "SLOW_MS", 50)
    guard = module.Boundary(timeout_ms=0)

    async def waits() -> int:
        await asyncio.sleep(0.1)
        return 1

    with caplog.at_level("INFO", logger="agent_link_core.plugins"):
        assert asyncio.run(guard.acall("waiter", "tool wait", waits, bound_s=None)) == 1
        assert "(slow)" not in caplog.text
        assert guard.call("sleeper", "agent_link_health", time.sleep, 0.1) is None
        assert "'sleeper' took" in caplog.text and "(slow)" in caplog.text
    assert guard.timing_report()["waiter"]["tool wait"]["calls"] == 1


def test_a_slow_call_is_no_warning_and_never_blames_the_core(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A busy machine slows every hook: the note is info (the log file; warnings reach every
    command's stderr), and the core's own hooks, which AGENT_LINK_DISABLE_PLUGINS cannot turn
    off, are never offered that way out."""
    import time

    from agent_link_core import boundary as module

    monkeypatch.setattr(module, "SLOW_MS", 50)
    guard = module.Boundary(timeout_ms=0)
    with caplog.at_level("INFO", logger="agent_link_core.plugins"):
        guard.call(module.CORE_PLUGIN, "agent_link_register_tools", time.sleep, 0.1)
        guard.call("sleeper", "agent_link_register_tools", time.sleep, 0.1)
    assert [r.levelname for r in caplog.records] == ["INFO", "INFO"]
    core, other = (r.getMessage() for r in caplog.records)
    assert "(slow)" in core and "AGENT_LINK_DISABLE_PLUGINS" not in core and "machine is likely busy" in core
    assert other.endswith("AGENT_LINK_DISABLE_PLUGINS=sleeper.")
    # a failure of the core's own code is a bug to report, not a plugin to turn off
    assert "AGENT_LINK_DISABLE_PLUGINS" not in guard.fault(module.CORE_PLUGIN, "agent_link_health", "boom").fix


def test_plugins_lists_slow_hooks_of_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from agent_link_core import boundary as module
    from agent_link_core.cli import build_cli

    monkeypatch.setattr(module, "SLOW_MS", -1)  # every call counts as slow
    result = CliRunner().invoke(build_cli(), ["plugins"], catch_exceptions=False)
    assert result.exit_code == 0
    core = [line for line in result.output.splitlines() if line.startswith(f"{module.CORE_PLUGIN} slow in ")]
    assert core and all("nothing to turn off" in line and "AGENT_LINK_DISABLE_PLUGINS" not in line for line in core)


@pytest.mark.timeout(300, method="thread")  # SIGALRM stays the boundary's, as in the MCP server
def test_a_nested_plugin_call_that_faults_hands_its_time_to_the_outer_call_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A hook called inside a tool call (an envelope hook, once per message of a read) is armed
    as a nested frame; when it faults, its frame ends once and the outer call's deadline moves
    by the time the hook took, not twice that."""
    from agent_link_core import boundary

    boundary.watch_interrupts()
    clock = [1000.0]
    monkeypatch.setattr(boundary.time, "monotonic", lambda: clock[0])
    guard = boundary.Boundary(timeout_ms=60_000)
    outer = boundary._arm(60)
    if outer is None:
        pytest.skip("another handler owns SIGALRM in this process")
    try:
        def failing() -> None:
            clock[0] += 5
            raise RuntimeError("bad hook")

        assert guard.call("bad", "agent_link_render_envelopes", failing, default="fallback") == "fallback"
        assert boundary._frames == [outer]
        assert outer.deadline == 1000.0 + 60 + 5
    finally:
        boundary._disarm(outer)
    assert boundary._frames == []


@pytest.mark.timeout(300, method="thread")  # SIGALRM stays the boundary's, as in the MCP server
def test_checking_an_answer_is_bounded_and_blamed_on_the_plugin_that_gave_it() -> None:
    """A result check runs the answer's code (an ``__eq__``, a property): it runs within the call's budget, so an answer
    whose check hangs costs one budget, not the server's loop; inside another plugin's call, the time is the inner
    plugin's, and the outer call goes on with the inner one's default (found by review: the check ran unbounded, and an
    outer call's overrun was blamed on the inner plugin)."""
    import time

    from agent_link_core import boundary

    boundary.watch_interrupts()
    if boundary._arm(60) is None:
        pytest.skip("another handler owns SIGALRM in this process")
    boundary._disarm(boundary._frames[-1])
    guard = boundary.Boundary(timeout_ms=300)

    def hangs(answer: Any, plugin: str) -> str | None:
        time.sleep(30)
        return None

    started = time.monotonic()
    assert guard.call("slow", "agent_link_health", lambda: "answer", check=hangs, default="fallback") == "fallback"
    assert time.monotonic() - started < 10 and ("slow", "agent_link_health") in guard.hung

    def outer() -> str:
        assert guard.call("inner", "agent_link_on_event", lambda: "answer", check=hangs, default="inner default") == "inner default"
        return "outer answer"

    assert guard.call("outer", "agent_link_present_sessions", outer, default="outer default") == "outer answer"
    assert ("inner", "agent_link_on_event") in guard.hung and ("outer", "agent_link_present_sessions") not in guard.hung


@pytest.mark.timeout(300, method="thread")  # SIGALRM stays the boundary's, as in the MCP server
def test_a_hook_interrupted_after_its_budget_is_not_called_again_in_the_process() -> None:
    """A hung hook costs one budget, not one per later call (a server answers nothing else
    while a sync hook runs); the plugin's other hooks are still called."""
    import time

    from agent_link_core import boundary

    boundary.watch_interrupts()
    guard = boundary.Boundary(timeout_ms=200)
    calls: list[str] = []

    def hang() -> str:
        calls.append("hang")
        time.sleep(30)
        return "never"

    if boundary._arm(60) is None:
        pytest.skip("another handler owns SIGALRM in this process")
    boundary._disarm(boundary._frames[-1])
    assert guard.call("bad", "agent_link_on_event", hang, default="fallback") == "fallback"
    assert guard.call("bad", "agent_link_on_event", hang, default="fallback") == "fallback"
    assert calls == ["hang"]
    assert guard.call("bad", "agent_link_health", lambda: "ok") == "ok"
    [problem] = guard.problems.values()
    assert "not called again" in problem.error


class ReadsTheMailbox:
    """A healthy plugin whose before_store reads the core's database (as the loops plugin does)."""

    @hookimpl
    def agent_link_before_store(self, conn: Any) -> None:
        conn.execute("SELECT count(*) FROM messages WHERE body != ''").fetchone()


@pytest.mark.anyio
async def test_a_damaged_database_is_the_stores_problem_not_the_plugin_that_met_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite's word that the database file is damaged, met inside a plugin's hook, is not that plugin's fault:
    the core reports the damaged database with its recovery steps, and no plugin is recorded as broken (which
    health would keep saying for a day, and whose fix would be to turn a healthy plugin off)."""
    from agent_link_core.errors import AgentLinkError

    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "")
    me = Caller("team:alice", "config", "team")
    app = App.create(extra_plugins=(("reader", ReadsTheMailbox()),))
    for n in range(30):
        await app.send(caller=me, to="team:bob", body=f"message {n} " + "x" * 2000)
    path = app.store.path
    app.close()
    with open(path, "r+b") as db:  # a page of the messages table overwritten, as a disk fault would
        db.seek(3 * 4096)
        db.write(b"\xde\xad" * 2048)
    app = App.create(extra_plugins=(("reader", ReadsTheMailbox()),))
    try:
        with pytest.raises(AgentLinkError) as caught:
            await app.send(caller=me, to="team:bob", body="after the damage")
        assert caught.value.code == "state_io_error" and caught.value.details["reason"] == "corrupt"
        assert not [p for p in app.hooks.boundary.report() if p["plugin"] == "reader"]
    finally:
        app.close()


def test_a_plugin_raising_the_timers_overran_itself_is_an_ordinary_fault() -> None:
    """The boundary's own ``Overran`` raised by a plugin, within its budget, is that plugin's fault like any other
    exception: contained, reported in its words, the plugin not marked hung (found by review: it was taken for an
    enclosing call's overrun and re-raised past the boundary)."""
    from agent_link_core import boundary

    boundary.watch_interrupts()
    guard = boundary.Boundary(timeout_ms=60_000)

    def raises() -> None:
        raise boundary.Overran("mine")

    assert guard.call("sly", "agent_link_on_event", raises, default="fallback") == "fallback"
    assert ("sly", "agent_link_on_event") not in guard.hung
    assert [p.error for p in guard.problems.values() if p.plugin == "sly"] == ["Overran: mine"]
    assert boundary._frames == []


class _OddSessions(Harness):
    """Sessions whose fields are not of their documented types (``receive`` a string, ``extra`` a list, a time as
    text), and one leaving ``receive``/``extra`` as None."""

    name = "odd"

    def __init__(self, junk: str) -> None:
        self.junk = junk

    def _session(self) -> Session:
        if self.junk == "types":
            return Session("odd:one", "odd", "one", receive="push", extra=["x"], last_activity_ms="soon")  # type: ignore[arg-type]
        if self.junk == "not JSON":
            return Session("odd:one", "odd", "one", extra={"when": {1, 2}})
        # None for receive/extra reads as their defaults; the harness's own fields never replace the core's
        return Session("odd:one", "odd", "one", receive=None, extra={"address": "team:someone-else", "mine": 1})  # type: ignore[arg-type]

    async def list_sessions(self, *, include_archived: bool = False, limit: int = 200) -> SessionListing:
        return SessionListing([self._session()])

    async def get_session(self, session_id: str) -> Session | None:
        return self._session() if session_id == "one" else None


@pytest.mark.anyio
@pytest.mark.parametrize("junk", ["types", "not JSON", ""])
async def test_sessions_a_listing_cannot_show_are_their_harness_fault(junk: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A harness's session with fields of the wrong types is refused as that harness's fault (its listing and lookup
    left out, reported) and list_agents/resolve_agent go on; ``receive``/``extra`` left None read as their defaults
    (found by review: the core's ``session_view`` raised on them, failing list_agents for every caller)."""
    harness = _OddSessions(junk)

    class Plugin:
        @hookimpl
        def agent_link_register_harnesses(self, register: Any) -> None:
            register(harness)

    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "")
    app = App.create(extra_plugins=(("odd", Plugin()),))
    try:
        listed = await app.list_agents()
        resolved = await app.resolve_agent("odd:one")
        problems = {p["hook"] for p in app.health()["plugins"]["problems"] if p["plugin"] == "odd"}
        if junk:
            assert listed["sessions"] == [] and listed["providers"]["odd"]["reason"] == "harness_failed"
            assert {"harness.odd.list_sessions", "harness.odd.get_session"} <= problems, problems
        else:
            assert [(s["address"], s["mine"], s["receive"]) for s in listed["sessions"]] == [
                ("odd:one", 1, {"push": None, "nudge": None, "pull": True})]
            assert resolved["status"] == "resolved" and not problems
        json.dumps([listed, resolved])
    finally:
        await app.aclose()


@pytest.mark.anyio
async def test_an_envelope_plugin_cannot_hide_a_reads_messages_from_the_plugins_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The envelope hook's messages are one sequence for every plugin of a read: one that tries to empty it fails alone,
    and the next still adds to every message (found by review: a shared list could be emptied in place)."""

    class Emptier:
        @hookimpl(tryfirst=True)
        def agent_link_render_envelopes(self, messages: Any) -> None:
            messages.clear()

    class Marker:
        @hookimpl
        def agent_link_render_envelopes(self, messages: Any) -> dict[str, EnvelopeContribution]:
            return {m["id"]: EnvelopeContribution(elements=[render_element("seen", [])]) for m in messages}

    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "")
    app = App.create(extra_plugins=(("marker", Marker()), ("emptier", Emptier())))
    try:
        me = Caller("test:alice", "config", "test")
        for body in ("one", "two"):
            await app.send(caller=me, to="test:bob", body=body)
        read = app.inbox(Caller("test:bob", "config", "test"))
        assert read["renderedBlock"].count("<seen />") == 2
        assert [p["plugin"] for p in app.health()["plugins"]["problems"]] == ["emptier"]
    finally:
        await app.aclose()


# Answers that pass a check and turn hostile afterwards: a subclass of a built-in type answers honestly while the boundary's
# guarded call runs (the check included), and raises when the core reads it after the guard. Each must be refused at the
# check, as the plugin's fault, so that nothing the core reads later runs the plugin's code.

def _guarded() -> None:
    from agent_link_core.boundary import _PLUGIN

    if _PLUGIN.get() is None:
        raise RuntimeError("read outside the plugin's guarded call")


class HostileDict(dict):  # type: ignore[type-arg]
    def __getitem__(self, key: Any) -> Any:
        _guarded()
        return super().__getitem__(key)

    def get(self, *args: Any) -> Any:
        _guarded()
        return super().get(*args)

    def __iter__(self) -> Any:
        _guarded()
        return super().__iter__()

    def __len__(self) -> int:
        _guarded()
        return super().__len__()

    def __contains__(self, key: Any) -> bool:
        _guarded()
        return super().__contains__(key)

    def items(self) -> Any:
        _guarded()
        return super().items()

    def keys(self) -> Any:
        _guarded()
        return super().keys()

    def values(self) -> Any:
        _guarded()
        return super().values()


class HostileList(list):  # type: ignore[type-arg]
    def __iter__(self) -> Any:
        _guarded()
        return super().__iter__()

    def __len__(self) -> int:
        _guarded()
        return super().__len__()

    def __getitem__(self, index: Any) -> Any:
        _guarded()
        return super().__getitem__(index)


class HostileStr(str):
    def __hash__(self) -> int:
        _guarded()
        return super().__hash__()

    def __eq__(self, other: object) -> bool:
        _guarded()
        return super().__eq__(other)

    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        _guarded()
        return super().encode(*args, **kwargs)


def _warning() -> dict[str, Any]:
    return {"code": "bad_seen", "message": "checked by bad"}


# hook -> its answers: the hostile object at the top, and inside an answer of the right shape
HOSTILE: dict[str, list[Any]] = {
    "agent_link_resolve_address": [lambda: HostileDict(address="good:one", via="role:lead"),
                                   lambda: {"address": "good:one", "via": "role:lead", "metadata": HostileDict(x=1)}],
    "agent_link_resolve_elsewhere": [lambda: HostileDict(metadata={}), lambda: {"metadata": HostileDict(x=1)},
                                     lambda: {"metadata": {"deep": [HostileDict(x=1)]}}],
    "agent_link_before_send": [lambda: HostileList([_warning()]), lambda: [HostileDict(_warning())],
                               lambda: [{**_warning(), "details": HostileDict(x=1)}]],
    "agent_link_before_store": [lambda: HostileStr("01J00000000000000000000000")],
    "agent_link_render_envelopes": [lambda: HostileDict(), lambda: {"x": EnvelopeContribution(HostileDict(via="role:x"), [])},
                                    lambda: {"x": EnvelopeContribution({}, HostileList([render_element("bad-note", [])]))}],
    "agent_link_health": [lambda: ("bad", HostileDict(ok=True)), lambda: ("bad", {"ok": [HostileDict(x=1)]}),
                          lambda: HostileList(["bad", {"ok": True}])],
    "agent_link_check_recipient": [lambda: HostileDict(known=True), lambda: {"known": False, "warning": HostileDict(_warning())}],
    "agent_link_held_messages": [lambda: HostileList(["x"]), lambda: [HostileStr("x")]],
    "agent_link_present_sessions": [lambda: HostileList([Session("plain:bad", "plain", "bad")]),
                                    lambda: [Session("plain:bad", "plain", "bad", extra=HostileDict(x=1))]],
    "agent_link_suggest_addresses": [lambda: HostileList(["plain:bad"]), lambda: [HostileStr("plain:bad")]],
    "agent_link_session_roles": [lambda: HostileDict({"good:one": ["lead"]}), lambda: {"good:one": HostileList(["lead"])}],
    "agent_link_server_tasks": [lambda: HostileList([])],
    "agent_link_listed_tools": [lambda: HostileList(["good_echo"])],
    "agent_link_push_notice": [lambda: HostileStr("<agent-link-notice>read it</agent-link-notice>")],
}
HOSTILE_CASES = [(hook, k) for hook, answers in HOSTILE.items() for k in range(len(answers))]


def hostile_plugin(hook: str, k: int) -> object:
    """A plugin implementing only ``hook``, answering its ``k``-th hostile answer."""
    def impl(self: Any) -> Any:  # an implementation may take none of its hook's arguments
        return HOSTILE[hook][k]()

    impl.__name__ = hook
    return type("Hostile", (), {hook: hookimpl(impl)})()


@pytest.mark.anyio
@pytest.mark.parametrize(("hook", "k"), HOSTILE_CASES, ids=[f"{h.removeprefix('agent_link_')}-{k}" for h, k in HOSTILE_CASES])
async def test_a_hostile_answer_stays_in_its_plugin(hook: str, k: int, monkeypatch: pytest.MonkeyPatch) -> None:
    app, good = make_app(hostile_plugin(hook, k), monkeypatch, "hostile")
    try:
        await assert_core_serves(app, good)
        assert (await app.resolve_agent("good:nobody"))["status"] in ("not_found", "resolved")  # asks agent_link_resolve_elsewhere
        assert app.hooks.server_tasks() == [("good", good.background)]
        assert app.hooks.session_roles(["good:one"]) == {}  # list_agents asks it
        assert type(app.hooks.push_notice({"id": "x"}, 10_000, 5_000)) in (str, type(None))  # good's, or none: the envelope
        if hook == "agent_link_listed_tools":
            assert "good_echo" in app.hooks.listed_tools(None)
        assert_reported(app, hook)
    finally:
        await app.aclose()


class HostileHarness(BadHarness):
    """A harness answering ``method`` with a hostile object inside an answer of the right type."""

    def _m(self, method: str, wrong: Any, fine: Any) -> Any:
        if method != self.method:
            return fine
        return {"list_sessions": lambda: SessionListing([Session("bad:one", "bad", "one")], provider=HostileDict(available=True)),
                "get_session": lambda: Session("bad:one", "bad", "one", receive=HostileDict(pull=True)),
                "deliver": lambda: Delivery(delivered=True, via="bad-push", evidence=HostileDict(echo=1)),
                "health": lambda: HostileDict(sessions=1)}[method]()


@pytest.mark.anyio
@pytest.mark.parametrize("method", ["list_sessions", "get_session", "deliver", "health"])
async def test_a_hostile_harness_answer_stays_in_its_plugin(method: str, gate: Gate, monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = BadHarnessPlugin(method, "hostile", gate)
    plugin.harness = HostileHarness(method, "hostile", gate)
    app, good = make_app(plugin, monkeypatch, "hostile")
    try:
        await assert_core_serves(app, good)
        if method != "get_session":  # mail to its sessions is still stored
            out = await app.send(caller=GOOD_ONE, to="bad:one", body="for bad")
            assert app.mailbox.get_row(out.message["id"]) is not None
        assert (await app.resolve_agent("bad:one"))["status"] in ("resolved", "not_found")
        assert_reported(app, method)
    finally:
        await app.aclose()


@pytest.mark.anyio
async def test_a_hostile_tool_result_is_withheld_naming_its_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    async def hostile(app: App, args: dict[str, Any], call: Any) -> dict[str, Any]:
        return {"echo": "x", "nested": HostileDict(x=1)} if args.get("text") else HostileDict(echo="x")

    class Tools:
        @hookimpl
        def agent_link_register_tools(self, register: Any) -> None:
            register(ToolSpec("bad_echo", "Echo.", {"type": "object", "properties": {"text": {"type": "string"}}},
                              {"echo": {"type": "string"}}, hostile))

    app, good = make_app(Tools(), monkeypatch, "hostile")
    try:
        for args in ({}, {"text": "nested"}):
            result = await run_tool(app, app.hooks.tools()["bad_echo"], args, {})
            assert result["ok"] is False and result["error"]["details"]["plugin"] == "bad", result
        await assert_core_serves(app, good)
        assert_reported(app, "tool bad_echo")
    finally:
        await app.aclose()


@pytest.mark.anyio
async def test_an_envelope_plugin_cannot_change_the_messages_of_the_plugins_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The messages of an envelope read are read-only: a plugin changing one (at the top or in its nested metadata) fails
    alone, and the next plugin and the reader see each message as stored."""
    seen: list[Any] = []

    def changer(change: Any) -> object:
        class Changer:
            @hookimpl(tryfirst=True)
            def agent_link_render_envelopes(self, messages: Any) -> None:
                for message in messages:
                    change(message)
        return Changer()

    def nested_list(message: Any) -> None:
        message["metadata"]["tag"]["deep"].append("forged")

    class Marker:
        @hookimpl
        def agent_link_render_envelopes(self, messages: Any) -> dict[str, EnvelopeContribution]:
            seen.extend((m["body"], m["from"], m["metadata"]["tag"]["name"], list(m["metadata"]["tag"]["deep"])) for m in messages)
            return {m["id"]: EnvelopeContribution(elements=[render_element("seen", [])]) for m in messages}

    changes = {"top": lambda m: m.__setitem__("body", "forged"), "metadata": lambda m: m["metadata"].__setitem__("tag", {}),
               "nested": lambda m: m["metadata"]["tag"].update(name="forged"), "list": nested_list,
               "deleted": lambda m: m.pop("from")}
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "")
    app = App.create(extra_plugins=(("marker", Marker()), *((name, changer(change)) for name, change in changes.items())))
    try:
        me = Caller("test:alice", "config", "test")
        for body in ("one", "two"):
            await app.send(caller=me, to="test:bob", body=body, metadata={"tag": {"name": "kept", "deep": [1]}})
        read = app.inbox(Caller("test:bob", "config", "test"))
        assert read["renderedBlock"].count("<seen />") == 2 and "forged" not in read["renderedBlock"]
        assert [m["id"] for m in read["messages"]] and "forged" not in json.dumps(read)
        assert seen == [("one", "test:alice", "kept", [1]), ("two", "test:alice", "kept", [1])]
        assert sorted(p["plugin"] for p in app.health()["plugins"]["problems"]) == sorted(changes)
    finally:
        await app.aclose()
@pytest.mark.timeout(300, method="thread")  # SIGALRM stays the boundary's, as in the MCP server
def test_an_overrun_being_unwound_is_not_interrupted_again_where_it_cannot_be_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    """The timer repeats each second until the overrunning call returns; while its interruption is still being unwound
    (the plugin's cleanup, slow on a starved machine, here a weakref callback as a collection runs them) it is not raised
    again: raised inside such a callback it could not propagate ('Exception ignored in ...' on stderr; found by a stress
    run on a loaded machine, where a hang test failed on it)."""
    import sys
    import time
    import weakref

    from agent_link_core import boundary

    boundary.watch_interrupts()
    if boundary._arm(60) is None:
        pytest.skip("another handler owns SIGALRM in this process")
    boundary._disarm(boundary._frames[-1])
    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)

    class Held:
        pass

    def slow_cleanup(ref: Any) -> None:  # longer than the timer's one-second repeat
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            pass

    def hang() -> str:
        try:
            time.sleep(30)
        finally:
            held = Held()
            ref = weakref.ref(held, slow_cleanup)  # noqa: F841 (kept alive: its callback runs)
            del held  # the callback runs now
        return "never"

    guard = boundary.Boundary(timeout_ms=200)
    assert guard.call("bad", "agent_link_on_event", hang, default="fallback") == "fallback"
    assert unraisable == [] and ("bad", "agent_link_on_event") in guard.hung
@pytest.mark.installed_plugins("search")
def test_failures_in_other_processes_are_counted_and_said_as_they_stand_now(isolated_env: Any) -> None:
    """One line per hook, with the latest error and how many processes met it: each new failing process changes
    both (the line kept the first error, and counted only the processes that said exactly that)."""
    import os
    import subprocess
    import sys

    from agent_link_testing.cli_runner import run_main

    def fail_elsewhere(error: str) -> None:  # what a process records the first time a hook of a plugin fails in it
        code = ("import sys; from agent_link_core import boundary; boundary.append_problem(sys.argv[1], {'plugin': 'search', "
                "'hook': 'agent_link_on_event', 'error': sys.argv[2], 'fix': 'Update it.', 'disabled': False})")
        subprocess.run([sys.executable, "-c", code, os.environ["AGENT_LINK_STATE_DIR"], error], check=True, timeout=60)

    def said() -> list[str]:
        return [p["message"] for p in json.loads(run_main("health", "--json").stdout)["problems"] if p.get("plugin") == "search"]

    os.makedirs(os.environ["AGENT_LINK_STATE_DIR"], exist_ok=True)
    fail_elsewhere("RuntimeError: boom 1")
    assert said() == ["agent_link_on_event: RuntimeError: boom 1 (in 1 other process in the last day)"]
    fail_elsewhere("RuntimeError: boom 2")
    fail_elsewhere("RuntimeError: boom 2")
    assert said() == ["agent_link_on_event: RuntimeError: boom 2 (in 3 other processes in the last day)"]


@pytest.mark.timeout(300, method="thread")  # SIGALRM stays the boundary's, as in the MCP server
def test_a_hook_under_the_write_lock_is_cut_at_its_own_budget_inside_a_longer_call(tmp_path: Any) -> None:
    """In the MCP server a hook under the write lock (``agent_link_record_event`` while a send stores) runs inside the tool
    call's step, armed with the whole hook budget: its shorter budget under the lock brings the one timer forward, so its
    hang ends before other processes' writes give up (found by review: it waited for the outer step's 30 s deadline)."""
    import sqlite3
    import time

    from agent_link_core import boundary

    boundary.watch_interrupts()
    outer = boundary._arm(60)  # the tool call's step
    if outer is None:
        pytest.skip("another handler owns SIGALRM in this process")
    conn = sqlite3.connect(tmp_path / "db", isolation_level=None)
    guard = boundary.Boundary(timeout_ms=30_000)
    guard.held, guard.locked_ms = conn, 300
    conn.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        assert guard.call("bad", "agent_link_record_event", time.sleep, 30, default="fallback") == "fallback"
        assert time.monotonic() - started < 10 and ("bad", "agent_link_record_event") in guard.hung
        assert boundary._frames == [outer]
    finally:
        conn.execute("ROLLBACK")
        conn.close()
        boundary._disarm(outer)
