"""``agent-link wait`` (agent_link_waits/cli.py): the note of a wait on an fyi message, exit 6 whatever ends a wait
without an answer, and a reply whose output was lost staying unread (moved from the core's suites with the code)."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_waits.cli import EXIT_TIMEOUT
from agent_link_testing.cli_plugins import add_cli_plugins
from agent_link_testing.cli_runner import core_process, delivery_of, invoke as run, run_core, sent_id
from agent_link_testing.harnesses import HarnessPlugin, ScriptedHarness
from agent_link_testing.output import said_text


@pytest.fixture
def harness(monkeypatch: pytest.MonkeyPatch) -> ScriptedHarness:
    """A scripted harness ``sx`` whose sessions ``ok`` and ``quiet`` take mail, in every CLI run of the test."""
    h = ScriptedHarness("sx", ("ok", "quiet"))
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "codex claude roles receipts")
    add_cli_plugins(monkeypatch, HarnessPlugin(h))
    return h


def out_json(result: Any) -> dict[str, Any]:
    return json.loads(result.stdout)


def test_wait_on_an_fyi_message_says_first_that_no_answer_is_expected(harness: ScriptedHarness) -> None:
    mid = out_json(run("send", "sx:quiet", "fyi only", "--from", "team:me", "--json"))["messageId"]
    waited = run("wait", mid, "--from", "team:me", "--timeout-ms", "100")
    assert waited.exit_code == EXIT_TIMEOUT
    note = f"note: {mid} was sent as fyi: its recipient is not asked to answer, so a wait on it usually times out."
    assert waited.stderr.splitlines()[0] == note  # before the wait runs, not after
    assert [w["code"] for w in out_json(run("wait", mid, "--from", "team:me", "--timeout-ms", "0", "--json"))["warnings"]] == [
        "no_answer_expected"]
    asked = out_json(run("send", "sx:quiet", "a question", "--anticipation", "reply", "--from", "team:me", "--json"))["messageId"]
    assert "note:" not in run("wait", asked, "--from", "team:me", "--timeout-ms", "100").stderr


def test_a_wait_that_ends_without_an_answer_exits_6_whatever_ended_it(harness: ScriptedHarness) -> None:
    """A message that went unresolved (or expired) ends the wait without an answer: exit 6, as a timeout does,
    so `agent-link wait ID && use_the_answer` never takes it for one; a decline is an answer (exit 0)."""
    asked = out_json(run("send", "sx:ok", "q?", "--anticipation", "reply", "--from", "team:me", "--json"))["messageId"]
    app = App.create()
    try:  # delivered an hour ago, and never answered
        with app.store.write() as conn:
            conn.execute("UPDATE messages SET sent_at = sent_at - 3600000, first_delivered_at = first_delivered_at - 3600000"
                         " WHERE id = ?", (asked,))
    finally:
        app.close()
    no_reminders = {"AGENT_LINK_REMINDER_LIMIT": "0"}
    waited = run("wait", asked, "--from", "team:me", "--timeout-ms", "1000", "--json", env=no_reminders)
    assert waited.exit_code == EXIT_TIMEOUT and out_json(waited)["outcome"] == "unresolved"
    declined = out_json(run("send", "sx:quiet", "do it", "--anticipation", "action", "--from", "team:me", "--json"))["messageId"]
    assert run("reply", declined, "no time", "--decline", "--from", "sx:quiet").exit_code == 0
    assert run("wait", declined, "--from", "team:me", "--timeout-ms", "100").exit_code == 0


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_a_waited_reply_that_could_not_be_written_stays_unread() -> None:
    asked = sent_id("team:bob", "ready?", "--from", "team:alice", "--anticipation", "reply")
    answered = run_core("reply", asked, "yes", "--from", "team:bob", "--json")
    assert answered.returncode == 0, answered.stderr
    reply_id = json.loads(answered.stdout)["messageId"]
    with open("/dev/full", "w") as full:  # every write fails with ENOSPC
        lost = core_process("wait", asked, "--from", "team:alice", "--timeout-ms", "0", stdout=full, plugins=("waits",))
    assert lost.returncode == 1
    assert said_text(lost.stderr) == "agent-link: could not write the output (No space left on device); the reply stays unread.\n"
    assert delivery_of(reply_id, "team:bob") == "queued"
    shown = run_core("wait", asked, "--from", "team:alice", "--timeout-ms", "0", "--json", plugins=("waits",))
    assert shown.returncode == 0 and json.loads(shown.stdout)["reply"]["id"] == reply_id
    assert delivery_of(reply_id, "team:bob") == "delivered"
