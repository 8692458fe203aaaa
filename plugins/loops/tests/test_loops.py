"""The loop guard (agent_link_loops/plugin.py, issue 29): a message to oneself is refused, and so
are runaway exchanges: an identical message repeated within AGENT_LINK_REPEAT_WINDOW_MS, and
more than AGENT_LINK_PAIR_RATE messages between two addresses within AGENT_LINK_PAIR_WINDOW_MS. Each refusal names the
setting; raising it (or 0) lets the messages through. Through a real MCP client session too.
The plugin loads alone (``AGENT_LINK_LOAD_PLUGINS=loops``); without it there is no guard."""

from __future__ import annotations

from collections.abc import Iterator
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError
from agent_link_core.mailbox import new_message_id
from agent_link_core.model import Caller
from agent_link_testing.cli_runner import run_main
from agent_link_testing.mcp_client import agent_link_mcp
from agent_link_testing.tool_app import app_as, call_tool, stored_count
from agent_link_loops import AGENT_LINK_SETTINGS

pytestmark = pytest.mark.anyio

BOB = Caller("team:bob", "config", "team")
SETTINGS = {s["name"]: s for s in AGENT_LINK_SETTINGS["agent_link_loops.plugin"]}


@pytest.fixture(autouse=True)
def guard_on(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard as shipped (the root conftest turns it off for every other test), this plugin alone."""
    for name in ("AGENT_LINK_PAIR_RATE", "AGENT_LINK_REPEAT_WINDOW_MS"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "loops")


@pytest.fixture
def app(monkeypatch: pytest.MonkeyPatch) -> Iterator[App]:
    with app_as(monkeypatch, "team:alice") as application:
        yield application


async def send(app: App, to: str, message: str, **args: Any) -> dict[str, Any]:
    return await call_tool(app, "message_agent", to=to, message=message, **args)


def test_the_settings_are_registered_and_documented(app: App) -> None:
    readme = (Path(__file__).parents[3] / "README.md").read_text(encoding="utf-8")
    registered = {s.name: s for s in app.hooks.settings()}
    for name in ("AGENT_LINK_REPEAT_WINDOW_MS", "AGENT_LINK_PAIR_RATE", "AGENT_LINK_PAIR_WINDOW_MS"):
        assert registered[name].kind == "int" and app.config.get(name) == SETTINGS[name]["default"]
        assert f"| `{name}` | {SETTINGS[name]['default']} |" in readme


def test_a_bad_value_is_refused_naming_the_setting_and_its_range(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_PAIR_WINDOW_MS", "5")
    with pytest.raises(AgentLinkError) as info:
        App.create().close()
    assert info.value.code == "invalid_arguments"
    assert "AGENT_LINK_PAIR_WINDOW_MS='5' is invalid: expected a whole number from 1000 to 86400000." in info.value.message


async def test_without_the_plugin_there_is_no_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    """The core alone stores a message to oneself and the same message again."""
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "")
    with app_as(monkeypatch, "team:alice") as app:
        assert (await send(app, "team:alice", "note to self"))["ok"]
        first = await send(app, "team:bob", "ack")
        app.mailbox.mark_delivered(first["messageId"], "inbox")
        assert (await send(app, "team:bob", "ack"))["ok"] and stored_count(app) == 3


async def test_a_message_to_oneself_is_refused(app: App) -> None:
    out = await send(app, "team:alice", "note to self")
    assert out["error"]["code"] == "invalid_arguments"
    assert out["error"]["details"]["errors"] == [{"path": "to", "rule": "self", "expected": "another agent's address"}]
    assert "your own address" in out["error"]["message"] and stored_count(app) == 0
    with pytest.raises(Exception) as raised:  # the typed API and every plugin send through App.send
        await app.send(caller=BOB, to="team:bob", body="me again")
    assert raised.value.code == "invalid_arguments"  # type: ignore[attr-defined]


def test_a_self_send_says_it_once_in_the_cli() -> None:
    me = run_main("send", "team:alice", "to myself", "--from", "team:alice", env={"AGENT_LINK_ADDRESS": "team:alice"})
    assert me.returncode == 2 and me.stderr.count("your own") == 1, me.stderr


async def test_an_identical_message_is_refused_naming_the_setting(app: App) -> None:
    first = await send(app, "team:bob", "ack")
    assert first["ok"]
    app.mailbox.mark_delivered(first["messageId"], "inbox")  # bob saw it: saying it again is a loop
    again = await send(app, "team:bob", "ack")
    error = again["error"]
    assert error["code"] == "permission_denied" and error["details"]["reason"] == "repeated_message"
    assert error["details"]["setting"] == "AGENT_LINK_REPEAT_WINDOW_MS" and error["details"]["earlierMessageId"] == first["messageId"]
    assert "AGENT_LINK_REPEAT_WINDOW_MS" in error["hint"] and stored_count(app) == 1
    # other words, another label, or answering another message are not repeats
    assert (await send(app, "team:bob", "ack", anticipation="reply"))["ok"]
    assert (await send(app, "team:bob", "ack!"))["ok"]
    for row in app.store.conn.execute("SELECT id FROM messages WHERE first_delivered_at IS NULL").fetchall():
        app.mailbox.mark_delivered(row["id"], "inbox")
    asked = await app.send(caller=BOB, to="team:alice", body="q1", anticipation="reply")
    asked2 = await app.send(caller=BOB, to="team:alice", body="q2", anticipation="reply")
    assert (await send(app, "team:bob", "yes", replyToMessageId=asked.message["id"]))["ok"]
    assert (await send(app, "team:bob", "yes", replyToMessageId=asked2.message["id"]))["ok"]
    # a retry under its message id is not a new message
    mid = new_message_id()
    assert (await send(app, "team:carol", "hello", messageId=mid))["ok"]
    assert (await send(app, "team:carol", "hello", messageId=mid))["duplicate"] is True


async def test_the_same_message_never_delivered_is_retried_not_refused_nor_stored_twice(app: App) -> None:
    """Sending again what never reached its recipient is no loop: the send is a retry of the
    waiting message (same id, duplicate), the recipient gets it once."""
    first = await send(app, "team:carol", "x")
    again = await send(app, "team:carol", "x")
    assert again["ok"] and again["messageId"] == first["messageId"] and again["duplicate"] is True and stored_count(app) == 1


async def test_the_address_is_checked_before_the_loop_guard(app: App) -> None:
    """A typo'd address sent to twice, the second time with requireKnown, is refused for the
    address (what to fix), not as a loop."""
    assert (await send(app, "team:bbo", "typo"))["ok"]
    out = await send(app, "team:bbo", "typo", requireKnown=True)
    assert out["error"]["code"] == "not_found" and "team:bbo" in out["error"]["message"]


def test_the_cli_retries_an_undelivered_message_instead_of_refusing_it(isolated_env: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "loops presence")  # the typo's refusal is the presence plugin's
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return run_main(*args, "--from", "team:alice")

    first = cli("send", "team:carol", "x", "--require-delivered")
    again = cli("send", "team:carol", "x", "--require-delivered")
    assert (first.returncode, again.returncode) == (7, 7), again.stderr
    assert first.stdout.split()[1] == again.stdout.split()[1] and "loop" not in again.stderr
    typo = cli("send", "team:bbo", "typo")
    known = cli("send", "team:bbo", "typo", "--require-known")
    assert typo.returncode == 0 and known.returncode == 1 and "--require-known refuses unknown addresses" in known.stderr


async def test_repeats_are_allowed_when_the_window_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_ADDRESS", "team:alice")
    monkeypatch.setenv("AGENT_LINK_REPEAT_WINDOW_MS", "0")
    app = App.create()
    try:
        assert (await send(app, "team:bob", "ack"))["ok"] and (await send(app, "team:bob", "ack"))["ok"]
    finally:
        app.close()


async def test_a_runaway_exchange_is_stopped_both_ways(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_ADDRESS", "team:alice")
    monkeypatch.setenv("AGENT_LINK_PAIR_RATE", "4")
    monkeypatch.setenv("AGENT_LINK_PAIR_WINDOW_MS", "3600000")
    app = App.create()
    try:
        for n in range(2):  # two each way: the pair has used its 4
            assert (await send(app, "team:bob", f"ack {n}"))["ok"]
            await app.send(caller=BOB, to="team:alice", body=f"ack back {n}")
        out = await send(app, "team:bob", "ack 2")
        error = out["error"]
        assert error["code"] == "permission_denied" and error["details"]["reason"] == "send_rate"
        assert (error["details"]["setting"], error["details"]["limit"], error["details"]["count"]) == ("AGENT_LINK_PAIR_RATE", 4, 4)
        assert "AGENT_LINK_PAIR_RATE" in error["message"] and "AGENT_LINK_PAIR_RATE" in error["hint"]
        with pytest.raises(Exception) as raised:
            await app.send(caller=BOB, to="team:alice", body="ack back 2")
        assert raised.value.details["reason"] == "send_rate"  # type: ignore[attr-defined]
        # other pairs are not held back
        assert (await send(app, "team:carol", "hello"))["ok"]
        assert stored_count(app) == 5
    finally:
        app.close()
    monkeypatch.setenv("AGENT_LINK_PAIR_RATE", "0")
    app = App.create()
    try:
        assert (await send(app, "team:bob", "ack 2"))["ok"]
    finally:
        app.close()


async def test_agents_answering_each_others_answers_are_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each reply resolves the message it answers: the loop of two agents replying to each other."""
    monkeypatch.setenv("AGENT_LINK_PAIR_RATE", "4")
    monkeypatch.setenv("AGENT_LINK_PAIR_WINDOW_MS", "3600000")
    alice = Caller("team:alice", "config", "team")
    app = App.create()
    try:
        last = (await app.send(caller=alice, to="team:bob", body="ping", anticipation="reply")).message["id"]
        for n in range(3):  # three answers: the pair has used its 4
            me, other = (BOB, "team:alice") if n % 2 == 0 else (alice, "team:bob")
            out = await app.send(caller=me, to=other, body=f"answer {n}", anticipation="reply", reply_to=last)
            assert out.created
            last = out.message["id"]
        with pytest.raises(AgentLinkError) as raised:  # alice answers bob's answer
            await app.send(caller=alice, to="team:bob", body="answer 3", anticipation="reply", reply_to=last)
        assert raised.value.details["reason"] == "send_rate"
    finally:
        app.close()

async def test_the_guard_through_a_real_mcp_client_session(isolated_env: Any) -> None:
    env = {"AGENT_LINK_ADDRESS": "test:alice", "AGENT_LINK_PAIR_RATE": "3", "AGENT_LINK_PAIR_WINDOW_MS": "3600000"}
    async with agent_link_mcp(env) as alice:
        refused = await alice.call("message_agent", {"to": "test:alice", "message": "hi me"})
        assert refused["error"]["details"]["errors"][0]["rule"] == "self"
        assert (await alice.call("message_agent", {"to": "test:bob", "message": "ack"}))["ok"]
        async with agent_link_mcp({**env, "AGENT_LINK_ADDRESS": "test:bob"}) as bob:
            assert (await bob.call("read_agent_link_inbox", {}))["ok"]  # bob saw it: the same again is a loop
        repeated = await alice.call("message_agent", {"to": "test:bob", "message": "ack"})
        assert repeated["error"]["details"]["reason"] == "repeated_message"
        for n in range(2):
            assert (await alice.call("message_agent", {"to": "test:bob", "message": f"ack {n}"}))["ok"]
        runaway = await alice.call("message_agent", {"to": "test:bob", "message": "ack 3"})
        assert runaway["error"]["details"] == {"reason": "send_rate", "setting": "AGENT_LINK_PAIR_RATE", "limit": 3,
                                               "windowMs": 3600000, "count": 3}



def test_sends_at_once_are_held_to_the_rules(isolated_env: Any) -> None:
    """Senders in many processes at once (a runaway script, agents answering each other) pass
    no more than one sending in turn: the rules apply in the transaction that stores the
    message. Here every send is held between its checks and its store until all are."""
    import asyncio
    import threading

    from agent_link_core import hookimpl

    class Together:
        def __init__(self, parties: int) -> None:
            self.barrier = threading.Barrier(parties, timeout=30)

        @hookimpl
        def agent_link_before_send(self, msg: Any, context: Any) -> list[Any]:
            self.barrier.wait()
            return []

    def burst(sender: str, to: str, bodies: list[str]) -> list[str]:
        together, outcomes = Together(len(bodies)), []

        def one(body: str) -> None:
            app = App.create(extra_plugins=(("together", together),))
            try:
                out = asyncio.run(app.send(caller=Caller(sender, "config", "team"), to=to, body=body, anticipation="fyi"))
                outcomes.append("stored" if out.created else "retry")
            except AgentLinkError as exc:
                outcomes.append(exc.details.get("reason", exc.code))
            finally:
                app.close()

        threads = [threading.Thread(target=one, args=(body,)) for body in bodies]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        return sorted(outcomes)

    App.create().close()  # the state dir made first: what is raced here is sending, not the database's creation
    limit = SETTINGS["AGENT_LINK_PAIR_RATE"]["default"]
    assert burst("team:burst", "team:sink", [f"burst {i}" for i in range(12)]) == ["send_rate"] * (12 - limit) + ["stored"] * limit
    assert burst("team:dup", "team:dupsink", ["identical body"] * 6) == ["retry"] * 5 + ["stored"]
