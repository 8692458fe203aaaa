"""Role handover: open reply/action mail sent to a role follows the role; nothing else moves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError
from agent_link_core.model import Caller
from agent_link_roles.handover import reassign
from agent_link_roles.procedures import procedure_path, read_procedure, record_version
from agent_link_roles.table import table_path
from agent_link_testing.locks import hold_write_lock

ALICE = Caller("test:alice", "config", "test")
BOB = Caller("test:bob", "config", "test")
CAROL = Caller("test:carol", "config", "test")


async def assign(run_tool: Any, app: App, holder: str, **extra: Any) -> dict[str, Any]:
    out = await run_tool(app, "set_agent_role", {"role": "builder", "agent": holder, **extra})
    assert out["ok"], out
    return out


async def to_role(app: App, anticipation: str = "reply", sender: Caller = ALICE) -> str:
    return (await app.send(caller=sender, to="role:builder", body=f"{anticipation} work", anticipation=anticipation)).message["id"]


@pytest.mark.anyio
async def test_open_reply_moves_with_its_reminder_count(app: App, run_tool: Any) -> None:
    await assign(run_tool, app, "test:bob")
    mid = await to_role(app)
    app.inbox(BOB)  # bob reads it: delivered, open
    assert app.mailbox.record_reminder(mid, 1, "test-hook", "test:bob")
    out = await assign(run_tool, app, "test:carol")
    assert out["handedOver"] == [mid] and out["previousAddress"] == "test:bob"
    row = app.mailbox.get_row(mid)
    assert row["recipient"] == "test:carol"
    assert app.mailbox.state(row).reminder_count == 1  # the cap is not reset
    assert [m["id"] for m in app.inbox(BOB)["messages"]] == []  # bob no longer sees it
    assert mid in [m["id"] for m in app.inbox(CAROL)["messages"]]
    with pytest.raises(AgentLinkError) as e:
        await app.reply(caller=BOB, message_id=mid, message="mine")
    assert e.value.code == "wrong_recipient" and e.value.details["expected"] == "test:carol"
    done = await app.reply(caller=CAROL, message_id=mid, message="carol answers")
    assert done["status"] == "replied"
    assert app.mailbox.get_row(done["messageId"])["recipient"] == "test:alice"


@pytest.mark.anyio
async def test_action_moves_fyi_and_resolved_stay(app: App, run_tool: Any) -> None:
    await assign(run_tool, app, "test:bob")
    action, fyi, answered = await to_role(app, "action"), await to_role(app, "fyi"), await to_role(app)
    await app.reply(caller=BOB, message_id=answered, message="done already")
    direct = (await app.send(caller=ALICE, to="test:bob", body="not via the role", anticipation="reply")).message["id"]
    out = await assign(run_tool, app, "test:carol")
    assert out["handedOver"] == [action]
    recipients = {mid: app.mailbox.get_row(mid)["recipient"] for mid in (action, fyi, answered, direct)}
    assert recipients == {action: "test:carol", fyi: "test:bob", answered: "test:bob", direct: "test:bob"}


@pytest.mark.anyio
async def test_cleared_role_leaves_mail_then_a_new_holder_takes_it(app: App, run_tool: Any) -> None:
    await assign(run_tool, app, "test:bob")
    mid = await to_role(app)
    cleared = await run_tool(app, "clear_agent_role", {"role": "role:builder"})
    assert cleared["cleared"] and cleared["previousAddress"] == "test:bob"
    assert app.mailbox.get_row(mid)["recipient"] == "test:bob"
    with pytest.raises(AgentLinkError):
        await to_role(app)  # nobody holds it now
    await assign(run_tool, app, "test:carol")
    assert app.mailbox.get_row(mid)["recipient"] == "test:carol"


@pytest.mark.anyio
async def test_a_hand_edit_moves_mail_at_the_next_role_tool_call(app: App, run_tool: Any, isolated_env: Path) -> None:
    await assign(run_tool, app, "test:bob")
    mid = await to_role(app)
    raw = json.loads(table_path(isolated_env).read_text())
    raw["roles"]["builder"]["address"] = "test:carol"
    table_path(isolated_env).write_text(json.dumps(raw))
    listed = await run_tool(app, "list_agent_roles", {})
    assert listed["handedOver"] == {"builder": [mid]}
    assert app.mailbox.get_row(mid)["recipient"] == "test:carol"
    assert (await run_tool(app, "list_agent_roles", {}))["handedOver"] == {}  # once


@pytest.mark.anyio
async def test_an_ambiguous_hand_edit_moves_nothing(app: App, run_tool: Any, isolated_env: Path) -> None:
    await assign(run_tool, app, "test:bob")
    mid = await to_role(app)
    raw = json.loads(table_path(isolated_env).read_text())
    raw["roles"]["builder"]["address"] = ["test:carol", "test:dave"]
    table_path(isolated_env).write_text(json.dumps(raw))
    await run_tool(app, "list_agent_roles", {})
    assert app.mailbox.get_row(mid)["recipient"] == "test:bob"


@pytest.mark.anyio
async def test_moved_message_shows_the_procedure_to_a_holder_that_never_saw_it(app: App, run_tool: Any) -> None:
    await assign(run_tool, app, "test:bob", procedure="Check the build first.")
    mid = await to_role(app)
    assert "Check the build first." in app.mailbox.envelope(app.mailbox.get_row(mid))
    await assign(run_tool, app, "test:carol")
    envelope = app.mailbox.envelope(app.mailbox.get_row(mid))
    assert 'to="test:carol"' in envelope and '<procedure name="builder" version="1">Check the build first.</procedure>' in envelope
    later = await to_role(app)
    assert "<procedure " not in app.mailbox.envelope(app.mailbox.get_row(later))


@pytest.mark.anyio
async def test_moved_message_is_released_in_the_event_log(app: App, run_tool: Any) -> None:
    await assign(run_tool, app, "test:bob")
    mid = await to_role(app)
    await assign(run_tool, app, "test:carol")
    events = app.store.conn.execute("SELECT kind, actor, data FROM message_events WHERE message_id = ? ORDER BY seq", (mid,)).fetchall()
    released = [e for e in events if e["kind"] == "released"]
    assert len(released) == 1 and released[0]["actor"] == "test:admin"
    assert json.loads(released[0]["data"]) == {"from": "test:bob", "to": "test:carol"}


@pytest.mark.anyio
async def test_moved_message_is_new_mail_for_the_new_holder(app: App, run_tool: Any) -> None:
    await assign(run_tool, app, "test:bob")
    mid = await to_role(app)
    app.inbox(BOB)
    assert app.mailbox.count_open("test:bob", undelivered_only=True) == 0
    await assign(run_tool, app, "test:carol")
    assert app.mailbox.count_open("test:carol", undelivered_only=True) == 1  # hook notes and pushes see it
    assert app.mailbox.due_reminders("test:carol") == []  # not reminded before being told
    assert app.inbox(CAROL)["markedDelivered"] == [mid]


@pytest.mark.anyio
async def test_a_hand_edit_takes_effect_at_the_next_send_to_the_role(app: App, run_tool: Any, isolated_env: Path) -> None:
    await assign(run_tool, app, "test:bob")
    mid = await to_role(app)
    raw = json.loads(table_path(isolated_env).read_text())
    raw["roles"]["builder"]["address"] = "test:carol"
    table_path(isolated_env).write_text(json.dumps(raw))
    later = await to_role(app)
    assert app.mailbox.get_row(mid)["recipient"] == "test:carol"
    assert app.mailbox.get_row(later)["recipient"] == "test:carol"


@pytest.mark.anyio
async def test_reading_roles_never_waits_for_a_writer_and_the_handover_it_skips_comes_next(
        make_app: Any, run_tool: Any, isolated_env: Path) -> None:
    app = make_app(AGENT_LINK_ROLE_ADMIN="1", AGENT_LINK_BUSY_TIMEOUT_MS="600000")  # a read that waited would outlast the holder
    await assign(run_tool, app, "test:bob")
    procedure_path(isolated_env, "builder").parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    procedure_path(isolated_env, "builder").write_text("Run the tests first.")
    mid = await to_role(app)  # records the procedure's first version
    raw = json.loads(table_path(isolated_env).read_text())
    raw["roles"]["builder"]["address"] = "test:carol"  # a hand edit: the next read hands the mail over
    table_path(isolated_env).write_text(json.dumps(raw))
    with hold_write_lock(app.store.path) as held:
        listed = await run_tool(app, "list_agent_roles", {})
        one = await run_tool(app, "get_agent_role", {"role": "builder"})
        resolved = await run_tool(app, "resolve_agent", {"query": "role:builder"})
        version = record_version(app.store, "builder", read_procedure(isolated_env, "builder"))  # unchanged: a read
        assert not held.waited, "a read of the roles waited for another process's write lock"
    assert listed["ok"] and listed["handedOver"] == {} and one["ok"] and resolved["ok"], (listed, one, resolved)
    assert version["version"] == 1
    assert app.mailbox.get_row(mid)["recipient"] == "test:bob"  # skipped while the lock was taken...
    assert (await run_tool(app, "list_agent_roles", {}))["handedOver"] == {"builder": [mid]}  # ...done by the next read
    assert app.mailbox.get_row(mid)["recipient"] == "test:carol"


@pytest.mark.anyio
async def test_reassign_moves_open_mail_keeps_reminders_and_publishes_the_release(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    publish = app.mailbox.publish
    monkeypatch.setattr(app.mailbox, "publish", lambda *events: (seen.extend(events), publish(*events)))
    mid = (await app.send(caller=ALICE, to="test:bob", body="q", anticipation="reply")).message["id"]
    app.mailbox.mark_delivered(mid, "test-push")
    assert app.mailbox.record_reminder(mid, 1, "test-hook", "test:bob")
    assert reassign(app.mailbox, mid, "test:carol", "test:admin")
    assert not reassign(app.mailbox, mid, "test:carol", "test:admin")  # already there
    row = app.mailbox.get_row(mid)
    assert row["recipient"] == "test:carol" and row["delivered_at"] is None and row["open"] == 1
    assert app.mailbox.state(row).reminder_count == 1
    assert [(e.kind, e.actor, e.data) for e in seen if e is not None and e.kind == "released"] == [
        ("released", "test:admin", {"from": "test:bob", "to": "test:carol"})]
    with pytest.raises(AgentLinkError) as e:
        app.mailbox.resolve(mid, BOB, "done")
    assert e.value.code == "wrong_recipient"
    app.mailbox.resolve(mid, CAROL, "done")
    assert not reassign(app.mailbox, mid, "test:bob", "test:admin")  # resolved mail stays with its resolver
    assert not reassign(app.mailbox, "01ARZ3NDEKTSV4RRFFQ69G5FAV", "test:bob", "test:admin")  # absent
