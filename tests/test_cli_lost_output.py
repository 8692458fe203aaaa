"""A read whose output never reached its reader marks nothing (issue 29): ``agent-link inbox``
(and ``wait``, ``send --wait``: plugins/waits/tests) prints first and marks the mail it showed read only once the
output was written. Output to a full device or a closed pipe is one stderr line and exit 1,
never a traceback, and the mail stays unread for the next read."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest

from agent_link_testing.cli_runner import AGENT_LINK, RUN_BOUND_S, core_env, core_process, delivery_of, run_core, sent_id
from agent_link_testing.output import said_text

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")


def to_full(*args: str) -> subprocess.CompletedProcess[str]:
    """Run with stdout on /dev/full: every write fails with ENOSPC."""
    with open("/dev/full", "w") as full:
        return core_process(*args, stdout=full)


def lost_one_line(proc: subprocess.CompletedProcess[str], undone: str) -> None:
    assert proc.returncode == 1
    assert said_text(proc.stderr) == f"agent-link: could not write the output (No space left on device); {undone}.\n", proc.stderr


@pytest.mark.parametrize("form", [(), ("--json",), ("--all",), ("--envelope",)])
def test_an_inbox_read_that_could_not_be_written_marks_nothing(form: tuple[str, ...]) -> None:
    ids = [sent_id("team:bob", "first", "--from", "team:alice"),
           sent_id("team:bob", "second", "--from", "team:alice", "--anticipation", "reply")]
    lost_one_line(to_full("inbox", "--as", "team:bob", *form), "nothing was marked read")
    assert [delivery_of(i, "team:alice") for i in ids] == ["queued", "queued"]
    read = run_core("inbox", "--as", "team:bob", "--json")
    data = json.loads(read.stdout)
    # shown as it stands after the read: delivered, counted out of what remains
    assert data["markedDelivered"] == ids and [m["delivery"] for m in data["messages"]] == ["delivered", "delivered"]
    assert data["remainingCount"] == 0 and data["more"] is None and data["openCount"] == 1
    assert [delivery_of(i, "team:alice") for i in ids] == ["delivered", "delivered"]
    again = json.loads(run_core("inbox", "--as", "team:bob", "--json").stdout)
    assert again["markedDelivered"] == [] and [m["id"] for m in again["messages"]] == ids[1:]  # the open reply


def test_a_closed_pipe_marks_nothing_either() -> None:
    mid = sent_id("team:bob", "piped", "--from", "team:alice")
    env = {**os.environ, **core_env(("--as", "team:bob"))}
    proc = subprocess.Popen([AGENT_LINK, "inbox", "--as", "team:bob"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader went away before anything was read
    err = proc.stderr.read().decode()
    assert proc.wait(RUN_BOUND_S) == 1 and "Traceback" not in err
    assert said_text(err) == "agent-link: could not write the output (Broken pipe); nothing was marked read.\n"
    assert delivery_of(mid, "team:alice") == "queued"


def test_other_commands_say_one_line_too() -> None:
    mid = sent_id("team:bob", "hello", "--from", "team:alice")
    for args in (("health",), ("show", mid, "--from", "team:alice")):
        proc = to_full(*args)
        assert proc.returncode == 1 and said_text(proc.stderr) == "agent-link: could not write the output (No space left on device).\n", (args, proc.stderr)


@pytest.mark.parametrize("form", [(), ("--json",)])
def test_a_send_or_reply_whose_output_is_lost_says_what_was_stored(form: tuple[str, ...]) -> None:
    """The message or the answer stands though nothing was printed: the line says so, with the
    message's id, so nobody sends it again blindly (a send's exit 1 is otherwise a refusal)."""
    proc = to_full("send", "team:bob", f"lost output {form}", "--from", "team:alice", "--anticipation", "reply", *form)
    sent = json.loads(run_core("inbox", "--as", "team:bob", "--peek", "--json").stdout)["messages"][-1]["id"]
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    # the last line (with --json the warnings come first, on stderr as always)
    assert said_text(proc.stderr).splitlines()[-1] == ("agent-link: could not write the output (No space left on device); "
                                                       f"the message {sent} was queued all the same (`agent-link status {sent}`).")
    lost_one_line(to_full("reply", sent, "yes", "--from", "team:bob", *form), f"the reply to {sent} was stored all the same")
    assert json.loads(run_core("status", sent, "--from", "team:alice", "--json").stdout)["status"] == "replied"
    refused = to_full("send", "team:bob", "", "--from", "team:alice", *form)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr  # refused before anything was printed


def closed(redirect: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``agent-link ARGS`` started by sh with ``redirect`` (``>&-``, ``<&-``, ``2>&-``): Python's stream is None."""
    command = " ".join(shlex.quote(a) for a in (AGENT_LINK, *args)) + f" {redirect}"
    return subprocess.run(["sh", "-c", command], env={**os.environ, **core_env(args)}, capture_output=True, text=True,
                          timeout=RUN_BOUND_S)


def test_a_closed_stream_is_one_line_and_changes_nothing() -> None:
    mid = sent_id("team:bob", "waiting", "--from", "team:alice")
    nothing = "agent-link: could not write the output (stdout is closed); nothing was done.\n"
    for args in (("inbox", "--as", "team:bob"), ("inbox", "--as", "team:bob", "--peek"), ("send", "team:bob", "lost", "--from", "team:alice"),
                 ("health",), ("config", "list", "--json")):
        proc = closed(">&-", *args)
        assert (proc.returncode, proc.stderr) == (1, nothing), args
    no_stdin = closed("<&-", "send", "team:bob", "-", "--from", "team:alice")
    assert no_stdin.returncode == 2 and "stdin (the stream is closed)" in no_stdin.stderr and "Traceback" not in no_stdin.stderr
    mcp = closed("<&-", "mcp")
    assert (mcp.returncode, mcp.stderr) == (1, "agent-link: could not read the input (stdin is closed); nothing was done.\n")
    quiet = closed("2>&-", "status", mid, "--from", "team:alice")  # no stderr: the command still runs and says its result
    assert quiet.returncode == 0 and mid in quiet.stdout
    peek = json.loads(run_core("inbox", "--as", "team:bob", "--peek", "--json").stdout)
    assert [m["id"] for m in peek["messages"]] == [mid] and delivery_of(mid, "team:alice") == "queued"  # nothing sent, nothing read


def test_closed_slots_are_filled_so_no_later_file_lands_on_them() -> None:
    """With stdin and stderr closed, the null device takes descriptors 0 and 2: a file opened later (a log, a cache) gets
    a descriptor above 2, never the one a child process inherits as its stderr (found by review: it got 2)."""
    probe = ("import os, sys; from agent_link_core import entry; entry._closed_streams(['status']); "
             "fd = os.open(os.devnull, os.O_RDONLY); sys.stdout.write(f'{fd} {os.path.samefile(\"/proc/self/fd/2\", os.devnull)}')")
    proc = subprocess.run(["sh", "-c", f"{shlex.quote(sys.executable)} -c {shlex.quote(probe)} <&- 2>&-"],
                          capture_output=True, text=True, timeout=RUN_BOUND_S)
    assert proc.stdout == "3 True", proc.stdout
