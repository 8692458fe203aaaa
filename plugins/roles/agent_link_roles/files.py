"""Private files: atomic replace and the writer lock for JSON state files.

Readers never lock: a file is only ever replaced by ``rename``, so a reader sees the old or the
new content, never half of it. Writers serialise their read-modify-write under
``<file>.lock`` (an OS lock through ``filelock``, released by the kernel if the holder dies, so
no stale-lock breaking is needed).
"""

from __future__ import annotations

import contextlib
import errno as errno_mod
import os
from collections.abc import Iterator
from pathlib import Path


from agent_link_core.errors import AgentLinkError
from agent_link_core.store import ensure_private_dir, state_io_error

# A write (with its fsyncs) takes milliseconds; waiters poll, so under heavy contention one can
# wait through many writers. Five seconds of waiting means something is stuck.
LOCK_TIMEOUT_S = 5.0
LOCK_POLL_S = 0.005


def atomic_write(path: Path, data: bytes, state_dir: Path) -> None:
    """Replace ``path`` with ``data`` atomically (mode 0600, parent dir 0700).

    Writes ``<file>.<pid>.<hex>.tmp`` with exclusive create, fsyncs it, renames it over
    ``path`` and fsyncs the directory. A symlink at ``path`` is replaced, never followed.

    :raises AgentLinkError: ``state_io_error`` (path relative to ``state_dir``, errno name).
    """
    import secrets  # (with hashlib and hmac) only a write needs it, never a send's role check

    ensure_private_dir(path.parent)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise os_error(path, exc, state_dir) from exc


@contextlib.contextmanager
def locked(path: Path, state_dir: Path) -> Iterator[None]:
    """Hold the writer lock of ``path`` (``<path>.lock``, mode 0600).

    :raises AgentLinkError: ``state_io_error`` with errno ``ETIMEDOUT`` after
        :data:`LOCK_TIMEOUT_S` seconds, or the OS error naming the lock file.
    """
    ensure_private_dir(path.parent)
    lock_path = path.with_name(path.name + ".lock")
    from filelock import FileLock, Timeout  # only writers lock: readers of the table go without it

    # preserve_lock_file: deleting the lock file on release lets a waiter lock a dead inode.
    lock = FileLock(lock_path, timeout=LOCK_TIMEOUT_S, mode=0o600, poll_interval=LOCK_POLL_S, preserve_lock_file=True)
    try:
        lock.acquire()
    except Timeout:
        raise os_error(lock_path, OSError(errno_mod.ETIMEDOUT, "timed out waiting for the lock"), state_dir) from None
    except OSError as exc:
        raise os_error(lock_path, exc, state_dir) from exc
    try:
        yield
    finally:
        lock.release()


def relative(path: Path, state_dir: Path) -> str:
    """``path`` relative to the state dir when inside it (error details never show $HOME)."""
    try:
        return str(path.relative_to(state_dir))
    except ValueError:
        return str(path)


def os_error(path: Path, exc: OSError, state_dir: Path) -> AgentLinkError:
    """The core's ``state_io_error`` for an OS error on ``path`` (shown relative to the state dir)."""
    return state_io_error(str(path), exc, str(state_dir))


def io_error(path: Path, state_dir: Path, errno_name: str, message: str,
             hint: str = "The file's content is the problem, not the disk: fix it by hand or move it away.") -> AgentLinkError:
    """A ``state_io_error`` for a condition that is not an OS error (bad content, version), with a ``hint`` about the file:
    the default hint of ``state_io_error`` (the state dir's existence, owner, space) does not fit it."""
    return AgentLinkError("state_io_error", message, {"path": relative(path, state_dir), "errno": errno_name}, hint=hint)
