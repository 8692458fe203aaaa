"""A read whose marking finds the database busy says so: ``agent-link inbox`` (and ``wait``)
print the mail first and mark it read after; when another process holds the database's write
lock past the busy timeout, the mail shown stays unread (all of it: one transaction), stderr
says that in one line, and the exit is 1. The next read shows the same mail again."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable

import pytest

from agent_link_testing.cli_runner import core_process, delivery_of, run_core, sent_id
from agent_link_testing.locks import hold_write_lock
from agent_link_testing.output import said_text

BUSY = {"AGENT_LINK_BUSY_TIMEOUT_MS": "200"}
Runner = Callable[..., subprocess.CompletedProcess[str]]


def busy_line(proc: subprocess.CompletedProcess[str], undone: str) -> None:
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    said = said_text(proc.stderr)
    assert said.count("\n") == 1 and said.startswith(f"agent-link: {undone}: the agent-link database "), said
    assert "is busy" in said


# the plain read in a real process (its exit status as the shell sees it), the other forms in this one
@pytest.mark.parametrize(("form", "runner"), [((), core_process), (("--json",), run_core), (("--all",), run_core)],
                         ids=["plain-process", "json", "all"])
def test_an_inbox_read_the_busy_database_could_not_mark_says_so(form: tuple[str, ...], runner: Runner) -> None:
    ids = [sent_id("team:bob", "first", "--from", "team:alice"),
           sent_id("team:bob", "second", "--from", "team:alice", "--anticipation", "reply")]
    with hold_write_lock(os.path.join(os.environ["AGENT_LINK_STATE_DIR"], "agent-link.db")):
        proc = runner("inbox", "--as", "team:bob", *form, env=BUSY)
    assert "first" in proc.stdout and "second" in proc.stdout
    busy_line(proc, "the 2 messages shown were not marked read (the next inbox read shows them again)")
    assert [delivery_of(i, "team:alice") for i in ids] == ["queued", "queued"]  # none of them: not one of two
    again = run_core("inbox", "--as", "team:bob", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["markedDelivered"] == ids
    assert [delivery_of(i, "team:alice") for i in ids] == ["delivered", "delivered"]


@pytest.mark.installed_plugins("waits")
def test_a_waited_reply_the_busy_database_could_not_mark_stays_unread() -> None:
    asked = sent_id("team:bob", "ready?", "--from", "team:alice", "--anticipation", "reply")
    answered = run_core("reply", asked, "yes", "--from", "team:bob", "--json")
    assert answered.returncode == 0, answered.stderr
    reply_id = json.loads(answered.stdout)["messageId"]
    with hold_write_lock(os.path.join(os.environ["AGENT_LINK_STATE_DIR"], "agent-link.db")):
        proc = core_process("wait", asked, "--from", "team:alice", "--timeout-ms", "0", env=BUSY)
    assert "yes" in proc.stdout
    busy_line(proc, "the reply shown was not marked read (the next wait for it shows it again)")
    assert delivery_of(reply_id, "team:bob") == "queued"
