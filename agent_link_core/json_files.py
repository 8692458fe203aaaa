"""Small files of the state dir: private folders, and JSON files holding one object (records, registries, caches, other
programs' state files) read leniently and written atomically. Standard library only, and not :mod:`json` until a file is
written: the hook fast path reads and prints JSON through :func:`loads` and :func:`dumps`.
"""

from __future__ import annotations

import errno as errno_mod
import os

TYPE_CHECKING = False  # typing stays out of the hook fast path
if TYPE_CHECKING:
    from typing import Any

    from agent_link_core.errors import AgentLinkError


def loads(text: str) -> Any:
    """``json.loads(text)`` through the :mod:`json` package's C scanner, without importing the package (its :mod:`re` and
    :mod:`enum` are a third of a prompt hook's CPU); ``ValueError`` (as :mod:`json` words it) or ``RecursionError`` as it raises."""
    start = len(text) - len(text.lstrip(_JSON_SPACE))
    try:
        from _json import make_scanner

        value, end = make_scanner(_DECODER)(text, start)  # type: ignore[arg-type]  # reads the attributes only
    except Exception:  # not JSON, or no accelerator: json words the error (the bare scanner cannot)
        end = -1
    if end >= 0 and not text[end:].strip(_JSON_SPACE):
        return value
    import json

    return json.loads(text)


def dumps(value: Any, **options: Any) -> str:
    """``json.dumps(value)`` (ASCII, the default separators) through the C encoder, as :func:`loads`, or with ``options`` (its
    keywords) ``json.dumps`` itself; ``TypeError`` for a value JSON cannot hold, ``ValueError`` for a circular reference."""
    if options:
        import json

        return json.dumps(value, **options)
    try:
        from _json import encode_basestring_ascii, make_encoder

        return "".join(make_encoder({}, _not_json, encode_basestring_ascii, None, ": ", ", ", False, False, True)(value, 0))
    except Exception:  # let json word the error (or do it all without the accelerator)
        import json

        return json.dumps(value)


def _not_json(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


class _Decoder:
    """What the C scanner reads of a ``json.JSONDecoder()`` with the default settings."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}.__getitem__


_DECODER = _Decoder()
_JSON_SPACE = " \t\n\r"


def read_json_object(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The JSON object in the UTF-8 file ``path``, or None (never raising) for a file missing, unreadable, not UTF-8, not JSON,
    nested too deeply or holding another value: "no record", which the caller words."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = loads(handle.read())
    except (OSError, ValueError, RecursionError):  # ValueError: not UTF-8 / not JSON; RecursionError: nested too deeply
        return None
    return data if isinstance(data, dict) else None


def mtime_ns(path: str) -> int | None:
    """The modification time of ``path`` in ns, None when it cannot be read (cache fingerprints)."""
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def ensure_private_dir(path: str | os.PathLike[str]) -> None:
    """Create ``path`` and its missing parents with mode 0700 (whatever the umask); an existing one is left as it is (it may be
    shared on purpose, as ``/tmp``). ``state_io_error`` when it cannot be created."""
    try:
        missing = []  # not os.makedirs: it gives missing parents 0777 minus the umask
        current = os.path.abspath(path)
        while not os.path.isdir(current):
            missing.append(current)
            parent = os.path.dirname(current)
            if parent == current:
                break
            current = parent
        for directory in reversed(missing):
            try:
                os.mkdir(directory, 0o700)
            except FileExistsError:
                if not os.path.isdir(directory):  # "File exists" would hide which one is in the way
                    raise NotADirectoryError(errno_mod.ENOTDIR, f"{directory} is a file, not a directory") from None
                continue  # another process made it meanwhile: theirs, left as it is
            os.chmod(directory, 0o700)
    except OSError as exc:
        raise state_io_error(path, exc) from exc


def state_io_error(path: str | os.PathLike[str], exc: OSError, state_dir: str | None = None) -> AgentLinkError:
    """An ``AgentLinkError(state_io_error)`` with ``path`` relative to the state dir."""
    from agent_link_core.errors import AgentLinkError  # only when failing: importing this module loads no other

    shown = os.fspath(path)
    if state_dir is not None and shown.startswith(state_dir.rstrip("/") + "/"):
        shown = os.path.relpath(shown, state_dir)
    code = errno_mod.errorcode.get(exc.errno or 0, str(exc.errno)) if exc.errno else type(exc).__name__
    return AgentLinkError(
        "state_io_error",
        f"Could not use agent-link state at {shown}: {exc.strerror or exc}.",
        {"path": shown, "errno": code},
    )


def write_json_object(path: str, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` as JSON atomically (a temporary file renamed over it), the file 0600, missing folders 0700.

    :raises OSError: when it cannot be written; ``AgentLinkError`` (``state_io_error``) when its folder cannot be created.
    """
    text = dumps(data)  # the C encoder: a first run (the entry-point cache) imports neither json nor re
    ensure_private_dir(os.path.dirname(path))
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
