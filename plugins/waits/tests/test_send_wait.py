"""``agent-link send --wait`` (the options this plugin gives the core's ``send``: agent_link_waits/cli.py): the send's
line, then the answer or exit 6; alike on the console script's path (the fast parser leaves ``--wait`` to click) and
click's; a wait that fails leaves the message stored, one line naming it; Ctrl-C says what was sent; without the plugin
``send`` has no ``--wait``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_link_core import cli_run
from agent_link_core.app import App
from agent_link_core.mailbox import new_message_id
from agent_link_testing.cli_runner import (AGENT_LINK, RUN_BOUND_S, core_env, core_process, delivery_of, installed_plugins, run_click, run_core,
                                           sent_id)
from agent_link_testing.output import masked, said_text

#: the environment of a run without any plugin (this suite loads the repository's plugins: conftest.py)
NO_PLUGINS = {"AGENT_LINK_DISABLE_PLUGINS": installed_plugins()}


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``agent-link ARGS`` as the console script runs it (fast path first), in this process, with this plugin alone."""
    return run_core(*args, env=env, plugins=("waits",))


def process(*args: str) -> subprocess.CompletedProcess[str]:
    """The same in a real ``agent-link`` process."""
    return core_process(*args, plugins=("waits",))


def through_click(*args: str) -> tuple[int, str, str]:
    """``agent-link ARGS`` through click alone, as :func:`run` would run it: (exit code, stdout, stderr)."""
    return run_click(*args, env=core_env(args, plugins=("waits",)))


def answered(body: str) -> str:
    """The id of a question from team:alice to team:bob that team:bob answered (``body``: the question)."""
    asked = sent_id("team:bob", body, "--from", "team:alice", "--anticipation", "reply")
    assert run("reply", asked, f"answer to {body}", "--from", "team:bob").returncode == 0
    return asked


@pytest.mark.parametrize("form", [(), ("--json",), ("--ndjson",)])
def test_send_wait_prints_alike_on_both_paths(form: tuple[str, ...]) -> None:
    """A resend under the id of an answered question finds the answer at once (exit 0), a fresh question times out
    (exit 6): the console script's path and click's print the same."""
    assert cli_run.parse(cli_run.import_target(cli_run.FAST_COMMANDS["send"]).params, ["t", "x", "--wait"]) is None
    for i, args in enumerate([("--timeout-ms", "100"), ("--message-id", "{answered}", "--timeout-ms", "1000")]):
        ran = []
        for way in ("fast", "slow"):  # the same length: bodyBytes alike
            filled = [a.replace("{answered}", answered(f"q{i}{way}")) for a in args]
            argv = ("send", "team:bob", f"q{i}{way}", "--from", "team:alice", "--anticipation", "reply", "--wait", *filled, *form)
            proc = run(*argv) if way == "fast" else subprocess.CompletedProcess(argv, *through_click(*argv))
            ran.append((proc.returncode, masked(proc.stdout).replace(way, "W"), masked(proc.stderr)))
            raw = proc.stdout
        assert ran[0] == ran[1]
        assert ran[0][0] == (6, 0)[i], ran[0]
        if not form:
            head = ["queued: <id> to team:bob", "timeout after <time>"] if i == 0 else \
                ["delivered: <id> to team:bob (already sent; nothing resent)", "reply after <time> (answered <time>)"]
            assert ran[0][1].splitlines()[:2] == head, ran[0][1]
        assert ran[0][2].startswith(f"waiting up to {(0.1, 1)[i]:g} s for the answer to <id> (Ctrl-C stops waiting)\n")
        if form:
            data = json.loads(raw)
            assert data["wait"]["outcome"] == ("timeout", "reply")[i] and (form == ("--json",)) == ("\n  " in raw)
            if i:  # the reply is shown as read, and it is
                assert data["wait"]["reply"]["delivery"] == "delivered" and delivery_of(data["wait"]["reply"]["id"], "team:alice") == "delivered"


def test_send_help_lists_the_options_where_the_core_had_them() -> None:
    """With the plugin ``send --help`` reads as before the options moved here; without it they are not there."""
    def options(shown: str) -> list[str]:
        return [line.split()[0] for line in shown.splitlines() if line.startswith("  --")]

    shown = run("send", "--help").stdout
    at = options(shown).index("--anticipation")
    assert options(shown)[at:at + 4] == ["--anticipation", "--wait", "--timeout-ms", "--retry-count"], shown
    assert "With --wait: how long to wait (default 60000, at most 600000). [0<=x<=600000]" in " ".join(shown.split())
    assert not {"--wait", "--timeout-ms"} & set(options(run_core("send", "--help", env=NO_PLUGINS).stdout))


@pytest.mark.parametrize(("args", "says"), [
    (("--timeout-ms", "100"), "agent-link send: --timeout-ms needs --wait (see 'agent-link send --help')\n"),
    (("--wait", "--anticipation", "fyi"),
     "agent-link send: --wait expects an answer; it cannot go with --anticipation fyi (see 'agent-link send --help')\n"),
])
def test_options_that_do_not_go_together_are_refused_before_anything_is_sent(args: tuple[str, ...], says: str) -> None:
    refused = run("send", "team:bob", "nothing", "--from", "team:alice", *args)
    assert (refused.returncode, refused.stdout, refused.stderr) == (2, "", says)
    assert run("inbox", "--as", "team:bob", "--json").stdout.count("nothing") == 0


def test_without_the_plugin_send_has_no_wait() -> None:
    for option in ("--wait", "--timeout-ms"):
        refused = run_core("send", "team:bob", "q", "--from", "team:alice", option, *(["5"] if option == "--timeout-ms" else []),
                           env=NO_PLUGINS)
        assert refused.returncode == 2 and refused.stdout == "", refused
        assert len(refused.stderr.splitlines()) == 1 and f"No such option '{option}'" in refused.stderr, refused.stderr
    assert '"q"' not in run_core("inbox", "--as", "team:bob", "--json").stdout


@pytest.mark.parametrize("fault", [SystemExit(3), RuntimeError("broken")])
def test_a_wait_that_fails_leaves_the_message_sent_and_says_how_to_follow_it(fault: BaseException, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin's wait raising (contained by the core's plugin boundary): exit 1, one line naming ``agent-link status ID``;
    the message stays stored, and a retry under its id sends nothing new."""
    from agent_link_waits.waits import Waits

    def broken(self: Waits, **_: Any) -> Any:
        raise fault

    monkeypatch.setattr(Waits, "wait", broken)
    mid = new_message_id()
    for _ in range(2):  # a retry under the same id sends nothing new
        failed = run("send", "team:bob", "are you there?", "--from", "team:alice", "--message-id", mid, "--wait")
        assert failed.returncode == 1 and failed.stdout == "", failed
        said = said_text(failed.stderr).splitlines()
        assert said[-1].startswith(f"agent-link: Waiting for the answer to {mid} failed.") and f"`agent-link status {mid}`" in said[-1], said
    app = App.create()
    try:
        assert app.store.conn.execute("SELECT count(*) FROM messages WHERE body = 'are you there?'").fetchone()[0] == 1
    finally:
        app.close()


def test_a_wait_whose_hookspec_cannot_load_fails_as_any_failed_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin's own hookspec module failing to import leaves its wait hook unspecified (the call answers ``[]``): the
    send stands and the wait fails in one line, as above, never a traceback (found by review)."""
    monkeypatch.setitem(sys.modules, "agent_link_waits.hookspecs", None)  # importing it raises ImportError
    failed = run("send", "team:bob", "still there?", "--from", "team:alice", "--wait")
    assert failed.returncode == 1 and failed.stdout == "" and "Traceback" not in failed.stderr, failed
    assert said_text(failed.stderr).splitlines()[-1].startswith("agent-link: Waiting for the answer to "), failed.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_a_reply_shown_by_send_wait_whose_output_was_lost_stays_unread() -> None:
    asked = answered("lost?")
    with open("/dev/full", "w") as full:
        lost = core_process("send", "team:bob", "lost?", "--from", "team:alice", "--anticipation", "reply", "--message-id", asked,
                            "--wait", "--timeout-ms", "0", stdout=full, plugins=("waits",))
    assert lost.returncode == 1
    assert said_text(lost.stderr).endswith(f"could not write the output (No space left on device); the message {asked} was delivered "
                                           f"all the same (`agent-link status {asked}`); the reply stays unread.\n"), lost.stderr
    reply = json.loads(run("status", asked, "--from", "team:alice", "--json").stdout)["resolution"]["replyMessageId"]
    assert delivery_of(reply, "team:alice") == "queued"


# -- moved from tests/test_cli_people.py with the code ------------------------------------


def ctrl_c_works() -> None:
    """In the child before exec: SIGINT as a terminal's Ctrl-C delivers it (a suite started in the background of a shell
    without job control inherits SIGINT ignored, and Python then never raises KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_wait_and_send_wait_time_out_with_their_own_exit_code() -> None:
    mid = sent_id("team:bob", "anyone?", "--from", "team:alice", "--anticipation", "reply")
    waited = process("wait", mid, "--from", "team:alice", "--timeout-ms", "300", "--json")
    assert waited.returncode == 6, waited.stderr
    data = json.loads(waited.stdout)
    assert data["outcome"] == "timeout" and data["waitedMs"] >= 300 and "warnings" not in data
    sent = process("send", "team:bob", "anyone?", "--from", "team:alice", "--wait", "--timeout-ms", "300", "--json")
    assert sent.returncode == 6 and json.loads(sent.stdout)["wait"]["outcome"] == "timeout"


def test_interrupting_send_wait_still_says_what_was_sent(isolated_env: Path) -> None:
    # a script of team:alice: --wait reads alice's mail, so the process must be alice
    args = ("send", "team:bob", "waiting for you", "--from", "team:alice", "--wait", "--timeout-ms", "600000")
    sender = subprocess.Popen([AGENT_LINK, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, **core_env(args, plugins=("waits",))}, preexec_fn=ctrl_c_works)
    try:
        assert sender.stderr is not None
        said = sender.stderr.readline()  # the send is done and the wait begins
        assert "waiting up to 600 s for the answer" in said, said
        message_id = said.split(" answer to ", 1)[1].split()[0]
        sender.send_signal(signal.SIGINT)
        _, err = sender.communicate(timeout=RUN_BOUND_S)
    finally:
        if sender.poll() is None:
            sender.kill()
            sender.wait()
    assert sender.returncode == 130 and f"{message_id} to team:bob (stopped waiting" in err and "Traceback" not in err, err
    assert message_id in run("inbox", "--as", "team:bob", "--json").stdout


def test_send_wait_says_the_send_once() -> None:
    """The wait's line on stderr names what it waits for; the send's own line comes once, on stdout."""
    out = process("send", "team:bob", "answer soon", "--from", "team:alice", "--wait", "--timeout-ms", "300")
    mid = out.stderr.split(" answer to ", 1)[1].split()[0]
    assert f"queued: {mid} to team:bob" in out.stdout, out.stdout
    assert "queued:" not in out.stderr and out.stdout.count(f"queued: {mid}") == 1, (out.stdout, out.stderr)


def test_interrupting_wait_exits_130_and_says_how_to_wait_again(isolated_env: Path) -> None:
    mid = sent_id("team:bob", "answer me", "--from", "team:alice", "--anticipation", "reply")
    args = ("wait", mid, "--from", "team:alice", "--timeout-ms", "600000")
    waiter = subprocess.Popen([AGENT_LINK, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, **core_env(args, plugins=("waits",))}, preexec_fn=ctrl_c_works)
    try:
        assert waiter.stderr is not None
        said = waiter.stderr.readline()  # the id is known and the wait begins
        assert f"waiting up to 600 s for the answer to {mid}" in said, said
        waiter.send_signal(signal.SIGINT)
        out, err = waiter.communicate(timeout=RUN_BOUND_S)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()
    assert waiter.returncode == 130 and "Aborted" not in err and "Traceback" not in err, err
    assert f"stopped waiting for {mid}; `agent-link wait {mid}` waits again" in err and out == ""


#: ``agent-link ARGS`` (``python -c``) with a Ctrl-C raised where one landed in CI: in the boundary's own frame, between
#: two steps of the wait (it is suspended in its sleep), not inside the wait
CTRL_C_BETWEEN_STEPS = """
import os, signal, sys
from agent_link_core import boundary
from agent_link_waits import waits
slept, real_arm, real_wait = [], boundary._arm, waits.Wakeup.wait
def wait(self, *args):
    slept.append(True)  # the wait suspends in its sleep now
    return real_wait(self, *args)
def arm(budget_s):
    if slept and sys._getframe(1).f_code.co_name == "stepped":  # its next step, about to be taken
        os.kill(os.getpid(), signal.SIGINT)  # the user's Ctrl-C: its KeyboardInterrupt comes here, in the boundary's frame
    return real_arm(budget_s)
waits.Wakeup.wait, boundary._arm = wait, arm
sys.argv[0] = "agent-link"
from agent_link_core.entry import main
main()
"""


def test_a_ctrl_c_between_two_steps_of_the_wait_ends_it_cleanly(isolated_env: Path) -> None:
    """The wait, suspended while the Ctrl-C goes through the code that drives it, cleans up before the command exits
    (CI once printed 'Exception ignored in: <coroutine object Waits.wait ...>': its cleanup ran at exit, on a closed
    database)."""
    mid = sent_id("team:bob", "answer me", "--from", "team:alice", "--anticipation", "reply")
    args = ("wait", mid, "--from", "team:alice", "--timeout-ms", "600000")
    waited = subprocess.run([sys.executable, "-c", CTRL_C_BETWEEN_STEPS, *args], capture_output=True, text=True,
                            env={**os.environ, **core_env(args, plugins=("waits",))}, timeout=RUN_BOUND_S,
                            preexec_fn=ctrl_c_works)
    assert waited.returncode == 130, waited.stderr
    assert waited.stderr.splitlines()[1:] == [f"stopped waiting for {mid}; `agent-link wait {mid}` waits again"], waited.stderr
