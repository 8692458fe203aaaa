"""The waiter's side of the wake-ups across processes (docs/storage.md, "Waits wake on the commit"; the writer's side is
:func:`agent_link_core.wake.notify`). A FIFO gets its final name only once its waiter holds it open, so a live one never
looks stale.
"""

from __future__ import annotations

import contextlib
import os

from agent_link_core.wake import SUFFIX, waiters_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio

DRAIN_BYTES = 4096
COALESCE_S = 0.002  # after a wake-up, commits within this many seconds are taken with it


class Wakeup:
    """One waiter's FIFO in :func:`waiters_dir` of the database at ``db_path``; a context manager. Make it *before* the first read a
    wait depends on, then alternate reading and :meth:`wait`; without a FIFO the waits simply sleep (callers poll)."""

    def __init__(self, db_path: str | os.PathLike[str]) -> None:
        self.path: str | None = None
        self.fd: int | None = None
        folder = waiters_dir(db_path)
        tmp = os.path.join(folder, f".{os.getpid()}-{os.urandom(6).hex()}.tmp")
        try:
            from agent_link_core.json_files import ensure_private_dir

            ensure_private_dir(folder)
            os.mkfifo(tmp, 0o600)
            try:
                # O_RDWR keeps a writer open on our own end: no EOF, no hang-up, on Linux and macOS.
                self.fd = os.open(tmp, os.O_RDWR | os.O_NONBLOCK)
                final = os.path.join(folder, os.path.basename(tmp)[1 : -len(".tmp")] + SUFFIX)
                os.rename(tmp, final)
                self.path = final
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
        except Exception:  # no wake-ups here: the waiter polls  # noqa: BLE001
            self.close()

    def drain(self) -> None:
        """Read away the wake-ups received so far (call before re-reading the database)."""
        if self.fd is None:
            return
        with contextlib.suppress(BlockingIOError, InterruptedError):
            while os.read(self.fd, DRAIN_BYTES):
                pass

    async def wait(self, timeout_s: float) -> bool:
        """Sleep until a commit wakes this waiter (True) or ``timeout_s`` (seconds) passes (False; also without a FIFO); drains."""
        import asyncio

        if self.fd is None:
            await asyncio.sleep(timeout_s)
            return False
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()
        try:
            loop.add_reader(self.fd, _settle, woken)
        except (NotImplementedError, ValueError, OSError):  # an event loop that cannot watch fds
            await asyncio.sleep(timeout_s)
            return False
        try:
            await asyncio.wait_for(woken, timeout_s)
        except asyncio.TimeoutError:
            self.drain()
            return False
        finally:
            loop.remove_reader(self.fd)
        await asyncio.sleep(COALESCE_S)  # a burst of commits (a busy sender) costs one re-read
        self.drain()
        return True

    def wait_blocking(self, timeout_s: float) -> bool:
        """:meth:`wait` for synchronous code (``select``)."""
        import select
        import time

        if self.fd is None:
            time.sleep(timeout_s)
            return False
        ready, _, _ = select.select([self.fd], [], [], timeout_s)
        self.drain()
        return bool(ready)

    def close(self) -> None:
        """Remove the FIFO and close it (idempotent)."""
        if self.path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            self.path = None
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None

    def __enter__(self) -> Wakeup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
