"""A read whose marking finds the database busy says so: ``agent-link inbox`` (and ``wait``)
print the mail first and mark it read after; when another process holds the database's write
lock past the busy timeout, the mail shown stays unread (all of it: one transaction), stderr
says that in one line, and the exit is 1. The next read shows the same mail again."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_link_testing.cli_identity import named_address_env
from agent_link_testing.locks import hold_write_lock
from agent_link_testing.output import said_text

AGENT_LINK = str(Path(sys.executable).parent / "agent-link")
ALL_PLUGINS = " ".join(sorted(ep.name for ep in importlib.metadata.entry_points(group="agent_link")))
RUN_BOUND_S = 120  # a bound for a hung command, never a speed expectation


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENT_LINK_DISABLE_PLUGINS": ALL_PLUGINS, "AGENT_LINK_BUSY_TIMEOUT_MS": "200",
           **named_address_env(args)}
    return subprocess.run([AGENT_LINK, *args], check=False, capture_output=True, env=env, timeout=RUN_BOUND_S, text=True)


def send(*args: str) -> str:
    proc = run("send", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return str(json.loads(proc.stdout)["messageId"])


def delivery(message_id: str, as_address: str) -> str:
    proc = run("status", message_id, "--from", as_address, "--json")
    assert proc.returncode == 0, proc.stderr
    return str(json.loads(proc.stdout)["delivery"])



def busy_line(proc: subprocess.CompletedProcess[str], undone: str) -> None:
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    said = said_text(proc.stderr)
    assert said.count("\n") == 1 and said.startswith(f"agent-link: {undone}: the agent-link database "), said
    assert "is busy" in said


@pytest.mark.parametrize("form", [(), ("--json",), ("--all",)])
def test_an_inbox_read_the_busy_database_could_not_mark_says_so(form: tuple[str, ...]) -> None:
    ids = [send("team:bob", "first", "--from", "team:alice"),
           send("team:bob", "second", "--from", "team:alice", "--anticipation", "reply")]
    with hold_write_lock(os.path.join(os.environ["AGENT_LINK_STATE_DIR"], "agent-link.db")):
        proc = run("inbox", "--as", "team:bob", *form)
    assert "first" in proc.stdout and "second" in proc.stdout
    busy_line(proc, "the 2 messages shown were not marked read (the next inbox read shows them again)")
    assert [delivery(i, "team:alice") for i in ids] == ["queued", "queued"]  # none of them: not one of two
    again = run("inbox", "--as", "team:bob", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["markedDelivered"] == ids
    assert [delivery(i, "team:alice") for i in ids] == ["delivered", "delivered"]


def test_a_waited_reply_the_busy_database_could_not_mark_stays_unread() -> None:
    asked = send("team:bob", "ready?", "--from", "team:alice", "--anticipation", "reply")
    answered = run("reply", asked, "yes", "--from", "team:bob", "--json")
    assert answered.returncode == 0, answered.stderr
    reply_id = json.loads(answered.stdout)["messageId"]
    with hold_write_lock(os.path.join(os.environ["AGENT_LINK_STATE_DIR"], "agent-link.db")):
        proc = run("wait", asked, "--from", "team:alice", "--timeout-ms", "0")
    assert "yes" in proc.stdout
    busy_line(proc, "the reply shown was not marked read (the next wait for it shows it again)")
    assert delivery(reply_id, "team:bob") == "queued"
