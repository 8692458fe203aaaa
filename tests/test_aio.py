"""agent_link_core.boundary.run_inline: a coroutine stepped without an event loop, handed to one
when it suspends after all."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent_link_core import hookimpl
from agent_link_core.boundary import run_inline


def test_a_coroutine_that_never_suspends_runs_without_a_loop() -> None:
    seen: list[bool] = []

    async def inner() -> int:
        return 2

    async def outer() -> int:
        seen.append(asyncio._get_running_loop() is None)
        return await inner() + 1

    assert run_inline(outer()) == 3
    assert seen == [True]


def test_a_coroutine_that_suspends_finishes_on_a_loop() -> None:
    steps: list[str] = []

    async def outer() -> str:
        steps.append("before")
        await asyncio.sleep(0)  # a bare suspension: no loop needed to make it
        steps.append("loop" if asyncio._get_running_loop() is not None else "no loop")
        await asyncio.sleep(0.001)  # needs the loop
        return "done"

    assert run_inline(outer()) == "done"
    assert steps == ["before", "loop"]


def test_an_error_raised_before_or_after_a_suspension_reaches_the_caller() -> None:
    async def early() -> None:
        raise KeyError("early")

    async def late() -> None:
        await asyncio.sleep(0)
        await asyncio.sleep(0.001)
        raise KeyError("late")

    with pytest.raises(KeyError, match="early"):
        run_inline(early())
    with pytest.raises(KeyError, match="late"):
        run_inline(late())


def test_an_exception_the_loop_throws_in_is_seen_by_the_coroutine() -> None:
    caught: list[str] = []

    async def outer() -> str:
        await asyncio.sleep(0)
        try:
            await asyncio.wait_for(asyncio.sleep(10), 0.001)
        except TimeoutError:
            caught.append("timeout")
        return "after"

    assert run_inline(outer()) == "after"
    assert caught == ["timeout"]


class AwaitingRouter:
    """A plugin answering a plain address with an awaitable that needs an event loop."""

    @hookimpl
    def agent_link_resolve_address(self, address: str, caller_address: str) -> object:
        if address != "desk:front":
            return None

        async def ask() -> dict[str, str]:
            await asyncio.sleep(0.001)  # I/O: a running loop is required
            return {"address": "desk:clerk"}

        return ask()


def test_a_send_stepped_inline_awaits_a_plugins_awaitable_answer_on_a_loop_of_its_own() -> None:
    from agent_link_core.app import App
    from agent_link_core.commands.send import reaches_no_harness, send_reliably
    from agent_link_core.model import Caller

    app = App.create(extra_plugins=(("router", AwaitingRouter()),))
    try:
        me = Caller(address="desk:me")
        assert reaches_no_harness(app, "desk:front", me)
        result = run_inline(send_reliably(app, "desk:front", "hello", sender=me))
        assert (result.outcome, result.to) == ("queued", "desk:clerk")
    finally:
        app.close()


def test_a_ctrl_c_between_two_steps_lets_the_plugins_coroutine_clean_up_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C that lands in the boundary's own code between two steps of a plugin's coroutine (not inside it)
    closes that coroutine before the Ctrl-C goes on: its ``finally`` runs while the store it uses is still open,
    not when the interpreter collects it at exit (which once read a closed database and printed a traceback)."""
    from agent_link_core import boundary

    cleaned: list[str] = []

    async def plugin_wait() -> None:
        try:
            await asyncio.sleep(0.001)
            await asyncio.sleep(0.001)
        finally:
            cleaned.append("cleaned")

    real_arm, arms = boundary._arm, [0]

    def arm_then_ctrl_c(budget_s: float) -> Any:
        arms[0] += 1
        if arms[0] == 2:  # the second step: the coroutine is suspended in its first sleep
            raise KeyboardInterrupt
        return real_arm(budget_s)

    monkeypatch.setattr(boundary, "_arm", arm_then_ctrl_c)

    async def main() -> None:
        await boundary.stepped(plugin_wait(), 0)

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(main())
    assert cleaned == ["cleaned"]
