"""Every hookspec is documented and exercised: a test plugin implements each one and the
core is driven through the App so each hook really gets called."""

from __future__ import annotations

import inspect
import itertools
import json
import re
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from agent_link_core import hookimpl, hookspecs
from agent_link_core.boundary import Refused, expect
from agent_link_core.lazy import hookspec
from agent_link_core.app import App
from agent_link_core.config import Setting
from agent_link_core.envelope import render_element
from agent_link_core.errors import AgentLinkError
from agent_link_core.harness import Delivery, Harness, OutputBudget, SessionListing
from agent_link_core.mailbox import new_message_id
from agent_link_core.records import EnvelopeContribution
from agent_link_core.model import Caller, Session
from agent_link_core.store import Migration
from agent_link_core.tools.registry import ToolSpec
from agent_link_testing.harnesses import HarnessPlugin

SPEC_NAMES = sorted(n for n, f in vars(hookspecs).items() if n.startswith("agent_link_") and callable(f))


def test_every_hookspec_is_documented() -> None:
    assert len(SPEC_NAMES) >= 10
    for name in SPEC_NAMES:
        doc = inspect.getdoc(getattr(hookspecs, name)) or ""
        assert "Called" in doc, f"{name} must say when it is called"
        params = inspect.signature(getattr(hookspecs, name)).parameters
        for param in params:
            assert f":param {param}:" in doc, f"{name} must document {param}"


def test_every_hookspec_is_implemented_by_a_test() -> None:
    text = "\n".join(p.read_text() for p in Path(__file__).parent.glob("test_*.py"))
    for name in SPEC_NAMES:
        assert re.search(rf"def {name}\(", text), f"no test implements {name}"


class EchoHarness(Harness):
    """A harness whose sessions receive pushes instantly (a fake host)."""

    name = "fake"

    def __init__(self) -> None:
        self.pushed: list[tuple[str, str, dict[str, Any]]] = []

    def identify_caller(self, meta: Any, env: Any) -> Caller | None:
        thread = meta.get("fakeSession")
        # this fake host names its caller in the call itself: it proves it (Caller.evidence)
        return Caller(f"fake:{thread}", "runtime_context", "fake", evidence="the fake host said so in the call") if thread else None

    async def list_sessions(self, *, include_archived: bool = False, limit: int = 200) -> SessionListing:
        return SessionListing([Session("fake:one", "fake", "one", title="First fake", last_activity_ms=2),
                               Session("fake:two", "fake", "two", title="Second fake", last_activity_ms=1)])

    async def get_session(self, session_id: str) -> Session | None:
        return next((s for s in (await self.list_sessions()).sessions if s.id == session_id), None)

    async def deliver(self, message: dict[str, Any], envelope: str, options: Any) -> Delivery:
        self.pushed.append((message["id"], envelope, dict(options)))
        return Delivery(delivered=True, via="fake-push", state="pushed", evidence={"echo": message["id"]}, fields={"action": "pushed"})


class Recorder:
    """Implements every hook and records the calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.events: list[Any] = []
        self.listed: list[list[dict[str, Any]]] = []
        self.read_by: list[str] = []  # the addresses agent_link_inbox_read was told of
        self.opened: list[str] = []  # the state dirs of the Apps agent_link_app_opened was told of
        self.holding: dict[str, set[str]] = {}  # recipient -> senders whose mail a "wait" of it returns (agent_link_held_messages)
        self.harness = EchoHarness()

    @hookimpl
    def agent_link_register_harnesses(self, register: Any) -> None:
        self.calls.append("harnesses")
        register(self.harness)

    @hookimpl
    def agent_link_register_tools(self, register: Any) -> None:
        async def handler(app: App, args: dict[str, Any], call: Any) -> dict[str, Any]:
            return {"echo": args.get("text", "")}

        register(ToolSpec("fake_echo", "Echo.", {"type": "object", "properties": {"text": {"type": "string"}},
                                                 "additionalProperties": False}, {"echo": {"type": "string"}}, handler))

    @hookimpl
    def agent_link_register_settings(self, register: Any) -> None:
        register(Setting("AGENT_LINK_FAKE_FLAG", "flag", False, aliases=("FAKE_OLD_FLAG",)))

    @hookimpl
    def agent_link_register_commands(self, cli: click.Group) -> None:
        @cli.command("fake-hello")
        def fake_hello() -> None:
            click.echo("hello from the fake plugin")

    @hookimpl
    def agent_link_schema(self) -> list[Migration]:
        return [Migration("fake", 1, "CREATE TABLE fake_things (id INTEGER PRIMARY KEY);")]

    @hookimpl
    def agent_link_resolve_address(self, address: str, caller_address: str) -> dict[str, Any] | None:
        if address == "role:lead":
            return {"address": "fake:one", "via": "role:lead", "metadata": {"roleName": "lead"}}
        if address == "role:nobody":
            raise AgentLinkError("not_found", "nobody holds role:nobody", {"role": "role:nobody"})
        if address == "team:elsewhere":  # served by a process this plugin knows of, not on this machine
            return {"address": address, "metadata": {}, "served": True}
        return None

    @hookimpl
    def agent_link_resolve_elsewhere(self, address: str, app: App) -> Any:
        if address == "fake:far":  # a session of the fake host that another place serves
            return {"metadata": {"farAway": "box2"}, "session": {"title": "Far fake", "place": "box2"}}
        if address == "fake:garbled":
            return ["not", "a", "claim"]
        return None

    @hookimpl
    def agent_link_before_send(self, message: Any, context: Any, app: App) -> list[dict[str, Any]] | None:
        if message.body == "forbidden":
            raise AgentLinkError("permission_denied", "refused by policy", {"reason": "test_policy"})
        message.metadata["checkedBy"] = "recorder"
        context.result["roleProcedure"] = {"name": "lead", "version": 2, "textIncluded": True}
        assert app.mailbox is not None
        return [{"code": "direct_coordination", "message": "seen"}] if context.via is None else None

    @hookimpl
    def agent_link_before_store(self, message: Any, context: Any, conn: Any) -> str | None:
        assert conn.in_transaction  # under the write lock: what concurrent sends stored counts
        if message.body == "stored-forbidden":
            raise AgentLinkError("permission_denied", "refused in the store", {"reason": "test_store"})
        if message.body in ("again", "garbled") and not context.chosen_id:
            earlier = conn.execute("SELECT id FROM messages WHERE body = ? ORDER BY sent_at LIMIT 1", (message.body,)).fetchone()
            return "01ARZ3NDEKTSV4RRFFQ69G5FAV" if message.body == "garbled" else earlier[0] if earlier else None
        return None

    @hookimpl
    def agent_link_render_envelopes(self, messages: list[dict[str, Any]]) -> dict[str, EnvelopeContribution]:
        return {m["id"]: EnvelopeContribution({"procedure": "lead@2"}, [render_element("procedure", [("name", "lead"), ("version", "2")], "Do <this>.")])
                for m in messages if m["metadata"].get("roleName")}

    @hookimpl
    def agent_link_on_event(self, event: Any) -> None:
        self.events.append(event)
        if event.kind == "delivered":
            raise RuntimeError("an observer failing must not undo anything")

    @hookimpl
    def agent_link_health(self, app: App) -> tuple[str, dict[str, Any]]:
        return "fake", {"ok": True, "db": app.config.db_path}

    @hookimpl
    def agent_link_session_roles(self, addresses: list[str]) -> dict[str, list[str]] | None:
        if "fake:broken" in addresses:
            raise RuntimeError("a roles plugin failing must not fail the listing")
        return {"fake:one": ["lead"]} if "fake:one" in addresses else None

    @hookimpl
    def agent_link_sessions_listed(self, sessions: list[dict[str, Any]]) -> None:
        self.listed.append(sessions)
        if any(s["address"] == "fake:two" for s in sessions) and len(self.listed) > 1:
            raise RuntimeError("an observer of listings failing must not fail the listing")

    @hookimpl
    def agent_link_inbox_read(self, address: str) -> None:
        self.read_by.append(address)

    @hookimpl
    def agent_link_app_opened(self, app: App) -> None:
        self.opened.append(app.config.state_dir)
        if app.config.get("AGENT_LINK_FAKE_FLAG") and len(self.opened) > 1:
            raise RuntimeError("an observer of an App's opening failing must not fail the opening")

    @hookimpl
    def agent_link_held_messages(self, address: str, rows: list[Any] | None, app: App) -> set[str] | str | None:
        if address == "fake:garbled":
            return "not a collection of ids"
        senders = self.holding.get(address)
        if not senders:
            return None  # nobody waits: no message read
        rows = app.mailbox.open_for(address, 50, undelivered_only=True) if rows is None else rows
        return {row["id"] for row in rows if row["from_addr"] in senders}

    def wait_for_reply(self, caller: Caller, message_id: str, timeout_ms: int) -> Any:  # as the waits plugin's own wait
        self.calls.append(f"wait for {message_id} by {caller.address} {timeout_ms} ms")
        if timeout_ms == 1234:
            raise RuntimeError("a wait failing must not lose the message it waits on")

        async def answer() -> dict[str, Any]:
            return {"outcome": "timeout", "timedOut": True, "waitedMs": timeout_ms, "warnings": [{"code": "note", "message": "waited"}]}

        return answer()

    @hookimpl
    def agent_link_extend_tools(self) -> dict[str, Any]:
        return {"message_agent": {"input": {"waitForReply": {"type": "boolean"}, "timeoutMs": {"type": "integer"}},
                                  "output": {"wait": {"type": "object"}}, "description": " waitForReply waits."}}

    @hookimpl
    def agent_link_tool_send(self, arguments: dict[str, Any], recipient: str, send: Any, call: Any, app: App) -> Any:
        if not arguments.get("waitForReply"):
            return None

        async def carry() -> dict[str, Any]:  # as the waits plugin: send under an id of its own, then wait for the answer
            result = await send(new_message_id(), wait_for_reply=True)
            self.calls.append(f"tool send to {recipient}")
            if arguments["timeoutMs"] == 999:
                raise RuntimeError("a plugin failing after the send must not send twice")
            try:
                waited = await self.wait_for_reply(call.caller, result["messageId"], arguments["timeoutMs"])
            except RuntimeError:
                waited = None
            if waited is None:
                call.warnings.append({"code": "plugin_failed", "message": "the wait failed"})
                return result
            call.warnings.extend(waited.pop("warnings", []))
            return {**result, "wait": waited}

        return carry()

    @hookimpl
    def agent_link_check_recipient(self, address: str, require_known: bool) -> dict[str, Any] | None:
        if address in self.read_by:  # as the presence plugin: an address whose inbox was read is served
            return {"known": True}
        if address == "team:garbled":
            return {"known": "perhaps"}
        if require_known:
            raise AgentLinkError("not_found", f"{address} never read its mail", {"query": address, "candidates": []})
        return {"known": False, "warning": {"code": "unknown_address", "message": f"{address} never read its mail"}}

    @hookimpl
    def agent_link_present_sessions(self, harness: str) -> list[Session] | None:
        if harness == "broken":
            raise RuntimeError("a plugin failing to list must not fail the listing")
        return [Session(a, "team", a.split(":", 1)[1], surface=("address",)) for a in self.read_by
                if a.startswith("team:") and harness in ("all", "team")] or None

    @hookimpl
    def agent_link_suggest_addresses(self, query: str) -> list[str] | None:
        return [a for a in self.read_by if a.replace(":", "") == query] or None

    @hookimpl
    def agent_link_listed_tools(self, tools: dict[str, ToolSpec], host: str | None) -> list[str] | None:
        if host == "broken":
            raise RuntimeError("a plugin failing to choose must not empty tools/list")
        return [name for name in tools if name != "fake_echo"] if host == "fake" else None

    @hookimpl
    def agent_link_server_tasks(self, app: App) -> list[Any]:
        async def note_start() -> None:
            self.calls.append(f"server task ran with {app.config.db_path}")

        async def fail() -> None:
            raise RuntimeError("a failing server task must not take the server down")

        return [note_start, fail]


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def app(recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> App:
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "codex claude roles receipts")
    monkeypatch.setenv("FAKE_OLD_FLAG", "yes")
    application = App.create(extra_plugins=(("fake", recorder),))
    yield application
    application.close()


@pytest.mark.anyio
async def test_registration_hooks(app: App, recorder: Recorder) -> None:
    assert "fake" in app.harnesses and "fake_echo" in app.hooks.tools()
    assert app.config.get("AGENT_LINK_FAKE_FLAG") is True
    assert app.config.env_report()["deprecated"] == [{"name": "FAKE_OLD_FLAG", "canonical": "AGENT_LINK_FAKE_FLAG"}]
    assert app.store.conn.execute("SELECT COUNT(*) FROM fake_things").fetchone()[0] == 0
    assert app.health()["sections"]["fake"] == {"ok": True, "db": app.config.db_path}


@pytest.mark.anyio
async def test_server_tasks_hook_runs_guarded(app: App, recorder: Recorder) -> None:
    from agent_link_core.server import _guarded

    mine = [(plugin, task) for plugin, task in app.hooks.server_tasks() if task.__qualname__.startswith("Recorder.")]
    assert [task.__name__ for _, task in mine] == ["note_start", "fail"]
    for plugin, task in mine:
        await _guarded(app, plugin, "agent_link_server_tasks", task)  # how `agent-link mcp` runs each one
    assert f"server task ran with {app.config.db_path}" in recorder.calls
    [problem] = [p for p in app.hooks.boundary.report() if p["hook"] == "agent_link_server_tasks"]
    assert problem["plugin"] == mine[1][0] and "failing server task" in problem["error"] and not problem["disabled"]


def test_listed_tools_hook_chooses_what_a_server_lists(app: App) -> None:
    registered = list(app.hooks.tools())
    assert list(app.hooks.listed_tools(None)) == registered  # no answer: every tool
    assert list(app.hooks.listed_tools(" fake ")) == [n for n in registered if n != "fake_echo"]  # order kept
    assert list(app.hooks.listed_tools("broken")) == registered  # a failing answer is left out
    [problem] = [p for p in app.hooks.boundary.report() if p["hook"] == "agent_link_listed_tools"]
    assert "must not empty tools/list" in problem["error"] and not problem["disabled"]


def test_register_commands_hook(recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_link_core import cli as cli_mod
    from agent_link_testing.cli_plugins import add_cli_plugins

    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "codex claude roles receipts")
    add_cli_plugins(monkeypatch, ("fake", recorder))
    result = CliRunner().invoke(cli_mod.build_cli(), ["fake-hello"])
    assert result.exit_code == 0 and "hello from the fake plugin" in result.output


@pytest.mark.anyio
async def test_send_through_harness_resolve_and_render(app: App, recorder: Recorder) -> None:
    caller = app.caller({"fakeSession": "two"})
    assert caller.address == "fake:two" and caller.evidence and not caller.verified  # proved when it signs
    out = await app.send(caller=caller, to="role:lead", body="hello lead", anticipation="reply", options={"mode": "auto"})
    assert out.message["metadata"]["sender"] == {"source": "runtime_context", "verified": True}
    assert out.via == "role:lead"
    mid, envelope, options = recorder.harness.pushed[-1]
    assert options == {"mode": "auto"}
    assert 'via="role:lead"' in envelope and 'procedure="lead@2"' in envelope
    assert "Do &lt;this&gt;." in envelope
    row = app.mailbox.get_row(mid)
    assert row["recipient"] == "fake:one" and row["delivered_via"] == "fake-push"  # observer error did not undo it
    assert [e.kind for e in recorder.events][:2] == ["sent", "delivered"]
    assert out.warnings == []  # role-addressed: the recorder adds no warning


@pytest.mark.anyio
async def test_before_send_refuses_before_storing(app: App) -> None:
    caller = app.caller({"fakeSession": "two"})
    before = app.store.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
    with pytest.raises(AgentLinkError) as e:
        await app.send(caller=caller, to="fake:one", body="forbidden")
    assert e.value.code == "permission_denied"
    assert app.store.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == before
    ok = await app.send(caller=caller, to="fake:one", body="fine")
    assert ok.warnings[0]["code"] == "direct_coordination"
    assert ok.result_fields["roleProcedure"]["version"] == 2
    assert ok.message["metadata"]["checkedBy"] == "recorder"


@pytest.mark.anyio
async def test_before_store_refuses_or_names_the_message_a_send_retries(app: App) -> None:
    caller = app.caller({"fakeSession": "two"})
    count = "SELECT COUNT(*) FROM messages"
    with pytest.raises(AgentLinkError) as e:
        await app.send(caller=caller, to="team:x", body="stored-forbidden")
    assert e.value.details == {"reason": "test_store"} and app.store.conn.execute(count).fetchone()[0] == 0
    first = await app.send(caller=caller, to="team:x", body="again")
    retry = await app.send(caller=caller, to="team:x", body="again")
    assert first.created and not retry.created and retry.message["id"] == first.message["id"]
    # an id the caller chose, and an answer naming no stored message, store the message
    assert (await app.send(caller=caller, to="team:x", body="again", message_id=new_message_id())).created
    assert (await app.send(caller=caller, to="team:x", body="garbled")).created
    assert app.store.conn.execute(count).fetchone()[0] == 3


@pytest.mark.anyio
async def test_resolve_address_errors_propagate(app: App) -> None:
    with pytest.raises(AgentLinkError) as e:
        await app.send(caller=app.caller({"fakeSession": "two"}), to="role:nobody", body="hi")
    assert e.value.code == "not_found"
    verdict = await app.resolve_agent("role:nobody")  # a verdict from the resolve tool, not an error
    assert verdict["status"] == "not_found" and verdict["via"] == "role:nobody"


@pytest.mark.anyio
async def test_resolve_address_served_elsewhere_is_not_unknown(app: App) -> None:
    caller = app.caller({"fakeSession": "two"})
    unknown = await app.send(caller=caller, to="team:nowhere", body="hi")
    assert unknown.address_warning is not None and unknown.address_warning["code"] == "unknown_address"
    served = await app.send(caller=caller, to="team:elsewhere", body="hi", require_known=True)
    assert served.address_warning is None and served.message["recipient"] == "team:elsewhere"
    with pytest.raises(AgentLinkError) as e:
        await app.send(caller=caller, to="team:nowhere", body="hi again", require_known=True)
    assert e.value.code == "not_found"
    from agent_link_core.boundary import _check_resolution  # the answer's shape, as the boundary checks it

    assert _check_resolution({"address": "team:x", "served": "yes"}, "p") == "returned a resolution whose 'served' is not a boolean"
    assert _check_resolution({"address": "team:x", "served": False}, "p") is None


def test_an_app_that_opens_tells_plugins_and_a_failing_one_is_only_reported(app: App, recorder: Recorder) -> None:
    """agent_link_app_opened: told once per App.create, with the App open; a plugin that fails there is reported and the
    App opens all the same."""
    assert recorder.opened == [app.config.state_dir] and app.store is not None
    again = App.create(extra_plugins=(("fake", recorder),))
    try:
        assert recorder.opened == [app.config.state_dir] * 2 and again.inbox(Caller("team:bob", "explicit"), mark=False) is not None
        assert [p["hook"] for p in again.hooks.boundary.report()] == ["agent_link_app_opened"]
    finally:
        again.close()


@pytest.mark.anyio
async def test_inbox_read_tells_plugins_who_reads_and_they_list_judge_and_suggest_plain_addresses(app: App, recorder: Recorder) -> None:
    """A marking inbox read is told (agent_link_inbox_read; a peek is not); the plugin's live plain addresses are
    listed and resolved (agent_link_present_sessions), its verdict on a recipient is the send's warning or refusal
    (agent_link_check_recipient), and its suggestions point a bare id that found nothing (agent_link_suggest_addresses)."""
    bob, alice = Caller("team:bob", "explicit"), app.caller({"fakeSession": "two"})
    app.inbox(bob, mark=False)
    assert recorder.read_by == []
    app.inbox(bob)
    assert recorder.read_by == ["team:bob"]
    assert "team:bob" in [s["address"] for s in (await app.list_agents())["sessions"]]
    assert [s["address"] for s in (await app.list_agents(harness="team"))["sessions"]] == ["team:bob"]
    assert (await app.resolve_agent("bob"))["best"]["address"] == "team:bob"
    assert app.hooks.present_sessions("broken") == []  # a failing plugin lists nothing; the listing stands
    assert any(p["hook"] == "agent_link_present_sessions" for p in app.hooks.boundary.report())
    known = await app.send(caller=alice, to="team:bob", body="hi", require_known=True)
    assert known.address_warning is None
    unknown = await app.send(caller=alice, to="team:bobb", body="hi")
    assert unknown.address_warning == {"code": "unknown_address", "message": "team:bobb never read its mail"}
    assert app.outbox.unseen_address("team:bobb") == unknown.address_warning  # as a role's holder is checked
    garbled = await app.send(caller=alice, to="team:garbled", body="hi")  # a wrong answer counts as none
    assert garbled.address_warning is None
    assert any(p["hook"] == "agent_link_check_recipient" and "'known'" in p["error"] for p in app.hooks.boundary.report())
    with pytest.raises(AgentLinkError) as e:
        await app.directory.resolve_target("teambob", alice)  # no session has that id: the plugin's suggestion
    assert e.value.code == "not_found" and e.value.details["candidates"] == [{"address": "team:bob"}]
    assert "Did you mean team:bob?" in (e.value.hint or "")


@pytest.mark.anyio
async def test_without_a_plugin_plain_addresses_are_neither_listed_nor_judged(isolated_env: Path) -> None:
    """No plugin answers the plain-address hooks: nothing lists them, a send carries no warning, requireKnown refuses
    every plain address (nothing knows one is served: the hint names the presence plugin), a bare id gets no
    suggestion; an address a plugin says is served elsewhere, or a harness's, is not refused."""
    app = App.create()
    try:
        alice = Caller("team:alice", "explicit")
        app.inbox(Caller("team:bob", "explicit"))
        assert (await app.list_agents())["sessions"] == [] and app.hooks.present_sessions("all") == []
        assert (await app.send(caller=alice, to="team:bob", body="hi")).address_warning is None
        with pytest.raises(AgentLinkError) as e:
            await app.send(caller=alice, to="team:bob", body="again", require_known=True)
        assert (e.value.code, e.value.details) == ("not_found", {"query": "team:bob", "candidates": []})
        assert "agent-link-presence" in (e.value.hint or "")
        assert app.store.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 1
        with pytest.raises(AgentLinkError) as e:
            await app.directory.resolve_target("teambob", alice)
        assert e.value.details["candidates"] == [] and "Did you mean" not in (e.value.hint or "")
    finally:
        app.close()


@pytest.mark.anyio
async def test_resolve_elsewhere_claims_a_session_the_harness_does_not_know(app: App, recorder: Recorder) -> None:
    caller = app.caller({"fakeSession": "two"})
    pushed = len(recorder.harness.pushed)
    out = await app.send(caller=caller, to="fake:far", body="to the far one", anticipation="reply")
    # stored for the claiming plugin to carry, with its metadata; the local harness pushed nothing
    assert out.message["recipient"] == "fake:far" and out.address_warning is None
    assert out.message["metadata"]["farAway"] == "box2" and out.message["metadata"]["elsewhere"] is True
    assert len(recorder.harness.pushed) == pushed and out.delivery is not None and out.delivery.state == "queued"
    assert not out.delivery.warnings and app.mailbox.get_row(out.message["id"])["delivered_via"] is None
    # a later push (a wait ending, a retry) leaves it alone too
    assert (await app.push(app.mailbox.get_row(out.message["id"]), {})).state == "queued"
    assert len(recorder.harness.pushed) == pushed
    verdict = await app.resolve_agent("fake:far")
    assert verdict["status"] == "resolved"
    assert verdict["best"] == {"address": "fake:far", "harness": "fake", "title": "Far fake", "place": "box2"}
    # a session the local harness knows is never asked about; an unclaimed unknown one stays not_found
    assert "elsewhere" not in (await app.send(caller=caller, to="fake:one", body="near")).message["metadata"]
    assert (await app.resolve_agent("fake:missing"))["status"] == "not_found"
    # a malformed claim is the plugin's problem, reported; the address stays not_found
    with pytest.raises(AgentLinkError) as e:
        await app.send(caller=caller, to="fake:garbled", body="hi")
    assert e.value.code == "not_found"
    assert any(p.get("plugin") == "fake" and "agent_link_resolve_elsewhere" in json.dumps(p) for p in app.hooks.boundary.report())


@pytest.mark.anyio
async def test_directory_ranking_and_unknown_ids(app: App) -> None:
    verdict = await app.resolve_agent("Second")
    assert verdict["status"] == "resolved" and verdict["best"]["address"] == "fake:two"
    assert (await app.resolve_agent("fake"))["status"] == "ambiguous"
    assert (await app.resolve_agent("zzz"))["status"] == "not_found"
    assert (await app.resolve_agent("one"))["best"]["address"] == "fake:one"
    listing = await app.list_agents()
    assert [s["address"] for s in listing["sessions"]] == ["fake:one", "fake:two"]
    with pytest.raises(AgentLinkError) as e:
        await app.target_address("fake:missing", Caller())
    assert e.value.code == "not_found"


@pytest.mark.anyio
async def test_harness_lifecycle_attach_and_aclose(recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[str] = []

    async def aclose() -> None:
        closed.append("fake")

    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "codex claude roles receipts")
    app = App.create(extra_plugins=(("fake", recorder),))
    assert recorder.harness.app is app  # attached before anything else
    recorder.harness.aclose = aclose  # type: ignore[method-assign]
    await app.aclose()
    assert closed == ["fake"]


@pytest.mark.anyio
async def test_push_failure_keeps_the_message_queued(app: App, recorder: Recorder) -> None:
    async def broken(*args: Any) -> Delivery:
        raise RuntimeError("harness bug")

    recorder.harness.deliver = broken  # type: ignore[method-assign]
    out = await app.send(caller=app.caller({"fakeSession": "two"}), to="fake:one", body="still stored")
    assert out.delivery is not None and out.delivery.warnings[0]["code"] == "internal_error"
    assert app.mailbox.get_row(out.message["id"])["delivered_at"] is None


@pytest.mark.anyio
async def test_a_plugin_waits_for_the_reply_and_one_that_fails_loses_no_message(app: App, recorder: Recorder) -> None:
    """A plugin adds waitForReply to message_agent (agent_link_extend_tools) and carries out the sends holding it
    (agent_link_tool_send), waiting its own way: its answer is the result's ``wait``; a wait that
    fails, or the plugin failing after the send, leaves the message sent once, with a plugin_failed warning."""
    from agent_link_core.tools.registry import run_tool

    spec, me = app.hooks.tools()["message_agent"], {"fakeSession": "two"}
    assert list(spec.input_schema["properties"])[-2:] == ["waitForReply", "timeoutMs"] and "wait" in spec.output_fields
    assert spec.description.endswith("an answer. waitForReply waits.")
    got = await run_tool(app, spec, {"to": "fake:one", "message": "ready?", "waitForReply": True, "timeoutMs": 2000}, me)
    assert got["ok"] and got["wait"]["outcome"] == "timeout" and got["wait"]["waitedMs"] == 2000, got
    assert f"wait for {got['messageId']} by fake:two 2000 ms" in recorder.calls and "tool send to fake:one" in recorder.calls
    assert "note" in [w["code"] for w in got["warnings"]]
    failed = await run_tool(app, spec, {"to": "fake:one", "message": "again?", "waitForReply": True, "timeoutMs": 1234}, me)
    assert failed["ok"] and "wait" not in failed and app.mailbox.get_row(failed["messageId"]) is not None, failed
    assert "plugin_failed" in [w["code"] for w in failed["warnings"]] and "note" not in [w["code"] for w in failed["warnings"]]
    before = len(app.mailbox.open_for("fake:one", 50))
    broken = await run_tool(app, spec, {"to": "fake:one", "message": "once?", "waitForReply": True, "timeoutMs": 999}, me)
    assert broken["ok"] and "plugin_failed" in [w["code"] for w in broken["warnings"]] and "wait" not in broken, broken
    assert len(app.mailbox.open_for("fake:one", 50)) == before + 1  # sent once, not again by the core
    plain = await run_tool(app, spec, {"to": "fake:one", "message": "no wait", "waitForReply": False}, me)
    assert plain["ok"] and "wait" not in plain


@pytest.mark.anyio
async def test_held_messages_are_left_to_the_wait_by_a_push_and_an_inbox_read(app: App, recorder: Recorder) -> None:
    """Mail a plugin says a running wait returns (agent_link_held_messages) is not pushed (a held_for_wait event says
    so) and an inbox read leaves it out, counting it in heldByActiveWait; other mail goes as usual; a wrong answer is a
    problem of its plugin and holds nothing."""
    from agent_link_core import reading
    from agent_link_core.sending import HELD_EVENT

    two, one = app.caller({"fakeSession": "two"}), Caller("fake:one", "explicit")
    recorder.holding["fake:one"] = {"fake:two"}
    held = await app.send(caller=two, to="fake:one", body="held for the wait")
    assert held.delivery is not None and held.delivery.state == "held_for_wait"
    assert app.mailbox.has_event(held.message["id"], HELD_EVENT)
    assert held.message["id"] not in [pushed[0] for pushed in recorder.harness.pushed]
    other = await app.send(caller=Caller("team:carol", "explicit"), to="fake:one", body="not held", anticipation="reply")
    assert other.message["id"] in [pushed[0] for pushed in recorder.harness.pushed]
    read = reading.inbox(app, one, limit=20, mark=True, include_open=True)
    assert [m["id"] for m in read["messages"]] == [other.message["id"]] and read["heldByActiveWait"] == 1
    assert app.hooks.held_messages("fake:one") == {held.message["id"]}
    recorder.holding.clear()  # the wait ended: nothing is held, and nothing was read to know it
    assert app.hooks.held_messages("fake:one") == set()
    assert app.hooks.held_messages("fake:garbled") == set()
    assert any(p["hook"] == "agent_link_held_messages" and "expected message ids" in p["error"] for p in app.hooks.boundary.report())


class Fitter:
    """Fits reads and pushes as ``answer(read)`` and ``notice(message, size)`` say (the budgets plugin's hooks)."""

    def __init__(self, answer: Any, notice: Any = None) -> None:
        self.answer, self.notice = answer, notice
        self.asked: list[tuple[bool, int, int]] = []

    @hookimpl
    def agent_link_fit_read(self, caller: Caller, read: Any) -> int | None:
        assert caller.address == "team:me"
        self.asked.append((read.page, read.start, read.stop))
        return self.answer(read)

    @hookimpl
    def agent_link_push_notice(self, message: dict[str, Any], size: int) -> str | None:
        return None if self.notice is None else self.notice(message, size)


_MAIL_IDS = itertools.count(1)


def _mail_for_me(app: App, n: int, body: str) -> list[str]:
    """``n`` messages to ``team:me`` with ids in the order they are stored."""
    from agent_link_core.records import OutgoingMessage

    peer = Caller("team:peer", "explicit")
    return [app.mailbox.store_message(OutgoingMessage(f"01J{k:023d}", peer, "team:me", "team:me", f"{body} {k}", "reply", None, None))[0]["id"]
            for k in itertools.islice(_MAIL_IDS, n)]


def test_without_a_fitting_plugin_a_read_returns_everything_unpaged(isolated_env: Path) -> None:
    """No plugin answers agent_link_fit_read: every message up to the limit, whatever its size, and a message read by id
    from an offset to its end; nothing is asked when there is no mail."""
    from agent_link_core import reading

    app, me = App.create(), Caller("team:me", "explicit")
    try:
        assert reading.inbox(app, me, limit=20, mark=True, include_open=True)["messages"] == []
        ids = _mail_for_me(app, 3, "x" * 60_000)
        read = reading.inbox(app, me, limit=20, mark=True, include_open=True)
        assert read["markedDelivered"] == ids and read["page"] is None and "warnings" not in read
        envelope = app.mailbox.envelope(app.mailbox.get_row(ids[0]))
        page = reading.inbox(app, me, limit=20, mark=True, include_open=True, message_id=ids[0], offset=10)
        assert page["page"] == {"messageId": ids[0], "offset": 10, "nextOffset": None, "totalChars": len(envelope)}
        assert page["renderedBlock"] == envelope[10:] and page["more"] is None
    finally:
        app.close()


def test_fit_read_chooses_how_much_a_read_returns_and_marks(isolated_env: Path) -> None:
    """agent_link_fit_read's answer: how many whole messages (only those marked), 0 pages the first message, and for a page
    where it ends (marked with its last page)."""
    from agent_link_core import reading

    fitter = Fitter(lambda read: read.start + 99 if read.page else min(read.stop, 1 if read.body_bytes < 100 else 0))
    app, me = App.create(extra_plugins=(fitter,)), Caller("team:me", "explicit")
    try:
        ids = _mail_for_me(app, 3, "short")
        read = reading.inbox(app, me, limit=20, mark=True, include_open=True)
        assert read["markedDelivered"] == ids[:1] and [m["id"] for m in read["messages"]] == ids[:1] and read["remainingCount"] == 2
        assert fitter.asked == [(False, 0, 3)]
        [big] = _mail_for_me(app, 1, "y" * 150)
        app.mailbox.mark_many_delivered(ids, "test")
        first = reading.inbox(app, me, limit=20, mark=True, include_open=False)
        assert first["page"]["nextOffset"] == 100 and first["markedDelivered"] == [] and len(first["renderedBlock"]) == 100
        rest = reading.inbox(app, me, limit=20, mark=True, include_open=True, message_id=big, offset=first["page"]["nextOffset"])
        assert rest["markedDelivered"] == ([big] if rest["page"]["nextOffset"] is None else [])
    finally:
        app.close()


@pytest.mark.parametrize("answer", [RuntimeError("no"), SystemExit(2), "all", 10**9, -1, True])
def test_a_failing_fit_read_leaves_the_read_whole_with_a_warning(isolated_env: Path, answer: Any) -> None:
    """A fitting plugin that raises (SystemExit too) or answers something other than a whole number within the draft's
    range counts as no answer: the read returns everything, says so with plugin_failed, and the fault is reported."""
    from agent_link_core import reading

    def fit(read: Any) -> Any:
        if isinstance(answer, BaseException):
            raise answer
        return answer

    app, me = App.create(extra_plugins=(("fitter", Fitter(fit)),)), Caller("team:me", "explicit")
    try:
        ids = _mail_for_me(app, 2, "z" * 1_000)
        for read in (reading.inbox(app, me, limit=20, mark=False, include_open=True),
                     reading.inbox(app, me, limit=20, mark=True, include_open=True, message_id=ids[0])):
            [warning] = read["warnings"]
            assert warning["code"] == "plugin_failed" and warning["details"] == {"plugin": "fitter", "hook": "agent_link_fit_read"}
        assert [m["id"] for m in read["messages"]] == ids[:1] and read["page"]["nextOffset"] is None and read["markedDelivered"] == ids[:1]
        assert any(p["plugin"] == "fitter" and p["hook"] == "agent_link_fit_read" for p in app.hooks.boundary.report())
    finally:
        app.close()


class SmallPushes(EchoHarness):
    """Pushes of at most 1,200 bytes."""

    output_budget = OutputBudget(tool_result_bytes=10_000, push_bytes=1_200)


@pytest.mark.anyio
@pytest.mark.parametrize("notice", [None, "notice", 42, "too long"])
async def test_push_notice_replaces_an_envelope_the_host_would_cut(isolated_env: Path, notice: str | int | None) -> None:
    """A push larger than the host's push_bytes sends agent_link_push_notice's text instead (announced, left queued);
    without an answer, or with a wrong one (reported), the envelope is pushed whole. A small push never asks."""
    texts = {"notice": lambda m, size: f"<agent-link-notice>{m['id']} is {size} bytes</agent-link-notice>",
             "too long": lambda m, size: "x" * 1_201, 42: lambda m, size: 42}
    asked: list[int] = []

    def answer(message: dict[str, Any], size: int) -> Any:
        asked.append(size)
        return texts[notice](message, size) if notice is not None else None

    harness = SmallPushes()
    app = App.create(extra_plugins=(HarnessPlugin(harness), ("fitter", Fitter(lambda read: None, answer))))
    try:
        small = await app.send(caller=Caller("team:peer", "explicit"), to="fake:one", body="hi")
        assert small.delivery is not None and small.delivery.delivered and asked == []
        sent = await app.send(caller=Caller("team:peer", "explicit"), to="fake:one", body="w" * 1_000)
        mid = sent.message["id"]
        size = len(app.mailbox.envelope(app.mailbox.get_row(mid)).encode("utf-8"))
        assert asked == [size] and sent.delivery is not None
        if notice == "notice":
            assert harness.pushed[-1][1] == f"<agent-link-notice>{mid} is {size} bytes</agent-link-notice>"
            assert sent.delivery.state == "announced" and app.mailbox.get_row(mid)["first_delivered_at"] is None
        else:
            assert harness.pushed[-1][1].startswith("<agent-link-message") and sent.delivery.delivered
        faulted = any(p["plugin"] == "fitter" and p["hook"] == "agent_link_push_notice" for p in app.hooks.boundary.report())
        assert faulted == (notice in (42, "too long"))
    finally:
        await app.aclose()


@pytest.mark.anyio
async def test_sessions_listed_observers_get_the_titles_and_cannot_fail_the_listing(app: App, recorder: Recorder) -> None:
    for _ in range(2):  # the second time the observer raises: the listing stands, the fault is reported
        listing = await app.list_agents()
        assert [s["address"] for s in listing["sessions"]] == ["fake:one", "fake:two"]
    assert recorder.listed[0] == [{"address": "fake:one", "title": "First fake"}, {"address": "fake:two", "title": "Second fake"}]
    assert len(recorder.listed) == 2
    assert any(p["hook"] == "agent_link_sessions_listed" for p in app.hooks.boundary.report())


def test_session_roles_are_merged_and_failures_contained(app: App) -> None:
    assert app.hooks.session_roles(["fake:one", "fake:two"]) == {"fake:one": ["lead"]}
    assert app.hooks.session_roles(["fake:broken"]) == {}


@pytest.mark.anyio
async def test_list_and_resolve_show_roles(app: App) -> None:
    from agent_link_core.model import Caller as _Caller
    from agent_link_core.tools import core_tools
    from agent_link_core.tools.registry import ToolCall

    call = ToolCall(meta={}, caller=_Caller())
    listed = await core_tools.list_agents(app, {"harness": "fake"}, call)
    assert {s["address"]: s["roles"] for s in listed["sessions"]} == {"fake:one": ["lead"], "fake:two": []}
    resolved = await core_tools.resolve_agent(app, {"query": "fake:one"}, call)
    assert resolved["best"]["roles"] == ["lead"]


@hookspec
def agent_link_register_notes(register: Any) -> None:
    """Contribute notes (a test plugin's hook). Called by :class:`Notes` when asked for its notes.

    :param register: call it with a note (anything with a ``name``).
    """


@hookspec(firstresult=True, refuses=True, check=expect(lambda r: isinstance(r, int), "expected a score"))
def agent_link_rate_note(note: str, app: App) -> int | None:
    """Rate a note (a test plugin's firstresult hook). Called by :class:`Notes` per note rated.

    :param note: the note's name.
    :param app: the App.
    :returns: a score, or None.
    :raises AgentLinkError: to refuse the note.
    """


class Notes:
    """A plugin that specifies hooks of its own and calls them (as the web plugin its panels, the legacy plugin its
    importers): its own records, checked by itself."""

    AGENT_LINK_HOOKSPECS = {__name__: ("agent_link_register_notes", "agent_link_rate_note")}

    @staticmethod
    def notes(app: App) -> dict[str, Any]:
        def check(record: Any) -> None:
            if not hasattr(record, "name"):
                raise Refused(f"registered a {type(record).__name__}", "Register notes.")

        return app.hooks.collect("note", "agent_link_register_notes", check)


class Writers:
    """Implements the hooks :class:`Notes` specifies."""

    def __init__(self) -> None:
        self.asked = 0

    @hookimpl
    def agent_link_register_notes(self, register: Any) -> None:
        self.asked += 1
        register(type("Note", (), {"name": "first"})())
        register("not a record the consumer takes")

    @hookimpl
    def agent_link_rate_note(self, note: str) -> Any:
        if note == "refused":
            raise AgentLinkError("permission_denied", "not that note")
        return {"bad": "score"} if note == "wrong" else len(note)


def plugins_app(monkeypatch: pytest.MonkeyPatch, *plugins: tuple[str, Any]) -> App:
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "")
    return App.create(extra_plugins=plugins)


def test_a_plugin_specifies_hooks_that_others_implement_guarded_as_the_cores(isolated_env: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    writers = Writers()
    app = plugins_app(monkeypatch, ("notes", Notes()), ("writers", writers))
    try:
        app.health()  # the core never calls a plugin's hook: the implementer just loads
        assert writers.asked == 0 and "writers" in app.hooks.loaded
        assert app.hooks.call("agent_link_rate_note", note="four") == 4  # firstresult: the answer, not a list
        with pytest.raises(AgentLinkError):  # the spec lets it refuse
            app.hooks.call("agent_link_rate_note", note="refused")
        assert app.hooks.call("agent_link_rate_note", note="wrong") is None  # the spec's check refuses the answer
        assert "expected a score" in json.dumps(app.hooks.boundary.report())
        assert Notes.notes(app) == {}  # a registration hook: a refused record leaves its plugin out
        assert any(p["plugin"] == "writers" and "registered a str" in p["error"] and p["disabled"] for p in app.hooks.boundary.report())
        assert writers.asked == 1
    finally:
        app.close()


class Misfit:
    @hookimpl
    def agent_link_rate_note(self, note: str, mood: str) -> int:
        return 1


class Optional:
    @hookimpl(optionalhook=True)
    def agent_link_rate_note(self, note: str) -> int:
        return 1


def test_a_plugins_hook_is_checked_when_called_and_unspecified_it_is_unknown_unless_optional(
        isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = plugins_app(monkeypatch, ("notes", Notes()), ("misfit", Misfit()))
    try:
        assert "misfit" in app.hooks.loaded  # its arguments are checked when the hook is first called
        assert app.hooks.call("agent_link_rate_note", note="x") is None
        assert "misfit" in app.hooks.failed and "takes mood" in app.hooks.failed["misfit"]
    finally:
        app.close()
    app = plugins_app(monkeypatch, ("misfit", Misfit()), ("optional", Optional()))  # no plugin specifies the hook
    try:
        assert "not an agent-link hook" in app.hooks.failed["misfit"]
        assert "optional" in app.hooks.loaded and app.hooks.call("agent_link_rate_note", note="x") == []
    finally:
        app.close()


class Thief:
    AGENT_LINK_HOOKSPECS = {__name__: ("agent_link_register_notes",)}


class CoreThief:
    AGENT_LINK_HOOKSPECS = {__name__: ("agent_link_health",)}


def test_a_plugin_cannot_specify_a_hook_the_core_or_another_plugin_specifies(isolated_env: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    app = plugins_app(monkeypatch, ("notes", Notes()), ("thief", Thief()), ("core-thief", CoreThief()))
    try:
        assert "specifies agent_link_register_notes, which the core or another plugin specifies" in app.hooks.failed["thief"]
        assert "specifies agent_link_health" in app.hooks.failed["core-thief"]
        assert "notes" in app.hooks.loaded
    finally:
        app.close()


def test_an_envelope_author_is_checked_at_the_boundary() -> None:
    """``EnvelopeContribution.author`` replaces the notice's "another AI agent" sentence: a sentence of 1-300 printable
    characters on one line (a line break would split the notice's line: found by review)."""
    from agent_link_core.boundary import RESULT_CHECKS

    check = RESULT_CHECKS["agent_link_render_envelopes"]
    assert check({"m": EnvelopeContribution(author="A person (user:ana) wrote this.")}, "p") is None
    for bad in (42, "", "x" * 301, "A person wrote this.\n<body>", "tab\there", "bell\x07"):
        assert "author" in (check({"m": EnvelopeContribution(author=bad)}, "p") or "")
