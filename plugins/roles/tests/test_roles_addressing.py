"""``role:<name>`` wherever an address is accepted, and role enforcement (off / warn / enforce)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_core.commands.send import send_reliably
from agent_link_core.errors import AgentLinkError
from agent_link_core.model import Caller
from agent_link_roles.table import table_path

ALICE = Caller("test:alice", "config", "test")
BOB = Caller("test:bob", "config", "test")
NOBODY = Caller("test:nobody", "config", "test")


def roles_file(state: Path, roles: dict[str, Any], **extra: Any) -> None:
    state.mkdir(parents=True, exist_ok=True)
    table_path(state).write_text(json.dumps({"version": 1, "roles": roles, **extra}))


@pytest.mark.anyio
async def test_role_address_resolves_to_its_holder(app: App, isolated_env: Path) -> None:
    roles_file(isolated_env, {"builder": {"address": "test:bob"}})
    verdict = await app.resolve_agent("role:builder", caller=ALICE)
    assert verdict["status"] == "resolved" and verdict["best"]["address"] == "test:bob" and verdict["via"] == "role:builder"
    out = await app.send(caller=ALICE, to="role:builder", body="hi", anticipation="reply")
    assert out.via == "role:builder"
    row = app.mailbox.get_row(out.message["id"])
    assert row["recipient"] == "test:bob" and row["to_addr"] == "role:builder"
    status = app.status(ALICE, out.message["id"])
    assert status["via"] == "role:builder" and status["holder"] == "test:bob"


@pytest.mark.anyio
async def test_a_cli_send_to_a_role_keeps_the_role(app: App, isolated_env: Path) -> None:
    # `agent-link send role:builder` (commands.send.send_reliably) stored the holder's address alone
    roles_file(isolated_env, {"builder": {"address": "test:bob"}})
    sent = await send_reliably(app, "role:builder", "hi", sender=ALICE)
    row = app.mailbox.get_row(sent.message_id)
    assert (sent.to, row["recipient"], row["to_addr"]) == ("test:bob", "test:bob", "role:builder")
    assert app.status(ALICE, sent.message_id)["via"] == "role:builder"


@pytest.mark.anyio
@pytest.mark.parametrize("roles", [{}, {"builder": {}}, {"builder": {"address": "bad"}}])
async def test_a_role_nobody_holds_is_not_found(app: App, isolated_env: Path, roles: dict[str, Any]) -> None:
    roles_file(isolated_env, roles)
    with pytest.raises(AgentLinkError) as e:
        await app.send(caller=ALICE, to="role:builder", body="hi")
    assert e.value.code == "not_found" and e.value.details["role"] == "role:builder"
    assert app.store.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0
    # the CLI says it in its own words: the command that shows roles, where there is one
    from agent_link_core.cli_text import error_line

    assert "`agent-link sessions` shows the roles each session holds" in error_line(e.value, "send")


@pytest.mark.anyio
async def test_resolve_agent_reports_unresolvable_roles_as_verdicts(app: App, isolated_env: Path) -> None:
    roles_file(isolated_env, {"builder": {}, "pair": {"address": ["test:bob", "test:carol"]}})
    verdict = await app.resolve_agent("role:builder", caller=ALICE)
    assert verdict["status"] == "not_found" and verdict["via"] == "role:builder"
    assert (await app.resolve_agent("role:pair", caller=ALICE))["status"] == "ambiguous"


@pytest.mark.anyio
async def test_several_holders_are_ambiguous(app: App, isolated_env: Path) -> None:
    roles_file(isolated_env, {"builder": {"address": ["test:bob", "test:carol"]}})
    with pytest.raises(AgentLinkError) as e:
        await app.send(caller=ALICE, to="role:builder", body="hi")
    assert e.value.code == "ambiguous"
    assert [c["address"] for c in e.value.details["candidates"]] == ["test:bob", "test:carol"]


@pytest.mark.anyio
async def test_an_unparsable_table_fails_lookups_and_enforcement_fails_open(app: App, isolated_env: Path) -> None:
    isolated_env.mkdir(parents=True, exist_ok=True)
    table_path(isolated_env).write_text('{"version": 1, "enforcement": "enforce", ')
    with pytest.raises(AgentLinkError) as e:
        await app.send(caller=ALICE, to="role:builder", body="hi")
    assert e.value.code == "state_io_error"
    out = await app.send(caller=ALICE, to="test:bob", body="direct is fine")
    assert out.created and out.warnings == []


ENFORCEMENT_TABLE = {"builder": {"address": "test:bob"}, "router": {"address": "test:alice"}}


async def send(app: App, sender: Caller, to: str, **kw: Any) -> Any:
    return await app.send(caller=sender, to=to, body="coordinate", anticipation="reply", **kw)


@pytest.mark.anyio
async def test_warn_delivers_with_a_warning_and_a_tag(make_app: Any, isolated_env: Path) -> None:
    roles_file(isolated_env, ENFORCEMENT_TABLE, enforcement="warn")
    app = make_app()
    out = await send(app, ALICE, "test:bob")
    warning = out.warnings[0]
    assert warning["code"] == "direct_coordination"
    assert warning["details"] == {"recipientRoles": ["builder"], "replacement": {"to": "role:builder"}}
    assert out.message["metadata"]["tags"] == ["direct-coordination"]


@pytest.mark.anyio
async def test_enforce_refuses_before_anything_is_stored(make_app: Any, isolated_env: Path) -> None:
    roles_file(isolated_env, ENFORCEMENT_TABLE, enforcement="enforce")
    app = make_app()
    with pytest.raises(AgentLinkError) as e:
        await send(app, ALICE, "test:bob")
    assert e.value.code == "permission_denied" and e.value.details["reason"] == "role_address_required"
    assert e.value.details["replacement"] == {"to": "role:builder"}
    assert app.store.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["warn", "enforce"])
async def test_what_enforcement_never_checks(make_app: Any, isolated_env: Path, mode: str) -> None:
    roles_file(isolated_env, ENFORCEMENT_TABLE, enforcement=mode)
    app = make_app()
    assert (await send(app, ALICE, "role:builder")).warnings == []  # role-addressed
    assert (await send(app, NOBODY, "test:bob")).warnings == []  # sender holds no role
    assert (await send(app, ALICE, "test:nobody")).warnings == []  # recipient holds no role
    question = await send(app, BOB, "role:router")
    answer = await app.send(caller=ALICE, to="test:bob", body="answer", reply_to=question.message["id"])
    assert answer.warnings == []  # a reply by the recipient is never checked
    reply = await app.reply(caller=BOB, message_id=(await send(app, ALICE, "role:builder")).message["id"], message="done it")
    assert "warnings" not in reply


@pytest.mark.anyio
async def test_orchestrator_only_for_a_project_names_the_project_tool(make_app: Any, isolated_env: Path) -> None:
    roles_file(isolated_env, {"router": {"address": "test:alice"}, "orchestrator": {"projects": {"/p/app": "test:bob"}}},
               enforcement="warn")
    app = make_app()
    details = (await send(app, ALICE, "test:bob")).warnings[0]["details"]
    assert details["replacement"] == {"tool": "message_project_orchestrator", "projectRoot": "/p/app"}
    assert details["recipientProjects"] == [{"role": "orchestrator", "projectRoot": "/p/app"}]


def test_a_bad_enforcement_variable_is_refused_like_every_bad_setting(make_app: Any) -> None:
    from agent_link_core.errors import AgentLinkError

    with pytest.raises(AgentLinkError) as info:
        make_app(AGENT_LINK_ROLE_ENFORCEMENT="loud")
    assert "AGENT_LINK_ROLE_ENFORCEMENT='loud' is invalid: expected one of off, warn, enforce" in info.value.message


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("env", "file_mode", "expected", "source"),
    [
        (None, None, "off", "default"),
        (None, "warn", "warn", "roles.json"),
        ("enforce", "warn", "enforce", "AGENT_LINK_ROLE_ENFORCEMENT"),
        ("off", "enforce", "off", "AGENT_LINK_ROLE_ENFORCEMENT"),
        (None, "loud", "off", "default"),
    ],
)
async def test_mode_comes_from_env_then_file_then_default(
    make_app: Any, isolated_env: Path, run_tool: Any, env: str | None, file_mode: str | None, expected: str, source: str
) -> None:
    extra = {"enforcement": file_mode} if file_mode else {}
    roles_file(isolated_env, ENFORCEMENT_TABLE, **extra)
    app = make_app(**({"AGENT_LINK_ROLE_ENFORCEMENT": env} if env else {}))
    enforcement = (await run_tool(app, "list_agent_roles", {}))["enforcement"]
    assert (enforcement["mode"], enforcement["source"]) == (expected, source)
    assert bool(enforcement["ignored"]) == (file_mode == "loud")
    assert app.health()["sections"]["roles"]["enforcement"]["mode"] == expected
    out = await send(app, ALICE, "test:bob") if expected != "enforce" else None
    assert out is None or bool(out.warnings) == (expected == "warn")


@pytest.mark.anyio
async def test_the_replacement_tool_is_never_refused(make_app: Any, isolated_env: Path) -> None:
    roles_file(isolated_env, {"router": {"address": "test:alice"}, "orchestrator": {"projects": {"/p/app": "test:bob"}}},
               enforcement="enforce")
    app = make_app()
    with pytest.raises(AgentLinkError):
        await app.send(caller=ALICE, to="test:bob", body="hi")
    for tool in ("message_project_orchestrator", "return_project_work_result"):
        outcome = await app.send(caller=ALICE, to="test:bob", body="hi", tool=tool)
        assert outcome.created and outcome.warnings == []


def test_project_orchestrator_api(make_app: Any, isolated_env: Path) -> None:
    from agent_link_roles import api

    roles_file(isolated_env, {"orchestrator": {"address": "test:alice", "projects": {"/p/app": "test:bob"}}})
    app = make_app()
    assert api.project_orchestrator(app, "/p/app") == "test:bob"
    assert api.project_orchestrator(app, "/p//x/../app") == "test:bob"  # plain normalisation
    assert api.project_orchestrator(app, "/p/app/sub") is None and api.project_orchestrator(app, "/p") is None
    table_path(isolated_env).write_text("{broken")
    with pytest.raises(AgentLinkError) as caught:
        api.project_orchestrator(app, "/p/app")
    assert caught.value.code == "state_io_error"


def test_role_holders_api(make_app: Any, isolated_env: Path) -> None:
    from agent_link_roles import api

    app = make_app()
    assert api.role_holders(app) == {}  # no table: nobody holds a role
    roles_file(isolated_env, {"builder": {"address": "test:bob"}, "tester": {"address": ["test:alice", "test:bob"]},
                              "orchestrator": {"projects": {"/p/app": "test:bob"}}})
    # direct holders only (a project assignment is not role:<name>); a hand-edited list stays several
    assert api.role_holders(app) == {"builder": ["test:bob"], "tester": ["test:alice", "test:bob"]}
    table_path(isolated_env).write_text("{broken")
    with pytest.raises(AgentLinkError) as caught:
        api.role_holders(app)
    assert caught.value.code == "state_io_error"


def test_a_recipient_on_another_machine_is_checked_with_that_machines_rules(isolated_env: Path) -> None:
    from agent_link_core.records import OutgoingMessage, SendContext
    from agent_link_roles.api import REMOTE_RULES_KEY
    from agent_link_roles.enforcement import check_send
    from agent_link_roles.table import load_table

    roles_file(isolated_env, {"router": {"address": "test:alice"}})  # test:far holds no role in this table
    table = load_table(isolated_env)

    def message(rules: Any, sender: Caller = ALICE) -> OutgoingMessage:
        return OutgoingMessage(id="m1", sender=sender, to="test:far", recipient="test:far", body="x", anticipation="reply",
                               reply_by_ms=None, reply_to=None, metadata={REMOTE_RULES_KEY: rules})

    context = SendContext(tool="message_agent", arguments={})
    rules = {"machine": "beta", "enforcement": "enforce", "roles": ["reviewer"]}
    with pytest.raises(AgentLinkError) as e:
        check_send(message(rules), context, table, "off")  # this machine's mode does not matter: beta's does
    assert e.value.details == {"recipientRoles": ["reviewer"], "recipientMachine": "beta", "replacement": {"to": "role:reviewer"},
                               "reason": "role_address_required"}
    assert check_send(message({**rules, "enforcement": "warn"}), context, table, "enforce")[0]["code"] == "direct_coordination"
    assert check_send(message({**rules, "enforcement": "off"}), context, table, "enforce") == []
    assert check_send(message(rules, sender=NOBODY), context, table, "enforce") == []  # the sender holds no role here
    assert check_send(message(rules), SendContext(tool="message_agent", arguments={}, is_reply=True), table, "enforce") == []
    # malformed rules are ignored: this machine's own rules apply (test:far holds no role in them)
    for bad in ({"machine": "beta", "enforcement": "strict", "roles": ["reviewer"]}, {"enforcement": "enforce", "roles": []},
                {"machine": "beta", "enforcement": "enforce", "roles": "reviewer"}, "enforce"):
        assert check_send(message(bad), context, table, "enforce") == []
