"""A plugin hook that hung (interrupted after the hook budget) in one agent-link process is
skipped by the processes of the same state dir that follow, for ``HUNG_SKIP_S``: each command
would otherwise wait the whole budget again (30 s by default) before doing its work. Real
processes, a plugin installed as a distribution."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from agent_link_core.boundary import HUNG_SKIP_S
from agent_link_testing.dists import install_dist

PLUGIN = '''
import os
import time

from agent_link_core import hookimpl


@hookimpl
def agent_link_before_send(message, context):
    with open(os.environ["SLEEPY_CALLS"], "a") as f:
        f.write("called\\n")
    time.sleep(120)
    return []
'''


def test_a_hook_that_hung_in_one_process_is_skipped_by_the_next(tmp_path: Path) -> None:
    site = tmp_path / "site"
    install_dist(site, "agent_link_sleepy", {"plugin.py": PLUGIN}, entry_name="sleepy", entry_module="agent_link_sleepy.plugin")
    calls = tmp_path / "calls"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_LINK_")}
    env.update(HOME=str(tmp_path / "home"), AGENT_LINK_STATE_DIR=str(tmp_path / "state"), AGENT_LINK_LOAD_PLUGINS="sleepy",
               AGENT_LINK_HOOK_TIMEOUT_MS="1000", AGENT_LINK_ADDRESS="team:alice", SLEEPY_CALLS=str(calls),
               PYTHONPATH=os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")])))

    def send(text: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "agent_link_core", "send", "team:bob", text], env=env, capture_output=True,
                              text=True, timeout=120)

    first = send("one")
    assert first.returncode == 0 and "'sleepy' failed in agent_link_before_send: did not return within 1000 ms" in first.stderr, first.stderr
    second, third = send("two"), send("three")
    for later in (second, third):
        assert later.returncode == 0 and later.stdout.startswith("queued:"), later.stderr
        assert "'sleepy' failed in agent_link_before_send: hung in another agent-link process" in later.stderr, later.stderr
        assert f"skipped until {HUNG_SKIP_S // 60} min have passed" in later.stderr
    assert calls.read_text().splitlines() == ["called"]  # the later sends never called it
    # a command that never calls that hook says nothing of it (every command printed the notice for 10 min)
    inbox = subprocess.run([sys.executable, "-m", "agent_link_core", "inbox"], env=env, capture_output=True, text=True, timeout=120)
    assert inbox.returncode == 0 and "hung in another" not in inbox.stderr, inbox.stderr
    health = subprocess.run([sys.executable, "-m", "agent_link_core", "health"], env=env, capture_output=True, text=True, timeout=120)
    assert health.returncode == 1 and "sleepy" in health.stdout + health.stderr  # still reported as broken


def test_the_skip_for_another_processs_hang_ends_with_its_time() -> None:
    """A long-lived process (an MCP server) started while a hook was skipped calls it again
    once the time the other process's hang bought is over; its own hang lasts its life."""
    import time

    from agent_link_core.boundary import Boundary

    boundary = Boundary(1000)
    boundary.skip("sleepy", "agent_link_before_send", "hung in another agent-link process", for_s=60)
    assert boundary.call("sleepy", "agent_link_before_send", lambda: "ran", default="skipped") == "skipped"
    boundary.hung[("sleepy", "agent_link_before_send")] = time.monotonic() - 1  # those 60 s are over
    assert boundary.call("sleepy", "agent_link_before_send", lambda: "ran", default="skipped") == "ran"


LOCKED_PLUGIN = '''
import os
import time

from agent_link_core import hookimpl


@hookimpl
def agent_link_record_event(event, conn):
    with open(os.environ["SLEEPY_CALLS"], "a") as f:
        f.write("called\\n")
    time.sleep(120)
'''


def test_a_hook_that_hangs_under_the_write_lock_is_cut_short_before_other_writers_give_up(tmp_path: Path) -> None:
    """A hook called while the store's write transaction is open (``agent_link_record_event``) gets a quarter of the busy
    timeout, not the hook budget (30 s by default, past the 10 s busy timeout): a send in another process, where the
    plugin is turned off, waits for the lock and goes through instead of failing with ``state_busy``."""
    import time

    site = tmp_path / "site"
    install_dist(site, "agent_link_sleepy", {"plugin.py": LOCKED_PLUGIN}, entry_name="sleepy", entry_module="agent_link_sleepy.plugin")
    calls = tmp_path / "calls"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_LINK_")}
    env.update(HOME=str(tmp_path / "home"), AGENT_LINK_STATE_DIR=str(tmp_path / "state"), AGENT_LINK_BUSY_TIMEOUT_MS="4000",
               AGENT_LINK_ADDRESS="team:p1", SLEEPY_CALLS=str(calls), PYTHONPATH=os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")])))
    agent_link = [sys.executable, "-m", "agent_link_core"]
    subprocess.run([*agent_link, "inbox"], env=env, capture_output=True, timeout=120, check=True)  # the database, migrated
    hanging = subprocess.Popen([*agent_link, "send", "team:p2", "x"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not calls.exists() and time.monotonic() < deadline and hanging.poll() is None:
        time.sleep(0.02)
    assert calls.exists(), hanging.communicate()
    started = time.monotonic()
    other = subprocess.run([*agent_link, "send", "team:q2", "innocent"], env={**env, "AGENT_LINK_ADDRESS": "team:q1",
                           "AGENT_LINK_DISABLE_PLUGINS": "sleepy"}, capture_output=True, text=True, timeout=120)
    assert other.returncode == 0 and other.stdout.startswith("queued:"), other.stderr
    assert time.monotonic() - started < 4  # it waited the hang's 1 s budget at most, not the busy timeout
    out, err = hanging.communicate(timeout=60)
    assert hanging.returncode == 0 and out.startswith("queued:"), err
    assert "'sleepy' failed in agent_link_record_event: did not return within 1000 ms" in err, err
