"""Wake-ups across processes: a waiter sleeps until any agent-link process commits a change (docs/storage.md, "Waits wake on
the commit"). A FIFO gets its final name only once its waiter holds it open, so a live one never looks stale. Only light
standard modules: the hook fast path writes through the store.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio

SUFFIX = ".fifo"
DRAIN_BYTES = 4096
COALESCE_S = 0.002  # after a wake-up, commits within this many seconds are taken with it


def waiters_dir(db_path: str | os.PathLike[str]) -> str:
    """The folder of the wake-up FIFOs of the database at ``db_path``: ``<db_path>-waiters``."""
    return os.fspath(db_path) + "-waiters"


def notify(db_path: str | os.PathLike[str]) -> int:
    """Wake every process waiting on the database at ``db_path`` (a byte to each live FIFO; stale ones removed): how many. Never raises."""
    folder = waiters_dir(db_path)
    try:
        entries = os.scandir(folder)
    except OSError:  # nobody ever waited here (the usual case), or the folder is unreadable
        return 0
    with entries:
        return sum(1 for entry in entries if entry.name.endswith(SUFFIX) and _poke(entry.path))


def _poke(path: str) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # no reader: its waiter died without removing it
            with contextlib.suppress(OSError):
                os.unlink(path)
        return False
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return False  # not one of ours: never write into a regular file
        with contextlib.suppress(BlockingIOError):  # a full pipe: its waiter is awake anyway
            os.write(fd, b"\0")
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


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
