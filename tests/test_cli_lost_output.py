"""A read whose output never reached its reader marks nothing (issue 29): ``agent-link inbox``
and ``wait`` (and ``send --wait``) print first and mark the mail they showed read only once the
output was written. Output to a full device or a closed pipe is one stderr line and exit 1,
never a traceback, and the mail stays unread for the next read."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_link_testing.cli_identity import named_address_env
from agent_link_testing.output import said_text

AGENT_LINK = str(Path(sys.executable).parent / "agent-link")
ALL_PLUGINS = " ".join(sorted(ep.name for ep in importlib.metadata.entry_points(group="agent_link")))
RUN_BOUND_S = 120  # a bound for a hung command, never a speed expectation

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")


def run(*args: str, stdout: Any = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENT_LINK_DISABLE_PLUGINS": ALL_PLUGINS, **named_address_env(args)}
    return subprocess.run([AGENT_LINK, *args], check=False, stdout=stdout, stderr=subprocess.PIPE, env=env,
                          timeout=RUN_BOUND_S, text=True)


def to_full(*args: str) -> subprocess.CompletedProcess[str]:
    """Run with stdout on /dev/full: every write fails with ENOSPC."""
    with open("/dev/full", "w") as full:
        return run(*args, stdout=full)


def lost_one_line(proc: subprocess.CompletedProcess[str], undone: str) -> None:
    assert proc.returncode == 1
    assert said_text(proc.stderr) == f"agent-link: could not write the output (No space left on device); {undone}.\n", proc.stderr


def send(*args: str) -> str:
    proc = run("send", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return str(json.loads(proc.stdout)["messageId"])


def delivery(message_id: str, as_address: str) -> str:
    proc = run("status", message_id, "--from", as_address, "--json")
    assert proc.returncode == 0, proc.stderr
    return str(json.loads(proc.stdout)["delivery"])


@pytest.mark.parametrize("form", [(), ("--json",), ("--all",), ("--envelope",)])
def test_an_inbox_read_that_could_not_be_written_marks_nothing(form: tuple[str, ...]) -> None:
    ids = [send("team:bob", "first", "--from", "team:alice"),
           send("team:bob", "second", "--from", "team:alice", "--anticipation", "reply")]
    lost_one_line(to_full("inbox", "--as", "team:bob", *form), "nothing was marked read")
    assert [delivery(i, "team:alice") for i in ids] == ["queued", "queued"]
    read = run("inbox", "--as", "team:bob", "--json")
    data = json.loads(read.stdout)
    # shown as it stands after the read: delivered, counted out of what remains
    assert data["markedDelivered"] == ids and [m["delivery"] for m in data["messages"]] == ["delivered", "delivered"]
    assert data["remainingCount"] == 0 and data["more"] is None and data["openCount"] == 1
    assert [delivery(i, "team:alice") for i in ids] == ["delivered", "delivered"]
    again = json.loads(run("inbox", "--as", "team:bob", "--json").stdout)
    assert again["markedDelivered"] == [] and [m["id"] for m in again["messages"]] == ids[1:]  # the open reply


def test_a_closed_pipe_marks_nothing_either() -> None:
    mid = send("team:bob", "piped", "--from", "team:alice")
    env = {**os.environ, "AGENT_LINK_DISABLE_PLUGINS": ALL_PLUGINS, **named_address_env(("--as", "team:bob"))}
    proc = subprocess.Popen([AGENT_LINK, "inbox", "--as", "team:bob"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader went away before anything was read
    err = proc.stderr.read().decode()
    assert proc.wait(RUN_BOUND_S) == 1 and "Traceback" not in err
    assert said_text(err) == "agent-link: could not write the output (Broken pipe); nothing was marked read.\n"
    assert delivery(mid, "team:alice") == "queued"


def test_a_waited_reply_that_could_not_be_written_stays_unread() -> None:
    asked = send("team:bob", "ready?", "--from", "team:alice", "--anticipation", "reply")
    answered = run("reply", asked, "yes", "--from", "team:bob", "--json")
    assert answered.returncode == 0, answered.stderr
    reply_id = json.loads(answered.stdout)["messageId"]
    lost_one_line(to_full("wait", asked, "--from", "team:alice", "--timeout-ms", "0"), "the reply stays unread")
    assert delivery(reply_id, "team:bob") == "queued"
    shown = run("wait", asked, "--from", "team:alice", "--timeout-ms", "0", "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["reply"]["id"] == reply_id
    assert delivery(reply_id, "team:bob") == "delivered"


def test_other_commands_say_one_line_too() -> None:
    mid = send("team:bob", "hello", "--from", "team:alice")
    for args in (("sessions",), ("health",), ("show", mid, "--from", "team:alice")):
        proc = to_full(*args)
        assert proc.returncode == 1 and said_text(proc.stderr) == "agent-link: could not write the output (No space left on device).\n", (args, proc.stderr)
