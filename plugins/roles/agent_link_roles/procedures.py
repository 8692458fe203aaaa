"""Role procedures: ``<state>/roles/<name>.md``, text that tells a holder how to handle work
sent to the role. It is shown to the holder, never executed.

* Only a regular file of at most 64 KiB of UTF-8 is read; a symlink (the file or the
  ``roles`` folder), a FIFO or any other file type is refused without being opened.
* Versions are numbered per role in the database: the number goes up when the file's SHA-256
  differs from the last recorded one. It is recorded lazily, at the next send to the role or at
  ``set_agent_role``; read tools only report ``pending``.
* The text travels once per distinct content per holder: the first message carrying that
  version to that holder (claimed in ``role_procedure_shown``, a primary key, so racing
  servers agree) renders it in a ``<procedure>`` element.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_link_core.envelope import MAX_BODY_BYTES, sanitize_text
from agent_link_core.errors import AgentLinkError
from agent_link_core.mailbox import iso
from agent_link_core.store import Store, now_ms

from agent_link_roles.files import atomic_write, io_error

MAX_PROCEDURE_BYTES = MAX_BODY_BYTES  # 64 KiB, the same limit as a message body
PROCEDURES_DIR = "roles"


def procedure_path(state_dir: Path, name: str) -> Path:
    """``<state dir>/roles/<name>.md``."""
    return state_dir / PROCEDURES_DIR / f"{name}.md"


@dataclass(frozen=True)
class ProcedureFile:
    """What is on disk for one role.

    :param present: a readable, valid procedure file exists.
    :param sha256: hex SHA-256 of its bytes (None unless present).
    :param text: its text (None unless present).
    :param problem: ``{rule, message}`` when a file exists but is refused (symlink, too large,
        not a regular file, not UTF-8, unreadable).
    """

    present: bool
    sha256: str | None = None
    text: str | None = None
    problem: dict[str, str] | None = None


def _refused(rule: str, message: str) -> ProcedureFile:
    return ProcedureFile(False, problem={"rule": rule, "message": message})


def read_procedure(state_dir: Path, name: str) -> ProcedureFile:
    """Read the procedure of role ``name`` safely (never follows a symlink, never blocks).

    Never raises for the file's content or type: refusals come back as ``problem``.
    """
    folder = state_dir / PROCEDURES_DIR
    try:
        if stat.S_ISLNK(os.lstat(folder).st_mode):
            return _refused("symlink", f"{PROCEDURES_DIR}/ is a symlink; procedures are only read from a real folder.")
    except FileNotFoundError:
        return ProcedureFile(False)
    except OSError as exc:
        return _refused("unreadable", f"{PROCEDURES_DIR}/ cannot be read: {exc.strerror}.")
    path = procedure_path(state_dir, name)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ProcedureFile(False)
    except OSError as exc:
        return _refused("unreadable", f"The procedure file cannot be read: {exc.strerror}.")
    if stat.S_ISLNK(st.st_mode):
        return _refused("symlink", "The procedure file is a symlink; only regular files are read.")
    if not stat.S_ISREG(st.st_mode):
        return _refused("not_regular_file", "The procedure path is not a regular file.")
    if st.st_size > MAX_PROCEDURE_BYTES:
        return _refused("too_large", f"The procedure file is {st.st_size} bytes; the limit is {MAX_PROCEDURE_BYTES}.")
    try:
        # O_NOFOLLOW and O_NONBLOCK close the race where the file is swapped after lstat.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return _refused("unreadable", f"The procedure file cannot be opened: {exc.strerror}.")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return _refused("not_regular_file", "The procedure path is not a regular file.")
        chunks, size = [], 0
        while size <= MAX_PROCEDURE_BYTES:
            chunk = os.read(fd, MAX_PROCEDURE_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > MAX_PROCEDURE_BYTES:
        return _refused("too_large", f"The procedure file is over {MAX_PROCEDURE_BYTES} bytes.")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return _refused("encoding", "The procedure file is not UTF-8 text.")
    return ProcedureFile(True, hashlib.sha256(data).hexdigest(), text)


def encode_procedure(text: str) -> bytes:
    """The file content for procedure ``text`` (UTF-8, lone surrogates replaced).

    :raises AgentLinkError: ``body_too_large`` (``limitBytes``, ``actualBytes``) over 64 KiB.
    """
    data = sanitize_text(text).encode("utf-8")
    if len(data) > MAX_PROCEDURE_BYTES:
        raise AgentLinkError(
            "body_too_large", f"The procedure is {len(data)} bytes; the limit is {MAX_PROCEDURE_BYTES} bytes (UTF-8).",
            {"limitBytes": MAX_PROCEDURE_BYTES, "actualBytes": len(data)},
        )
    return data


def write_procedure(state_dir: Path, name: str, data: bytes) -> None:
    """Replace role ``name``'s procedure file with ``data`` from :func:`encode_procedure`
    (atomic, mode 0600).

    :raises AgentLinkError: ``state_io_error`` when the ``roles`` folder is a symlink or the
        write fails.
    """
    folder = state_dir / PROCEDURES_DIR
    if folder.is_symlink():
        raise io_error(folder, state_dir, "ELOOP", f"{PROCEDURES_DIR}/ is a symlink; agent-link writes procedures only into a real folder.")
    atomic_write(procedure_path(state_dir, name), data, state_dir)


def latest_version(store: Store, name: str) -> dict[str, Any] | None:
    """The last recorded version of role ``name``: ``{version, sha256, updatedAt}`` or None."""
    row = store.conn.execute(
        "SELECT version, sha256, recorded_at FROM role_procedure_versions WHERE role = ? ORDER BY version DESC LIMIT 1",
        (name,),
    ).fetchone()
    if row is None:
        return None
    return {"version": row["version"], "sha256": row["sha256"], "updatedAt": iso(row["recorded_at"])}


def record_version(store: Store, name: str, proc: ProcedureFile, *, wait: bool = True) -> dict[str, Any]:
    """Record the file's content as the next version unless it is already the latest.

    Content already recorded as the latest version is only read: no write transaction,
    so the common case never takes (or waits for) the write lock.

    :param proc: a present :class:`ProcedureFile`.
    :param wait: False to raise ``state_busy`` at once instead of waiting for another
        process's write lock when a new version must be written.
    :returns: ``{name, version, sha256}`` of the content (one transaction, so two servers
        recording the same edit get the same number).
    """
    assert proc.present and proc.sha256 is not None and proc.text is not None
    latest = latest_version(store, name)
    if latest is not None and latest["sha256"] == proc.sha256:
        return {"name": name, "version": latest["version"], "sha256": proc.sha256}
    with store.write(wait=wait) as conn:
        row = conn.execute(
            "SELECT version, sha256 FROM role_procedure_versions WHERE role = ? ORDER BY version DESC LIMIT 1", (name,)
        ).fetchone()
        if row is not None and row["sha256"] == proc.sha256:
            version = row["version"]
        else:
            version = (row["version"] if row is not None else 0) + 1
            conn.execute(
                "INSERT INTO role_procedure_versions (role, version, sha256, text, recorded_at) VALUES (?, ?, ?, ?, ?)",
                (name, version, proc.sha256, proc.text, now_ms()),
            )
    return {"name": name, "version": version, "sha256": proc.sha256}


def claim_text(store: Store, name: str, holder: str, sha256: str, message_id: str, *, wait: bool = True) -> bool:
    """Make ``message_id`` the message that shows this content to ``holder``, unless another
    message already does. Returns True when this message carries the text.

    :param wait: False to raise ``state_busy`` at once while another process holds the
        write lock."""
    with store.write(wait=wait) as conn:
        conn.execute(
            "INSERT OR IGNORE INTO role_procedure_shown (role, holder, sha256, message_id, at) VALUES (?, ?, ?, ?, ?)",
            (name, holder, sha256, message_id, now_ms()),
        )
        row = conn.execute(
            "SELECT message_id FROM role_procedure_shown WHERE role = ? AND holder = ? AND sha256 = ?", (name, holder, sha256)
        ).fetchone()
    return row["message_id"] == message_id


def text_for(store: Store, name: str, holder: str, sha256: str, message_id: str) -> str | None:
    """The procedure text when ``message_id`` is the message that shows it to ``holder``."""
    row = store.conn.execute(
        "SELECT v.text FROM role_procedure_shown s JOIN role_procedure_versions v ON v.role = s.role AND v.sha256 = s.sha256"
        " WHERE s.role = ? AND s.holder = ? AND s.sha256 = ? AND s.message_id = ? LIMIT 1",
        (name, holder, sha256, message_id),
    ).fetchone()
    return row["text"] if row is not None else None


def procedure_view(store: Store, state_dir: Path, name: str, *, include_text: bool = False) -> dict[str, Any] | None:
    """``{name, version, sha256, updatedAt, present, pending, problem?, text?}`` for a role, or
    None when it never had a procedure. ``pending`` means the file differs from the last
    recorded version (the next send records it)."""
    proc = read_procedure(state_dir, name)
    latest = latest_version(store, name)
    if not proc.present and latest is None and proc.problem is None:
        return None
    view: dict[str, Any] = {
        "name": name,
        "version": latest["version"] if latest else None,
        "sha256": proc.sha256 if proc.present else (latest["sha256"] if latest else None),
        "updatedAt": latest["updatedAt"] if latest else None,
        "present": proc.present,
        "pending": proc.present and (latest is None or latest["sha256"] != proc.sha256),
    }
    if proc.problem is not None:
        view["problem"] = proc.problem
    if include_text:
        view["text"] = proc.text
    return view
