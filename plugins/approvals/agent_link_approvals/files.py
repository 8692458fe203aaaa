"""Reading a user's config file, and changing it safely.

A change that only adds bytes at the end (the Codex tables) is appended in place, into the
same file: another process that opened the file earlier and appends to it later (a shell's
``>>``, an editor's append) writes into the file agent-link changed, never into a replaced
copy nobody reads again. Any other change is a replacement, which is atomic: the new bytes go
to a temporary file in the same directory, are fsync'ed and given the original's permission
bits (and owner, when allowed), then swapped with the original, and the directory is
fsync'ed. A symlinked config is changed at its target, so the link stays. A copy of the old
bytes is kept beside it first (``<name>.agent-link-<UTC stamp>.bak``, same permission bits).
Hosts and people edit these files while agent-link runs: a change made since the file was
read, up to the moment of the write, is never overwritten (:func:`update_file` plans again on
top of it, or gives up and leaves it). agent-link processes changing the same file take turns
(an exclusive ``flock`` on it, released by the kernel if the holder dies).
"""

from __future__ import annotations

import ctypes
import datetime as _dt
import difflib
import errno
import fcntl
import os
import stat
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

NEW_FILE_MODE = 0o600


class ConfigFileError(Exception):
    """A config file that cannot be used.

    :param kind: ``missing``, ``unreadable`` or ``malformed``.
    :param message: one sentence naming the file (and line/column for ``malformed``).
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class ChangedWhileApplying(Exception):
    """The file on disk no longer holds the bytes the changes were computed from."""


def read_bytes(path: Path) -> bytes:
    """The file's bytes.

    :raises ConfigFileError: ``missing`` (no such file) or ``unreadable`` (a directory, no
        permission, other I/O errors).
    """
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ConfigFileError("missing", f"{path} does not exist") from None
    except IsADirectoryError:
        raise ConfigFileError("unreadable", f"{path} is a directory, not a file") from None
    except OSError as exc:
        raise ConfigFileError("unreadable", f"{path} cannot be read: {exc.strerror or exc}") from None


def decode_utf8(path: Path, data: bytes, *, bom: bool = False) -> str:
    """``data`` as UTF-8 text; with ``bom``, one leading byte order mark is dropped, as opencode
    (Bun's ``file.text()``) drops it, where Node's ``readFileSync`` and ``JSON.parse`` keep it and fail.

    :raises ConfigFileError: ``malformed``, naming the line of the first bad byte.
    """
    try:
        return data.decode("utf-8-sig" if bom else "utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigFileError("malformed", f"{path} is not UTF-8 text (line {line})") from None


def unified_diff(path: Path, old: str, new: str) -> str:
    """A unified diff from ``old`` to ``new`` (``--dry-run`` prints it)."""
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=str(path), tofile=f"{path} (after apply)"))


def _stamp() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some file systems cannot fsync a directory
        pass
    finally:
        os.close(fd)


#: How many times :func:`update_file` reads, plans and writes again when the file changes
#: under it before it refuses.
UPDATE_ATTEMPTS = 8

_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Swap the files at ``a`` and ``b`` in one step (Linux ``renameat2(RENAME_EXCHANGE)``).

    :returns: False when the system or file system cannot (the caller falls back to a rename).
    :raises OSError: any other failure.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def _read_fd(fd: int) -> bytes:
    """The whole content of the open file ``fd`` (from offset 0, whatever its position)."""
    chunks, offset = [], 0
    while chunk := os.pread(fd, 1 << 16, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _current(target: Path) -> bytes | None:
    """What ``target`` holds right now (None: no such file); read again just before a write."""
    try:
        return target.read_bytes()
    except FileNotFoundError:
        return None


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


@dataclass
class Update:
    """What :func:`update_file` did.

    :param base: the bytes the final plan was computed from (None: there was no file).
    :param written: agent-link's change was swapped in.
    :param backup: the copy of ``base`` kept beside the file (None when nothing was written
        or there was no file).
    :param attempts: how many read-plan-write rounds it took (more than one: the file changed
        under agent-link and the change was planned again on top of the new content).
    :param kept: another writer's versions kept beside the file (:func:`_keep_if_not`): not in
        it, to be merged by hand.
    """

    base: bytes | None
    written: bool
    backup: Path | None
    attempts: int
    kept: list[Path] = field(default_factory=list)


def update_file(path: Path, plan: Callable[[bytes | None], bytes | None], *,
                attempts: int = UPDATE_ATTEMPTS) -> Update:
    """Change ``path`` to what ``plan`` makes of its current bytes, never losing a concurrent edit.

    Each round opens the file and takes its ``flock`` (another agent-link process changing it
    goes first), reads it and asks ``plan`` for the new bytes. New bytes that only add to the
    end are appended in place once the file is checked to still hold what was planned from
    (see :func:`_append_in_place`), after a backup of the old bytes. Any other change is
    swapped in: the new bytes go to a temporary file (fsync'ed, with the original's permission
    bits and owner) and a backup of the old bytes, then the file is read again just before the
    swap. The swap exchanges the two files in one step, so agent-link sees what it displaced:
    if that is not the file it read, still holding exactly the bytes planned from (another
    process replaced the file, or wrote into it, in the moment between), the displaced file is
    swapped back. Either way, a file that changed starts a new round on the new content; one
    that keeps changing for ``attempts`` rounds is left as the other process made it. One race
    remains (no file system swaps a path only if it still names a given file): a writer without
    a lock that replaces the file just before the swap, then reads agent-link's version and
    replaces it again before the swap back, has that last version kept beside the file as
    ``<name>.agent-link-<stamp>.concurrent`` (:func:`_keep_if_not`), never deleted.

    :param plan: ``plan(current bytes or None) -> new bytes``, or None when nothing needs to
        change; may raise (e.g. :class:`ConfigFileError` for a malformed file), which ends
        the update with nothing written.
    :raises ChangedWhileApplying: the file changed in every round; agent-link's change is not in it.
    :raises OSError: the directory is not writable, the disk is full, ...; the original is
        then untouched (leftover temporary files are removed).
    """
    kept: list[Path] = []
    for attempt in range(1, attempts + 1):
        target = Path(os.path.realpath(path))
        try:
            held: int | None = os.open(target, os.O_RDONLY)
        except FileNotFoundError:
            held = None
        try:
            st = os.fstat(held) if held is not None else None
            if st is not None and not stat.S_ISREG(st.st_mode):
                raise ConfigFileError("unreadable", f"{path} is not a regular file")
            if held is not None:
                # Another agent-link process changing this file finishes first (blocks until
                # then); a file it replaced meanwhile fails the check before the write below.
                fcntl.flock(held, fcntl.LOCK_EX)
            base = _read_fd(held) if held is not None else None
            new = plan(base)
            if new is None or new == base:
                return Update(base, False, None, attempt, kept)
            if base is not None and st is not None and held is not None and new.startswith(base):
                swapped, backup = _append_in_place(target, new[len(base):], base, held, st)
            else:
                swapped, backup = _swap_in(target, new, base, held, st, kept)
        finally:
            if held is not None:
                os.close(held)
        if swapped:
            return Update(base, True, backup, attempt, kept)
    tries = f" ({attempts} tries)" if attempts > 1 else ""
    beside = f" Another version was kept beside it, to merge by hand: {', '.join(map(str, kept))}." if kept else ""
    raise ChangedWhileApplying(f"{path} changed while agent-link was applying{tries}; agent-link's change was "
                               f"not written and the other change was kept. Run it again.{beside}")


def _write_backup(target: Path, base: bytes, mode: int) -> Path:
    """Keep ``base`` beside ``target`` as ``<name>.agent-link-<UTC stamp>.bak`` (fsync'ed, ``mode``)."""
    backup = target.with_name(f"{target.name}.agent-link-{_stamp()}.bak")
    fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(base)
        fh.flush()
        os.fsync(fh.fileno())
    os.chmod(backup, mode)  # the umask may have removed bits from the requested mode
    return backup


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _names(target: Path, st: os.stat_result) -> bool:
    """Whether ``target`` still names the file ``st`` describes (not one renamed over it)."""
    try:
        return _same_file(os.stat(target), st)
    except FileNotFoundError:
        return False


def _append_in_place(target: Path, suffix: bytes, base: bytes, held: int,
                     st: os.stat_result) -> tuple[bool, Path | None]:
    """One round of :func:`update_file` for a change that only appends ``suffix``: written into
    the same file (``O_APPEND``), so a process that opened it before and writes into it after
    loses nothing. ``(True, backup)`` once appended; ``(False, None)`` when the file changed
    first (it is then as the other process left it).

    A line another process appends between the check and the write (microseconds) lands just
    before ``suffix``; nothing is lost. A crash in the middle of the write can leave part of
    ``suffix``: the backup holds the file as it was.
    """
    if _current(target) != base or not _names(target, st):  # changed while we planned
        return False, None
    backup = _write_backup(target, base, stat.S_IMODE(st.st_mode))
    try:
        fd = os.open(target, os.O_WRONLY | os.O_APPEND)
    except FileNotFoundError:
        _unlink(backup)
        return False, None
    try:
        if not _same_file(os.fstat(fd), st) or _read_fd(held) != base:
            _unlink(backup)
            return False, None
        view = memoryview(suffix)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        _unlink(backup)
        raise
    finally:
        os.close(fd)
    if not _names(target, st):  # replaced by another process in the moment of the write
        _unlink(backup)
        return False, None
    return True, backup


def _swap_in(target: Path, new: bytes, base: bytes | None, held: int | None,
             st: os.stat_result | None, kept: list[Path]) -> tuple[bool, Path | None]:
    """One round of :func:`update_file`: ``(True, backup)`` once ``new`` is in place, ``(False,
    None)`` when the file changed under us (it is then as the other process left it); a version
    kept beside the file is added to ``kept``."""
    mode = stat.S_IMODE(st.st_mode) if st is not None else NEW_FILE_MODE
    backup = _write_backup(target, base, mode) if st is not None and base is not None else None
    tmp: Path | None = None
    swapped = False
    try:
        fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        tmp = Path(name)
        with os.fdopen(fd, "wb") as fh:
            fh.write(new)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            if st is not None and (st.st_uid, st.st_gid) != (os.getuid(), os.getgid()):
                try:
                    os.fchown(fh.fileno(), st.st_uid, st.st_gid)
                except PermissionError:
                    pass
            os.fsync(fh.fileno())
        if _current(target) == base:  # else it changed while we planned and wrote
            if held is None:
                try:
                    os.link(tmp, target)  # unlike a rename, never replaces a file that appeared since
                    swapped = True
                except FileExistsError:
                    pass
            elif _exchange(tmp, target):
                swapped = _displaced_is(tmp, held, base)
                if not swapped:
                    _exchange(tmp, target)  # put the other process's file back
                    _keep_if_not(tmp, new, target, kept)
            else:  # no exchange on this system: rename, then undo if the old file changed
                os.replace(tmp, target)
                swapped = _read_fd(held) == base
                if not swapped:
                    _restore(target, new, _read_fd(held), mode)
    except BaseException:
        if tmp is not None:
            _unlink(tmp)
        if backup is not None:
            _unlink(backup)
        raise
    _unlink(tmp)
    if not swapped:
        if backup is not None:
            _unlink(backup)
        return False, None
    _fsync_dir(str(target.parent))
    return True, backup


def _displaced_is(displaced: Path, held: int, base: bytes | None) -> bool:
    """Whether the file swapped out to ``displaced`` is the one read (same inode, still ``base``),
    also once a writer that had it open has finished writing into it."""
    try:
        st = os.stat(displaced)
    except FileNotFoundError:
        return False
    held_st = os.fstat(held)
    if (st.st_dev, st.st_ino) != (held_st.st_dev, held_st.st_ino):
        return False
    _fsync_dir(str(displaced.parent))  # makes the swap durable, and gives a writer mid-append time to finish
    return _read_fd(held) == base


def _keep_if_not(path: Path, ours: bytes, target: Path, kept: list[Path]) -> None:
    """After swapping back, ``path`` should hold our bytes again; if a third writer put its own
    file at ``target`` in the moment between, keep that one beside the config (never delete it)
    and add it to ``kept``."""
    if _current(path) != ours:
        kept.append(target.with_name(f"{target.name}.agent-link-{_stamp()}.concurrent"))
        os.replace(path, kept[-1])


def _restore(target: Path, ours: bytes, theirs: bytes, mode: int) -> None:
    """Put ``theirs`` back at ``target`` when it still holds ``ours`` (no exchange available)."""
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(theirs)
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        if _current(target) == ours:
            os.replace(name, target)
    finally:
        _unlink(Path(name))


def replace_atomically(path: Path, data: bytes, expected_old: bytes | None) -> Path | None:
    """Write ``data`` as the new content of ``path`` if it still holds ``expected_old``.

    :param expected_old: the bytes the change was computed from (``None``: the file did not
        exist and must still not exist).
    :returns: the backup file's path (``None`` when there was no file before).
    :raises ChangedWhileApplying: the file's content is not ``expected_old``, before or at the
        moment of the swap; nothing was written.
    :raises OSError: see :func:`update_file`.
    """
    def plan(current: bytes | None) -> bytes | None:
        if current != expected_old:
            raise ChangedWhileApplying(f"{path} changed while agent-link was applying; nothing was written. Run it again.")
        return data

    return update_file(path, plan, attempts=1).backup
