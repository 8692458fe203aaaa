"""Wake-ups across processes, the writer's side: after a commit every waiter's FIFO gets a byte (docs/storage.md, "Waits
wake on the commit"); the waiter's side is :class:`agent_link_waits.wakeup.Wakeup`. Only light standard modules: the hook
fast path writes through the store.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

SUFFIX = ".fifo"


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
