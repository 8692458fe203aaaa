"""The codex plugin's part of the ``agent-link`` CLI against scripted app-servers (no real
Codex): ``endpoints add|list|remove``, ``ep_...:<thread>`` targets, ``--from-thread`` senders,
per-endpoint reachability in ``sessions``, and which push failures are retryable or unknown.

The CLI runs in-process (click's runner) in a worker thread, so the scripted servers keep
answering on the test's event loop.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from agent_link_codex.delivery import Deliverer, PushClaims
from agent_link_codex.endpoints import REGISTRY_CAPACITY, parse_composite, socket_endpoint
from agent_link_codex.schema import MIGRATIONS
from agent_link_codex.service import CodexService
from agent_link_core.identity import named_sender
from agent_link_core.app import App
from agent_link_core.cli import EXIT_UNKNOWN, build_cli
from agent_link_core.errors import AgentLinkError
from agent_link_core.mailbox import new_message_id
from agent_link_core.store import CORE_MIGRATIONS, Store, now_ms

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

TID = "01a22a93-0000-7000-8000-0000000000c1"
ONLY_A = "01a22a93-0000-7000-8000-0000000000c2"
ARCHIVED = "01a22a93-0000-7000-8000-0000000000c3"
NOWHERE = "01a22a93-0000-7000-8000-0000000000c4"


@pytest.fixture(autouse=True)
def cli_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_CODEX_AUTOSTART", "0")
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "claude roles receipts")


async def cli(*args: str) -> Result:
    return await asyncio.to_thread(lambda: CliRunner().invoke(build_cli(), list(args), catch_exceptions=False))


def ep_id(path: Path) -> str:
    return socket_endpoint(str(path), "registered").id


def thread(tid: str, *, archived: bool = False) -> dict[str, Any]:
    folder = "archived_sessions" if archived else "sessions/2026/11/30"
    return {"id": tid, "name": f"thread {tid[-2:]}", "cwd": "/work/proj", "status": {"type": "idle"}, "source": "vscode",
            "recencyAt": 1_800_000_000, "path": f"/codex/{folder}/rollout-x-{tid}.jsonl"}


def refusing(error: Exception) -> Any:
    """A mini-server handler answering every request with ``error``."""
    def handler(method: str, params: dict[str, Any]) -> None:
        raise error

    return handler


def reader(known: tuple[str, ...], mini_error: Any) -> dict[str, Any]:
    """``thread/read`` handlers knowing ``known`` (ARCHIVED is archived)."""
    def read(method: str, params: dict[str, Any]) -> dict[str, Any]:
        if params["threadId"] not in known:
            raise mini_error(f"thread not found: {params['threadId']}")
        return {"thread": thread(params["threadId"], archived=params["threadId"] == ARCHIVED)}

    return {"thread/read": read}


def test_composite_parsing() -> None:
    assert parse_composite("ep_0123456789abcdef:" + TID) == ("ep_0123456789abcdef", TID)
    assert parse_composite("  ep_x:t-1.2_3 ") == ("ep_x", "t-1.2_3")
    for other in ("codex:" + TID, "ep_:" + TID, "ep_x:", "ep_x:a:b", "ep-x:" + TID, "xep_x:" + TID, "ep_x:bad id", TID):
        assert parse_composite(other) is None, other


async def test_endpoints_add_list_remove(mini: Any, short_tmp: Path, isolated_env: Path) -> None:
    added = await cli("endpoints", "add", str(mini.path), "--label", " tui ", "--json")
    assert added.exit_code == 0, added.stderr
    data = json.loads(added.stdout)
    assert data["registration"] == "added" and data["capacity"] == {"used": 1, "limit": REGISTRY_CAPACITY}
    assert data["endpoint"] == {"id": ep_id(mini.path), "label": "tui", "source": "registered", "reachable": True, "reason": None}
    assert [m for m, _ in mini.requests] == ["initialize"]  # it answered before it was saved
    assert json.loads((await cli("endpoints", "add", str(mini.path), "--json")).stdout)["registration"] == "updated"
    listed = json.loads((await cli("endpoints", "list", "--json")).stdout)["endpoints"]
    assert [(e["source"], e["reachable"], e["reason"]) for e in listed] == [("control-socket", False, "absent"), ("registered", True, None)]
    assert str(short_tmp) not in json.dumps(listed) and "target" not in listed[1]
    shown = json.loads((await cli("endpoints", "list", "--json", "--show-paths")).stdout)["endpoints"]
    assert shown[1]["target"] == str(mini.path.parent.resolve() / mini.path.name)
    human = (await cli("endpoints", "list")).stdout
    assert ep_id(mini.path) in human and "registered with `agent-link endpoints add`: 1 (at most " in human and str(short_tmp) not in human
    # the registry is private: a 0600 database in a 0700 directory
    assert stat.S_IMODE(os.stat(isolated_env / "agent-link.db").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(isolated_env).st_mode) == 0o700
    removed = await cli("endpoints", "remove", ep_id(mini.path), "--json")
    assert json.loads(removed.stdout)["removed"] == {"id": ep_id(mini.path), "label": None}
    again = await cli("endpoints", "remove", ep_id(mini.path))
    assert again.exit_code == 1 and again.stdout == "" and again.stderr.count("\n") == 1
    assert again.stderr.startswith(f"agent-link: No registered endpoint {ep_id(mini.path)}.")


async def test_symlinks_to_one_socket_are_one_endpoint(mini: Any, short_tmp: Path, isolated_env: Path) -> None:
    """60 symlinks to one socket filled the registry of 62: a path that leads to a registered
    socket updates that endpoint, and one registered twice before is listed once."""
    first = json.loads((await cli("endpoints", "add", str(mini.path), "--json")).stdout)
    for n in range(5):
        link = short_tmp / f"l{n}.sock"
        link.symlink_to(mini.path)
        again = json.loads((await cli("endpoints", "add", str(link), "--label", f"via {n}", "--json")).stdout)
        assert again["registration"] == "updated" and again["endpoint"]["id"] == first["endpoint"]["id"]
        assert again["capacity"]["used"] == 1
    listed = json.loads((await cli("endpoints", "list", "--json")).stdout)
    registered = [e for e in listed["endpoints"] if e["source"] == "registered"]
    assert [(e["id"], e["label"]) for e in registered] == [(first["endpoint"]["id"], "via 4")]
    # a registry that already holds two paths to one socket (made before this rule) lists it once
    extra = short_tmp / "old.sock"
    extra.symlink_to(mini.path)
    conn = sqlite3.connect(isolated_env / "agent-link.db")
    with conn:
        conn.execute("INSERT INTO codex_endpoints (id, kind, target, label, token_file, added_at) VALUES (?, 'unix', ?, NULL, NULL, ?)",
                     (ep_id(extra), str(extra), now_ms()))
    conn.close()
    listed = json.loads((await cli("endpoints", "list", "--json")).stdout)
    assert [e["id"] for e in listed["endpoints"] if e["source"] == "registered"] == [first["endpoint"]["id"]]


async def test_endpoints_add_refusals_are_one_line(short_tmp: Path, mini: Any, isolated_env: Path) -> None:
    dead = short_tmp / "dead.sock"
    with socket.socket(socket.AF_UNIX) as s:  # a stale socket file: connecting is refused
        s.bind(str(dead))
    (short_tmp / "file").write_text("x")
    # nothing answers: exit 1; a target that cannot be an endpoint is bad usage: exit 2
    for target, words, code in ((str(dead), "No Codex app-server answers there (open-failed); nothing was saved.", 1),
                                (str(short_tmp / "absent.sock"), "(absent)", 1), ("relative.sock", "absolute socket path", 2),
                                (str(short_tmp / "file"), "not a Unix socket", 2), ("ws://", "ws://127.0.0.1:PORT/", 2)):
        result = await cli("endpoints", "add", target)
        assert result.exit_code == code and result.stdout == "", (target, result.exit_code)
        assert result.stderr.count("\n") == 1 and words in result.stderr, (target, result.stderr)
    assert (await cli("endpoints", "add", str(mini.path), "--label", " ")).exit_code == 2
    assert json.loads((await cli("endpoints", "list", "--json")).stdout)["capacity"]["used"] == 0


async def test_endpoints_add_never_sends_a_token_off_the_machine(short_tmp: Path, isolated_env: Path) -> None:
    # The reproduction: `endpoints add ws://<any host>/ --token-file F` sent F in clear text.
    token = short_tmp / "token"
    token.write_text("secret")
    token.chmod(0o600)
    for target, words in (("ws://203.0.113.9:4500/", "clear text"), ("wss://example.com/", "AGENT_LINK_CODEX_REMOTE_TOKENS=1")):
        result = await cli("endpoints", "add", target, "--token-file", str(token))
        assert result.exit_code == 2 and result.stderr.count("\n") == 1 and words in result.stderr, result.stderr
    token.chmod(0o644)
    shared = await cli("endpoints", "add", "ws://127.0.0.1:4500/", "--token-file", str(token))
    assert shared.exit_code == 2 and "chmod 600" in shared.stderr
    assert json.loads((await cli("endpoints", "list", "--json")).stdout)["capacity"]["used"] == 0


async def test_full_registry_says_registry_full_and_saves_nothing(mini: Any, short_tmp: Path) -> None:
    app = App.create()
    try:
        for i in range(REGISTRY_CAPACITY):  # registering ahead of time (not running yet) is allowed
            app.harnesses["codex"].registry.add(str(short_tmp / f"later{i}.sock"))
    finally:
        await app.aclose()
    full = await cli("endpoints", "add", str(mini.path), "--json")
    assert full.exit_code == 1
    data = json.loads(full.stdout)
    assert data["registration"] == "registry-full" and data["endpoint"]["reachable"] is True
    assert data["capacity"] == {"used": REGISTRY_CAPACITY, "limit": REGISTRY_CAPACITY}
    assert full.stderr.count("\n") == 1 and "registry is full" in full.stderr and "endpoints remove" in full.stderr
    listed = json.loads((await cli("endpoints", "list", "--json")).stdout)["endpoints"]
    assert ep_id(mini.path) not in [e["id"] for e in listed]


async def test_composite_targets_are_checked_on_their_endpoint(short_tmp: Path, mini_server: Any, mini_error: Any) -> None:
    async with mini_server(short_tmp / "a.sock", reader((TID, ARCHIVED), mini_error)) as live:
        async with mini_server(short_tmp / "b.sock") as doomed:
            assert (await cli("endpoints", "add", str(live.path))).exit_code == 0
            assert (await cli("endpoints", "add", str(doomed.path))).exit_code == 0
        bound = await cli("contacts", "add", "bob", f"{ep_id(live.path)}:{TID}", "--json")
        assert bound.exit_code == 0 and json.loads(bound.stdout)["address"] == f"codex:{TID}"
        for target, words in ((f"{ep_id(live.path)}:{NOWHERE}", f"has no thread {NOWHERE}"),
                              (f"{ep_id(live.path)}:{ARCHIVED}", "is archived"),
                              (f"ep_0000000000000000:{TID}", "No Codex endpoint ep_0000000000000000 is known here"),
                              (f"{ep_id(doomed.path)}:{TID}", f"Codex endpoint {ep_id(doomed.path)} did not answer")):
            result = await cli("contacts", "add", "other", target)
            assert result.exit_code == 1 and result.stderr.count("\n") == 1 and words in result.stderr, (target, result.stderr)
        # send takes the same form; a refused target is "rejected" and nothing is stored
        refused = await cli("send", f"{ep_id(live.path)}:{NOWHERE}", "hi", "--json")
        assert refused.exit_code == 1 and json.loads(refused.stdout)["error"]["code"] == "not_found"
    assert [p["threadId"] for m, p in live.requests if m == "thread/read"] == [TID, NOWHERE, ARCHIVED, NOWHERE]


async def test_named_sender_needs_an_endpoint_when_homes_disagree(short_tmp: Path, mini_server: Any, mini_error: Any,
                                                                  monkeypatch: pytest.MonkeyPatch, make_rollout: Any) -> None:
    async with mini_server(short_tmp / "a.sock", reader((TID, ONLY_A), mini_error), codex_home="/homes/a") as a, \
            mini_server(short_tmp / "b.sock", reader((TID,), mini_error), codex_home="/homes/b") as b:
        monkeypatch.setenv("AGENT_LINK_CODEX_SOCK", str(a.path))
        assert (await cli("endpoints", "add", str(b.path))).exit_code == 0
        app = App.create()
        try:
            with pytest.raises(AgentLinkError) as info:
                await asyncio.to_thread(lambda: named_sender(app, named={"threadId": TID}))
            assert info.value.code == "ambiguous"
            assert {c["address"] for c in info.value.details["candidates"]} == {f"{ep_id(a.path)}:{TID}", f"{ep_id(b.path)}:{TID}"}
            chosen = await asyncio.to_thread(lambda: named_sender(app, named={"threadId": TID, "endpointId": ep_id(b.path)}))
            assert (chosen.address, chosen.source) == (f"codex:{TID}", "explicit")
            assert (await asyncio.to_thread(lambda: named_sender(app, named={"threadId": ONLY_A}))).address == f"codex:{ONLY_A}"
            with pytest.raises(AgentLinkError) as info:
                await asyncio.to_thread(lambda: named_sender(app, named={"threadId": ONLY_A, "endpointId": ep_id(b.path)}))
            assert info.value.code == "not_found"
            with pytest.raises(AgentLinkError) as info:
                await asyncio.to_thread(lambda: named_sender(app, named={"threadId": TID, "endpointId": "ep_0000000000000000"}))
            assert info.value.code == "not_found"
            with pytest.raises(AgentLinkError) as info:  # nobody knows it: no harness recognises it
                await asyncio.to_thread(lambda: named_sender(app, named={"threadId": NOWHERE}))
            assert info.value.code == "invalid_arguments"
            make_rollout(Path(os.environ["CODEX_HOME"]), NOWHERE)  # a local transcript is enough
            assert (await asyncio.to_thread(lambda: named_sender(app, named={"threadId": NOWHERE}))).address == f"codex:{NOWHERE}"
        finally:
            await app.aclose()
        # on the command line: one line saying what to do
        result = await cli("status", new_message_id(), "--from-thread", TID)
        assert result.exit_code == 1 and result.stderr.count("\n") == 1 and "--from-endpoint" in result.stderr


async def test_sessions_report_each_dead_endpoint_and_stay_incomplete(short_tmp: Path, mini_server: Any,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    listing = {"thread/list": lambda m, p: {"data": [] if p["archived"] else [thread(TID)], "nextCursor": None},
               "thread/loaded/list": lambda m, p: {"data": [], "nextCursor": None}}
    async with mini_server(short_tmp / "a.sock", listing, codex_home="/homes/a") as live:
        async with mini_server(short_tmp / "b.sock") as doomed:
            assert (await cli("endpoints", "add", str(doomed.path), "--label", "doomed")).exit_code == 0
        monkeypatch.setenv("AGENT_LINK_CODEX_SOCK", str(live.path))
        result = await cli("sessions", "--json")
        bare = await cli("send", TID, "hi", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    codex = data["providers"]["codex"]
    assert codex["complete"] is False and codex["source"] == "app-server"
    # the default control socket is absent (no daemon): left out, not a failure
    assert [(e["id"], e["source"], e["label"], e["reachable"]) for e in codex["endpoints"]] == [
        (ep_id(live.path), "env-sock", None, True), (ep_id(doomed.path), "registered", "doomed", False)]
    assert f"agent-link: codex endpoint {ep_id(doomed.path)} (registered) is unreachable" in result.stderr
    [session] = data["sessions"]
    assert (session["address"], session["endpointAddress"], session["cwd"]) == (f"codex:{TID}", f"{ep_id(live.path)}:{TID}", "proj")
    assert str(short_tmp) not in result.stdout
    # a bare id is not resolved from an incomplete listing
    assert bare.exit_code == 1 and json.loads(bare.stdout)["error"]["code"] == "codex_unavailable"


class Pushable:
    """A scripted thread for pushes: ``turn/start`` refuses as overloaded ``busy`` times, then
    lands the message (echo notification, visible in ``thread/items/list``)."""

    def __init__(self, server: Any, mini_error: Any, busy: int = 0) -> None:
        self.server, self.error, self.busy = server, mini_error, busy
        self.items: list[dict[str, Any]] = []
        server.handlers.update({"thread/read": self.read, "thread/resume": self.read, "turn/start": self.start,
                                "thread/items/list": self.items_list})

    def read(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"thread": thread(TID)}

    async def start(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self.busy:
            self.busy -= 1
            raise self.error("Server overloaded; retry later.", code=-32001)
        item = {"type": "userMessage", "id": f"item-{len(self.items)}", "clientId": params["clientUserMessageId"]}
        self.items.append({"turnId": "turn-1", "item": item})
        loop = asyncio.get_running_loop()
        loop.call_later(0.01, lambda: asyncio.ensure_future(
            self.server.notify("item/completed", {"threadId": TID, "turnId": "turn-1", "item": item})))
        return {"turn": {"id": "turn-1", "status": "inProgress"}}

    def items_list(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"data": list(reversed(self.items))}


async def test_overload_is_retried_and_only_accepted_pushes_count(mini: Any, mini_error: Any, monkeypatch: pytest.MonkeyPatch,
                                                                  isolated_env: Path) -> None:
    pushable = Pushable(mini, mini_error, busy=2)
    monkeypatch.setenv("AGENT_LINK_CODEX_SOCK", str(mini.path))
    once = await cli("send", f"codex:{TID}", "no retries", "--json")
    assert once.exit_code == 0 and json.loads(once.stdout)["outcome"] == "queued"
    assert [w["code"] for w in json.loads(once.stdout)["warnings"]] == ["codex_overloaded"]
    retried = await cli("send", f"codex:{TID}", "with retries", "--retry-count", "3", "--retry-delay-ms", "1", "--json")
    data = json.loads(retried.stdout)
    assert retried.exit_code == 0 and data["outcome"] == "delivered" and data["attempts"] == 2
    assert [i["item"]["clientId"] for i in pushable.items] == [data["messageId"]]
    store = Store(isolated_env / "agent-link.db", (*CORE_MIGRATIONS, *MIGRATIONS))
    try:
        rows = {r["message_id"]: r for r in store.conn.execute("SELECT * FROM codex_pushes")}
    finally:
        store.close()
    first = json.loads(once.stdout)["messageId"]
    assert (rows[first]["state"], rows[first]["attempts"]) == ("failed", 0)  # refused pushes are not attempts
    assert (rows[data["messageId"]]["state"], rows[data["messageId"]]["attempts"]) == ("confirmed", 1)


@pytest.fixture
async def deliverer(short_tmp: Path, mini: Any, tmp_path: Path) -> Any:
    service = CodexService({"AGENT_LINK_CODEX_SOCK": str(mini.path), "AGENT_LINK_CODEX_AUTOSTART": False, "AGENT_LINK_CODEX_IDLE_MS": 0},
                           {"CODEX_HOME": str(short_tmp / "codex-home"), "HOME": str(short_tmp)}, short_tmp / "state", list)
    store = Store(tmp_path / "db.sqlite", (*CORE_MIGRATIONS, *MIGRATIONS))
    yield Deliverer(service, PushClaims(store))
    await service.aclose()
    store.close()


async def test_lost_answer_is_unknown_and_a_later_push_checks_the_thread_first(deliverer: Deliverer, mini: Any,
                                                                               mini_error: Any) -> None:
    pushable = Pushable(mini, mini_error)

    def cut(method: str, params: dict[str, Any]) -> None:
        raise ConnectionResetError("the answer is lost")  # the server drops the connection after the request

    mini.handlers["turn/start"] = cut
    lost = await deliverer.push("M1", TID, "text", {})
    assert lost.unknown and not lost.delivered and not lost.retryable
    assert [w["code"] for w in lost.warnings] == ["codex_push_unverified"] and deliverer.claims.get("M1")["state"] == "unknown"
    # it had landed: a new push finds it in the thread and sends nothing
    pushable.items.append({"turnId": "turn-0", "item": {"type": "userMessage", "id": "item-x", "clientId": "M1"}})
    mini.handlers["turn/start"] = pushable.start
    again = await deliverer.push("M1", TID, "text", {})
    assert again.delivered and again.fields["action"] == "already_delivered"
    assert [w["code"] for w in again.warnings] == ["codex_push_response_lost"]
    assert deliverer.claims.get("M1")["state"] == "confirmed" and len(pushable.items) == 1
    # verifiably absent: pushed once now
    deliverer.claims.claim("M2", TID, "ep")
    deliverer.claims.settle("M2", "unknown")
    pushed = await deliverer.push("M2", TID, "text", {})
    assert pushed.delivered and pushed.fields["action"] == "started_turn" and deliverer.claims.get("M2")["attempts"] == 2
    # the thread cannot be read: still unknown, nothing sent
    deliverer.claims.claim("M3", TID, "ep")
    deliverer.claims.settle("M3", "unknown")
    mini.handlers["thread/items/list"] = refusing(mini_error("thread history unavailable"))
    still = await deliverer.push("M3", TID, "text", {})
    assert still.unknown and still.fields["action"] == "unverified" and deliverer.claims.get("M3")["state"] == "unknown"
    assert [i["item"]["clientId"] for i in pushable.items] == ["M1", "M2"]


async def test_only_failures_before_acceptance_are_retryable(deliverer: Deliverer, mini: Any, mini_error: Any,
                                                             short_tmp: Path) -> None:
    pushable = Pushable(mini, mini_error, busy=1)
    mini.handlers["thread/read"] = refusing(mini_error("busy", code=-32001))
    early = await deliverer.push("M0", TID, "text", {})  # refused while looking the thread up
    assert early.retryable and [w["code"] for w in early.warnings] == ["codex_overloaded"] and deliverer.claims.get("M0") is None
    mini.handlers["thread/read"] = pushable.read
    deliverer.service._located.clear()
    busy = await deliverer.push("M1", TID, "text", {})
    assert busy.retryable and not busy.unknown and busy.fields["action"] == "not_sent"
    assert (deliverer.claims.get("M1")["state"], deliverer.claims.get("M1")["attempts"]) == ("failed", 0)
    assert (await deliverer.push("M1", TID, "text", {})).delivered  # the retry is a first attempt
    mini.handlers["turn/start"] = refusing(mini_error("input too long"))
    with pytest.raises(AgentLinkError) as info:  # a definite refusal: not retried
        await deliverer.push("M2", TID, "text", {})
    assert info.value.code == "upstream_error" and deliverer.claims.get("M2")["state"] == "failed"
    # nothing reachable before anything was sent: retryable, and no socket path in what the sender sees
    nobody = CodexService({"AGENT_LINK_CODEX_SOCK": str(short_tmp / "nobody.sock"), "AGENT_LINK_CODEX_AUTOSTART": False},
                          {"CODEX_HOME": str(short_tmp / "h")}, short_tmp / "state", list)
    down = await Deliverer(nobody, deliverer.claims).push("M4", TID, "text", {})
    assert down.retryable and not down.unknown and [w["code"] for w in down.warnings] == ["codex_unavailable"]
    assert down.warnings[0]["details"] == {"reason": "explicit-endpoint-unreachable"} and "nobody.sock" not in json.dumps(down.warnings)
    # ... but a message whose earlier answer was lost stays unknown until its thread is checked
    deliverer.claims.claim("M5", TID, "ep")
    deliverer.claims.settle("M5", "unknown")
    still = await Deliverer(nobody, deliverer.claims).push("M5", TID, "text", {})
    assert still.retryable and still.unknown and deliverer.claims.get("M5")["state"] == "unknown"
    assert pushable.items[0]["item"]["clientId"] == "M1" and len(pushable.items) == 1


async def test_unknown_outcome_exits_3_and_retry_unknown_rechecks(mini: Any, mini_error: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    pushable = Pushable(mini, mini_error)
    monkeypatch.setenv("AGENT_LINK_CODEX_SOCK", str(mini.path))

    def land_then_cut(method: str, params: dict[str, Any]) -> None:
        pushable.items.append({"turnId": "turn-1", "item": {"type": "userMessage", "id": "i1", "clientId": params["clientUserMessageId"]}})
        raise ConnectionResetError("the answer is lost")

    mini.handlers["turn/start"] = land_then_cut
    mid = new_message_id()
    lost = await cli("send", f"codex:{TID}", "hello", "--message-id", mid, "--retry-count", "2", "--json")
    assert lost.exit_code == EXIT_UNKNOWN and json.loads(lost.stdout)["outcome"] == "unknown"
    assert json.loads(lost.stdout)["attempts"] == 1  # never retried automatically
    plain = await cli("send", f"codex:{TID}", "hello", "--message-id", mid, "--json")
    assert plain.exit_code == EXIT_UNKNOWN and json.loads(plain.stdout)["duplicate"] is True
    retried = await cli("send", f"codex:{TID}", "hello", "--message-id", mid, "--retry-unknown", "--json")
    assert retried.exit_code == 0 and json.loads(retried.stdout)["outcome"] == "delivered"
    assert [i["item"]["clientId"] for i in pushable.items] == [mid]
    assert len([m for m, _ in mini.requests if m == "turn/start"]) == 1


def crashed_send(state_dir: Path, message_id: str, body: str, *, claim_owner: int | None) -> None:
    """What a ``send`` killed mid-way leaves: the stored row and, with ``claim_owner``, the
    push claim it had taken (owned by that, now dead, process)."""
    from agent_link_core.mailbox import Mailbox
    from agent_link_core.model import Caller
    from agent_link_core.records import OutgoingMessage

    app = App.create()
    try:
        msg = OutgoingMessage(id=message_id, sender=Caller("team:me", "explicit", None), to=f"codex:{TID}", recipient=f"codex:{TID}",
                              body=body, anticipation="fyi", reply_by_ms=None, reply_to=None)
        Mailbox.store_message(app.mailbox, msg)
    finally:
        app.close()
    if claim_owner is not None:
        store = Store(state_dir / "agent-link.db", (*CORE_MIGRATIONS, *MIGRATIONS))
        try:
            PushClaims(store).claim(message_id, TID, "ep")
            with store.write() as conn:
                conn.execute("UPDATE codex_pushes SET owner_pid = ? WHERE message_id = ?", (claim_owner, message_id))
        finally:
            store.close()


def dead_pid() -> int:
    import subprocess

    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


async def test_a_resend_finishes_what_a_crashed_send_left(mini: Any, mini_error: Any, monkeypatch: pytest.MonkeyPatch,
                                                          isolated_env: Path) -> None:
    pushable = Pushable(mini, mini_error)
    monkeypatch.setenv("AGENT_LINK_CODEX_SOCK", str(mini.path))
    resend = ("--from", "team:me", "--json")
    starts = lambda: [p["clientUserMessageId"] for m, p in mini.requests if m == "turn/start"]  # noqa: E731

    # killed after storing the row, before any push: the resend pushes it, once
    stored_only = new_message_id()
    crashed_send(isolated_env, stored_only, "stored only", claim_owner=None)
    result = await cli("send", f"codex:{TID}", "stored only", "--message-id", stored_only, *resend)
    data = json.loads(result.stdout)
    assert data["outcome"] == "delivered" and data["duplicate"] is True and data["attempts"] == 1, data
    again = json.loads((await cli("send", f"codex:{TID}", "stored only", "--message-id", stored_only, *resend)).stdout)
    assert again["outcome"] == "delivered" and again["attempts"] == 0
    assert starts().count(stored_only) == 1

    # killed after taking the claim, the turn had landed: the thread's echo settles it, no turn
    landed = new_message_id()
    crashed_send(isolated_env, landed, "landed", claim_owner=dead_pid())
    pushable.items.append({"turnId": "turn-0", "item": {"type": "userMessage", "id": "item-x", "clientId": landed}})
    data = json.loads((await cli("send", f"codex:{TID}", "landed", "--message-id", landed, *resend)).stdout)
    assert data["outcome"] == "delivered" and landed not in starts(), data
    assert "codex_push_response_lost" in {w["code"] for w in data["warnings"]}

    # killed after taking the claim, before the turn request: no echo, so it is pushed, once
    never_sent = new_message_id()
    crashed_send(isolated_env, never_sent, "never sent", claim_owner=dead_pid())
    data = json.loads((await cli("send", f"codex:{TID}", "never sent", "--message-id", never_sent, *resend)).stdout)
    assert data["outcome"] == "delivered" and starts().count(never_sent) == 1, data
    await cli("send", f"codex:{TID}", "never sent", "--message-id", never_sent, "--retry-unknown", *resend)
    assert starts().count(never_sent) == 1

    # a claim whose owner still runs (another process mid-push) is left to it: nothing is pushed
    import subprocess

    owner = subprocess.Popen(["sleep", "60"])
    try:
        live = new_message_id()
        crashed_send(isolated_env, live, "in flight", claim_owner=owner.pid)
        data = json.loads((await cli("send", f"codex:{TID}", "in flight", "--message-id", live, *resend)).stdout)
    finally:
        owner.kill()
        owner.wait()
    assert data["outcome"] == "queued" and live not in starts(), data
    assert "codex_push_claimed_elsewhere" in {w["code"] for w in data["warnings"]}


def test_no_codex_at_all_is_not_available(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # no app-server reached, no transcripts: nothing to list, so not "available" beside the reason why
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "codex listings")
    result = CliRunner().invoke(build_cli(), ["sessions", "--json", "--harness", "codex"])
    codex = json.loads(result.stdout)["providers"]["codex"]
    assert codex["available"] is False and codex["reason"] and codex["count"] == 0


@pytest.mark.parametrize("command", ["send", "wait", "status"])
def test_help_lists_the_thread_sender_options_without_opening_the_database(command: str, tmp_path: Path) -> None:
    """The sender options come from the harness's declaration: a help lists them and creates no state."""
    from agent_link_testing.cli_runner import core_process

    state = tmp_path / "never-made"
    done = core_process(command, "--help", env={"AGENT_LINK_STATE_DIR": str(state)}, plugins=("codex",))
    assert done.returncode == 0 and "--from-thread" in done.stdout and "--from-endpoint" in done.stdout, done.stderr
    assert not state.exists()
