"""Running async code from sync code that may itself be inside an event loop."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


def run_blocking(factory: Callable[[], Awaitable[T]]) -> T:
    """Run ``factory()`` to completion on a new event loop in a worker thread and return its
    result (or raise its exception). Usable with or without a running loop in the caller,
    which is blocked meanwhile: keep ``factory`` bounded."""
    import asyncio

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
