"""Another process holding the database's write lock, for tests of what must never wait on it."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: the longest the lock is held (s): a generous bound so a stuck test still ends
HOLD_BOUND_S = 120.0


class HeldLock:
    """The state of a :func:`hold_write_lock` holder.

    ``waited`` is True when the lock was let go before the ``with`` body ended, which only
    happens when the body outlived the holder's bound: the code under test waited for the
    lock (give it a busy timeout longer than :data:`HOLD_BOUND_S` so a wait cannot end early).
    """

    def __init__(self) -> None:
        self.locked = threading.Event()
        self.finished = threading.Event()
        self.released = threading.Event()
        self.error: BaseException | None = None

    @property
    def waited(self) -> bool:
        """True when the holder gave the lock up on its own (the body waited for it)."""
        return self.released.is_set()


@contextmanager
def hold_write_lock(path: str | os.PathLike[str], bound_s: float = HOLD_BOUND_S) -> Iterator[HeldLock]:
    """Hold the write lock of the SQLite database at ``path`` (``BEGIN IMMEDIATE`` on a
    connection of its own, in a thread) for the ``with`` body, at most ``bound_s`` seconds.

    The body runs only once the lock is taken; on exit the lock is rolled back and the
    thread joined. Assert ``not held.waited`` after the calls that must not wait.

    :raises AssertionError: when the lock could not be taken within ``bound_s``.
    """
    held = HeldLock()

    def hold() -> None:
        try:
            holder = sqlite3.connect(os.fspath(path), isolation_level=None, timeout=bound_s)
            try:
                holder.execute("BEGIN IMMEDIATE")
                held.locked.set()
                held.finished.wait(bound_s)
                if not held.finished.is_set():
                    held.released.set()
                holder.execute("ROLLBACK")
            finally:
                holder.close()
        except BaseException as exc:  # reported to the test below
            held.error = exc
            held.locked.set()

    thread = threading.Thread(target=hold, name="hold-write-lock", daemon=True)
    thread.start()
    try:
        assert held.locked.wait(bound_s), "could not take the database's write lock"
        if held.error is not None:
            raise AssertionError(f"could not take the database's write lock: {held.error}")
        yield held
    finally:
        held.finished.set()
        thread.join(bound_s)
