"""Reading a user's config file, and replacing it safely.

A replacement is atomic: the new bytes go to a temporary file in the same directory, are
fsync'ed and given the original's permission bits (and owner, when allowed), then renamed over
the original, and the directory is fsync'ed. A symlinked config is replaced at its target, so
the link stays. A copy of the old bytes is kept beside it first (``<name>.agent-link-<UTC
stamp>.bak``, same permission bits). If the file changed since it was read, nothing is written.
"""

from __future__ import annotations

import datetime as _dt
import difflib
import os
import stat
import tempfile
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


def decode_utf8(path: Path, data: bytes) -> str:
    """``data`` as UTF-8 text.

    :raises ConfigFileError: ``malformed``, naming the line of the first bad byte.
    """
    try:
        return data.decode("utf-8")
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


def replace_atomically(path: Path, data: bytes, expected_old: bytes | None) -> Path | None:
    """Write ``data`` as the new content of ``path``.

    :param expected_old: the bytes the change was computed from (``None``: the file did not
        exist and must still not exist).
    :returns: the backup file's path (``None`` when there was no file before).
    :raises ChangedWhileApplying: the file's content is no longer ``expected_old``; nothing
        was written.
    :raises OSError: the directory is not writable, the disk is full, ...; the original is
        then untouched (a leftover temporary file is removed).
    """
    target = Path(os.path.realpath(path))
    try:
        st: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        st = None
    current = target.read_bytes() if st is not None else None
    if current != expected_old:
        raise ChangedWhileApplying(f"{path} changed while agent-link was applying; nothing was written. Run it again.")
    mode = stat.S_IMODE(st.st_mode) if st is not None else NEW_FILE_MODE
    backup: Path | None = None
    if st is not None and current is not None:
        backup = target.with_name(f"{target.name}.agent-link-{_stamp()}.bak")
        fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(current)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(backup, mode)  # the umask may have removed bits from the requested mode
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            if st is not None and (st.st_uid, st.st_gid) != (os.getuid(), os.getgid()):
                try:
                    os.fchown(fh.fileno(), st.st_uid, st.st_gid)
                except PermissionError:
                    pass
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(str(target.parent))
    return backup
