"""Procedure files: only regular files of at most 64 KiB, versioned by content, and the text shown
once per version to each holder, inside the envelope."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError
from agent_link_core.model import Caller
from agent_link_roles.procedures import (
    MAX_PROCEDURE_BYTES,
    encode_procedure,
    procedure_path,
    procedure_view,
    read_procedure,
    record_version,
    write_procedure,
)

ALICE = Caller("test:alice", "config", "test")
BOB = Caller("test:bob", "config", "test")
CAROL = Caller("test:carol", "config", "test")


def put(state: Path, name: str, data: bytes) -> Path:
    path = procedure_path(state, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_regular_file_is_read_with_its_hash(isolated_env: Path) -> None:
    put(isolated_env, "builder", "Run the tests first.\n".encode())
    proc = read_procedure(isolated_env, "builder")
    assert proc.present and proc.text == "Run the tests first.\n" and len(proc.sha256 or "") == 64
    assert not read_procedure(isolated_env, "other").present


def test_symlinks_and_other_file_types_are_refused(isolated_env: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.md"
    target.write_text("secret")
    folder = procedure_path(isolated_env, "x").parent
    folder.mkdir(parents=True)
    os.symlink(target, folder / "linked.md")
    os.mkfifo(folder / "fifo.md")
    (folder / "dir.md").mkdir()
    assert read_procedure(isolated_env, "linked").problem["rule"] == "symlink"
    assert read_procedure(isolated_env, "fifo").problem["rule"] == "not_regular_file"  # and it did not block
    assert read_procedure(isolated_env, "dir").problem["rule"] == "not_regular_file"
    assert all(not read_procedure(isolated_env, n).present for n in ("linked", "fifo", "dir"))


def test_a_symlinked_procedures_folder_is_refused(isolated_env: Path, tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "x.md").write_text("text")
    isolated_env.mkdir(parents=True)
    os.symlink(real, isolated_env / "roles")
    assert read_procedure(isolated_env, "x").problem["rule"] == "symlink"
    with pytest.raises(AgentLinkError) as e:
        write_procedure(isolated_env, "x", b"new")
    assert e.value.code == "state_io_error"
    assert (real / "x.md").read_text() == "text"


def test_size_and_encoding_limits(isolated_env: Path) -> None:
    put(isolated_env, "max", b"a" * MAX_PROCEDURE_BYTES)
    put(isolated_env, "big", b"a" * (MAX_PROCEDURE_BYTES + 1))
    put(isolated_env, "latin", b"caf\xe9")
    assert read_procedure(isolated_env, "max").present
    assert read_procedure(isolated_env, "big").problem["rule"] == "too_large"
    assert read_procedure(isolated_env, "latin").problem["rule"] == "encoding"
    with pytest.raises(AgentLinkError) as e:
        encode_procedure("é" * (MAX_PROCEDURE_BYTES // 2 + 1))
    assert e.value.code == "body_too_large" and e.value.details["limitBytes"] == MAX_PROCEDURE_BYTES


def test_written_procedure_is_private(isolated_env: Path) -> None:
    write_procedure(isolated_env, "x", encode_procedure("Do it."))
    path = procedure_path(isolated_env, "x")
    assert path.read_text() == "Do it." and (path.stat().st_mode & 0o777) == 0o600
    assert (path.parent.stat().st_mode & 0o777) == 0o700


def test_versions_go_up_only_when_the_content_changes(app: App, isolated_env: Path) -> None:
    put(isolated_env, "x", b"one")
    assert procedure_view(app.store, isolated_env, "x")["pending"] is True  # read tools do not record
    assert record_version(app.store, "x", read_procedure(isolated_env, "x"))["version"] == 1
    assert record_version(app.store, "x", read_procedure(isolated_env, "x"))["version"] == 1
    put(isolated_env, "x", b"two")
    view = procedure_view(app.store, isolated_env, "x")
    assert view["version"] == 1 and view["pending"] is True
    assert record_version(app.store, "x", read_procedure(isolated_env, "x"))["version"] == 2
    put(isolated_env, "x", b"one")  # back to old content: still a new version
    assert record_version(app.store, "x", read_procedure(isolated_env, "x"))["version"] == 3
    assert procedure_view(app.store, isolated_env, "x", include_text=True)["text"] == "one"


async def send_to_role(app: App, body: str, sender: Caller = ALICE, **kw: Any) -> dict[str, Any]:
    out = await app.send(caller=sender, to="role:builder", body=body, anticipation=kw.pop("anticipation", "reply"), **kw)
    return {**out.message, "result": out.result_fields}


def envelope_of(app: App, message_id: str) -> str:
    return app.mailbox.envelope(app.mailbox.get_row(message_id))


@pytest.mark.anyio
async def test_text_travels_once_per_version_per_holder(app: App, isolated_env: Path, run_tool: Any) -> None:
    assert (await run_tool(app, "set_agent_role", {"role": "builder", "agent": "test:bob", "procedure": "Build <carefully>."}))["ok"]
    # fyi mail: it stays with bob when the role moves (handover of open mail is tested elsewhere)
    first = await send_to_role(app, "job 1", anticipation="fyi")
    second = await send_to_role(app, "job 2", sender=CAROL, anticipation="fyi")
    env1, env2 = envelope_of(app, first["id"]), envelope_of(app, second["id"])
    assert 'via="role:builder"' in env1 and 'procedure="builder@1"' in env1
    assert '<procedure name="builder" version="1">Build &lt;carefully&gt;.</procedure>' in env1
    assert 'procedure="builder@1"' in env2 and "<procedure " not in env2
    assert first["result"]["roleProcedure"] == {"name": "builder", "version": 1, "textIncluded": True}
    assert second["result"]["roleProcedure"] == {"name": "builder", "version": 1, "textIncluded": False}
    assert envelope_of(app, first["id"]) == env1  # rendering again does not change who shows it
    assert first["metadata"]["role"] == {"name": "builder", "holder": "test:bob",
                                         "procedure": {"name": "builder", "version": 1, "sha256": first["metadata"]["role"]["procedure"]["sha256"]}}

    put(isolated_env, "builder", b"Build faster.")  # a hand edit makes version 2 at the next send
    third = await send_to_role(app, "job 3", anticipation="fyi")
    env3 = envelope_of(app, third["id"])
    assert 'procedure="builder@2"' in env3 and ">Build faster.</procedure>" in env3

    assert (await run_tool(app, "set_agent_role", {"role": "builder", "agent": "test:carol"}))["ok"]
    fourth = await send_to_role(app, "job 4")
    assert ">Build faster.</procedure>" in envelope_of(app, fourth["id"])  # carol's first message of v2
    fifth = await send_to_role(app, "job 5")
    assert "<procedure " not in envelope_of(app, fifth["id"])


@pytest.mark.anyio
async def test_a_role_without_procedure_still_shows_via(app: App, run_tool: Any) -> None:
    await run_tool(app, "set_agent_role", {"role": "builder", "agent": "test:bob"})
    msg = await send_to_role(app, "hello")
    env = envelope_of(app, msg["id"])
    assert 'via="role:builder"' in env and "procedure=" not in env and "<procedure" not in env
    assert "roleProcedure" not in msg["result"]


@pytest.mark.anyio
async def test_a_refused_procedure_file_does_not_stop_the_send(app: App, isolated_env: Path, run_tool: Any) -> None:
    await run_tool(app, "set_agent_role", {"role": "builder", "agent": "test:bob"})
    put(isolated_env, "builder", b"x" * (MAX_PROCEDURE_BYTES + 1))
    msg = await send_to_role(app, "hello")
    assert "procedure=" not in envelope_of(app, msg["id"])
    view = (await run_tool(app, "get_agent_role", {"role": "builder"}))["role"]["procedure"]
    assert view["present"] is False and view["problem"]["rule"] == "too_large"


@pytest.mark.anyio
async def test_procedure_versions_lists_each_procedure_and_records_nothing(app: App, isolated_env: Path, run_tool: Any) -> None:
    from agent_link_roles import api

    assert api.procedure_versions(app) == {}
    assert (await run_tool(app, "set_agent_role", {"role": "builder", "agent": "test:bob", "procedure": "Build here."}))["ok"]
    put(isolated_env, "loose", b"a file with no role in the table")
    versions = api.procedure_versions(app)
    assert versions == {"builder": {"version": procedure_view(app.store, isolated_env, "builder")["version"],
                                    "sha256": read_procedure(isolated_env, "builder").sha256},
                        "loose": {"version": None, "sha256": read_procedure(isolated_env, "loose").sha256}}, versions
    await send_to_role(app, "records the current version", anticipation="fyi")
    put(isolated_env, "builder", b"Build here, v2.")  # changed, not yet recorded: the file's digest, the last version
    after = api.procedure_versions(app)["builder"]
    assert after["sha256"] == read_procedure(isolated_env, "builder").sha256 and after["version"] == 1, after
    assert api.procedure_versions(app)["builder"]["version"] == 1  # reading recorded nothing


@pytest.mark.anyio
async def test_mail_from_another_machine_gets_this_machines_procedure(app: App, isolated_env: Path, run_tool: Any) -> None:
    from agent_link_core.records import OutgoingMessage
    from agent_link_roles import api

    assert (await run_tool(app, "set_agent_role", {"role": "builder", "agent": "test:bob", "procedure": "Build here."}))["ok"]
    await send_to_role(app, "local first", anticipation="fyi")  # records version 1 here
    put(isolated_env, "builder", b"Build here, v2.")
    # the sending machine's reference (its own numbering and hash) is replaced by this machine's
    metadata: dict[str, Any] = {"role": {"name": "builder", "holder": "test:bob", "machine": "here",
                                         "procedure": {"name": "builder", "version": 7, "sha256": "f" * 64}}}
    attached = api.attach_arrived_procedure(app, metadata)
    assert attached is not None and attached["version"] == 2 and metadata["role"] == {"name": "builder", "holder": "test:bob",
                                                                                       "procedure": attached}
    row, _ = app.mailbox.store_message(OutgoingMessage(id="msg_arrived1", sender=ALICE, to="role:builder", recipient="test:bob",
                                                       body="from afar", anticipation="fyi", reply_by_ms=None, reply_to=None,
                                                       metadata=metadata))
    env = envelope_of(app, row["id"])
    assert 'procedure="builder@2"' in env and '<procedure name="builder" version="2">Build here, v2.</procedure>' in env
    # no procedure file here: the sender's reference is dropped, not kept
    bare: dict[str, Any] = {"role": {"name": "tester", "holder": "test:bob", "procedure": {"name": "tester", "version": 1, "sha256": "a" * 64}}}
    assert api.attach_arrived_procedure(app, bare) is None and bare["role"] == {"name": "tester", "holder": "test:bob"}
    assert api.attach_arrived_procedure(app, {"receipt": {}}) is None  # not role-addressed: left alone


@pytest.mark.anyio
async def test_a_holder_on_another_machine_gets_no_procedure_from_here(app: App, isolated_env: Path) -> None:
    from agent_link_core.records import OutgoingMessage, SendContext

    put(isolated_env, "builder", b"Only for holders here.")
    # the role metadata a plugin that carries mail between machines resolves role:builder to
    message = OutgoingMessage(id="msg_far1", sender=ALICE, to="role:builder", recipient="team:far", body="x", anticipation="fyi",
                              reply_by_ms=None, reply_to=None,
                              metadata={"role": {"name": "builder", "holder": "team:far", "machine": "beta"}})
    context = SendContext(tool="message_agent", arguments={}, via="role:builder")
    app.hooks.before_send(message, context)
    assert "procedure" not in message.metadata["role"] and "roleProcedure" not in context.result
    assert app.store.conn.execute("SELECT COUNT(*) FROM role_procedure_versions").fetchone()[0] == 0


@pytest.mark.anyio
async def test_a_long_procedure_is_shown_cut_to_what_an_envelope_takes(app: App, run_tool: Any) -> None:
    """A procedure longer than one envelope contribution takes (4096 characters) is shown cut, saying where the whole
    text is; the other messages of the read keep their procedure attribute and the plugin reports no problem (found by
    review: the core refused the contribution, so the text never showed though ``textIncluded`` said it did, and since
    the envelope hook answers once per read, the read's other messages lost ``procedure`` too)."""
    from agent_link_core import reading
    from agent_link_core.boundary import MAX_CONTRIBUTION_CHARS

    text = "Build carefully & test. " * 300
    assert (await run_tool(app, "set_agent_role", {"role": "builder", "agent": "test:bob", "procedure": text}))["ok"]
    first = await send_to_role(app, "job 1", anticipation="fyi")
    await send_to_role(app, "job 2", anticipation="fyi")
    assert first["result"]["roleProcedure"]["textIncluded"] is True
    block = reading.inbox(app, BOB, limit=10, mark=False, include_open=True)["renderedBlock"]
    assert block.count('procedure="builder@1"') == 2 and block.count("<procedure ") == 1
    shown = block.split('<procedure name="builder" version="1">', 1)[1].split("</procedure>", 1)[0]
    assert shown.startswith("Build carefully &amp; test. ") and "get_agent_role" in shown and "includeProcedure" in shown
    assert len(shown) + len('<procedure name="builder" version="1"></procedure>') + len("role:builder") + len("builder@1") <= MAX_CONTRIBUTION_CHARS
    assert not [p for p in app.hooks.boundary.report() if p["plugin"] == "roles"]
