"""Waits wake on the event (issue 25): a commit in one process wakes a waiter in another (agent_link_core/wake.py, plugins/waits/agent_link_waits/wakeup.py).

Every wait here polls only every 10 minutes (``poll_ms``), past its own time limit, so its
only look before the limit is the first one: a wait that ends with the answer *before* its
limit was woken by the commit. Had the wake-up been missed, it would have slept to the limit
(and found the answer in its last look, at ``waitedMs == WAIT_MS``).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_link_core import wake
from agent_link_core.app import App
from agent_link_core.tools.registry import run_tool
from agent_link_waits.waits import waits_of
from agent_link_waits.wakeup import Wakeup

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]
OTHER_PLUGINS = " ".join(sorted(ep.name for ep in importlib.metadata.entry_points(group="agent_link") if ep.name != "waits"))
NEVER_MS = 600_000  # the fallback poll: never reached within WAIT_MS
WAIT_MS = 30_000  # the waits' limit: a missed wake-up shows as waitedMs == WAIT_MS
BOUND_S = 90  # a bound on the helper process, never a speed assertion

WAITER = """
import asyncio, json, sys
from agent_link_core.app import App
from agent_link_waits.waits import waits_of
from agent_link_waits.wakeup import Wakeup

app = App.create()
out = asyncio.run(waits_of(app).wait(caller=app.caller(), agent="test:bob", reply_to=sys.argv[1], timeout_ms={wait}, poll_ms={never}))
print(json.dumps({{"outcome": out["outcome"], "beforeLimit": out["waitedMs"] < {wait}}}))
"""


async def call(app: App, tool: str, **arguments: Any) -> dict[str, Any]:
    return await run_tool(app, app.hooks.tools()[tool], arguments, {})


def fifos(app: App) -> list[str]:
    folder = wake.waiters_dir(app.store.path)
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


async def test_a_waiter_in_another_process_wakes_on_the_reply(make_app: Callable[..., App]) -> None:
    alice = make_app("test:alice")
    bob = make_app("test:bob")
    sent = await call(alice, "message_agent", to="test:bob", message="ping")
    env = {**os.environ, "AGENT_LINK_DISABLE_PLUGINS": OTHER_PLUGINS, "AGENT_LINK_ADDRESS": "test:alice"}
    waiter = subprocess.Popen([sys.executable, "-c", WAITER.format(wait=WAIT_MS, never=NEVER_MS), sent["messageId"]],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + BOUND_S
        while not fifos(bob) and waiter.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)  # until the waiter is armed
        assert fifos(bob), waiter.stderr.read() if waiter.poll() is not None else "the waiter never armed"
        await call(bob, "reply_agent_link_message", messageId=sent["messageId"], message="pong")
        out, err = waiter.communicate(timeout=BOUND_S)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.communicate()
    assert waiter.returncode == 0, err
    assert json.loads(out) == {"outcome": "reply", "beforeLimit": True}
    assert fifos(bob) == []  # the waiter removed its FIFO

async def test_a_commit_between_the_check_and_the_sleep_is_not_missed(make_app: Callable[..., App],
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The reply is committed right after the wait's first look found nothing, before the
    wait gets to sleep: armed before that look, the wait still wakes."""
    alice = make_app("test:alice")
    sent = await call(alice, "message_agent", to="test:bob", message="ping")
    looks = []
    original = waits_of(alice)._wait_check

    def reply_elsewhere() -> None:  # another connection, committed before the check returns
        bob = make_app("test:bob")
        try:
            asyncio.run(call(bob, "reply_agent_link_message", messageId=sent["messageId"], message="pong"))
        finally:
            bob.close()

    def check_then_reply(*args: Any) -> Any:
        found = original(*args)
        looks.append(found)
        if len(looks) == 1:
            assert found is None
            replier = threading.Thread(target=reply_elsewhere)
            replier.start()
            replier.join()
        return found

    monkeypatch.setattr(waits_of(alice), "_wait_check", check_then_reply)
    got = await waits_of(alice).wait(caller=alice.caller(), agent="test:bob", reply_to=sent["messageId"], timeout_ms=WAIT_MS,
                           poll_ms=NEVER_MS)
    assert got["outcome"] == "reply" and got["waitedMs"] < WAIT_MS
    assert "pong" in got["reply"]["envelope"] and len(looks) == 2

async def test_mail_from_an_agent_wakes_a_wait_without_reply_to(make_app: Callable[..., App]) -> None:
    alice = make_app("test:alice")
    bob = make_app("test:bob")

    async def later() -> None:
        while not fifos(bob):
            await asyncio.sleep(0.01)
        await call(bob, "message_agent", to="test:alice", message="news")

    task = asyncio.get_running_loop().create_task(later())
    got = await waits_of(alice).wait(caller=alice.caller(), agent="test:bob", timeout_ms=WAIT_MS, poll_ms=NEVER_MS)
    await task
    assert got["outcome"] == "reply" and got["waitedMs"] < WAIT_MS and "news" in got["reply"]["envelope"]

async def test_without_wake_ups_the_wait_polls(make_app: Callable[..., App], monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder that cannot hold FIFOs (here: a file in its place) leaves the poll as before."""
    alice = make_app("test:alice")
    bob = make_app("test:bob")
    Path(wake.waiters_dir(alice.store.path)).write_text("in the way")
    assert Wakeup(alice.store.path).path is None
    sent = await call(alice, "message_agent", to="test:bob", message="ping")
    await call(bob, "reply_agent_link_message", messageId=sent["messageId"], message="pong")
    got = await waits_of(alice).wait(caller=alice.caller(), agent="test:bob", reply_to=sent["messageId"], timeout_ms=WAIT_MS,
                           poll_ms=250)
    assert got["outcome"] == "reply"
    # and a wait that finds nothing sleeps its poll interval, then ends by its limit
    sent = await call(alice, "message_agent", to="test:bob", message="again")
    got = await waits_of(alice).wait(caller=alice.caller(), agent="test:bob", reply_to=sent["messageId"], timeout_ms=300,
                           poll_ms=250)
    assert got["outcome"] == "timeout"
