"""Running async code from sync code that may itself be inside an event loop."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TypeVar

    T = TypeVar("T")


def run_blocking(factory: Callable[[], Awaitable[T]]) -> T:
    """Run ``factory()`` to completion on a new event loop in a worker thread and return its result (or raise its
    exception). Usable with or without a running loop in the caller, which is blocked meanwhile: keep ``factory`` bounded."""
    import asyncio
    import threading

    box: dict[str, Any] = {}

    async def main() -> T:
        return await factory()

    def work() -> None:
        try:
            box["value"] = asyncio.run(main())
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=work, name="agent-link-run-blocking", daemon=True)
    worker.start()
    worker.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def run_inline(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end on this thread, stepped without an event loop (so a short CLI command never imports
    :mod:`asyncio`); should it suspend, the rest runs under :func:`asyncio.run`. Only for coroutines that await no I/O: a
    loop-only call (``asyncio.get_running_loop``) before the first suspension raises RuntimeError.

    :returns: what the coroutine returns; raises what it raises.
    """
    try:
        first = coro.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    import asyncio

    from agent_link_core.boundary import stepped

    async def rest() -> T:
        return await stepped(coro, 0, first)  # type: ignore[no-any-return]

    return asyncio.run(rest())
