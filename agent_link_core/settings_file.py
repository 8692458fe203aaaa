"""The settings file every agent-link process reads, and the record of the state dirs processes used lately, which health
warns about (README.md, "The settings file"). The record, ``$XDG_CACHE_HOME/agent-link/state-dirs.json``, is
``{path: last use in ms}`` and advisory (a lost race drops one entry until its next use). Standard library only, ``tomllib``
only when the file exists: the hook fast path reads it.
"""

from __future__ import annotations

import os
import time

from agent_link_core.errors import AgentLinkError
from agent_link_core.json_files import read_json_object, state_io_error, write_json_object

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

STATE_DIR_RECENT_MS = 24 * 3600 * 1000  # "recently" for the health warning


class SettingsEnv(dict):  # type: ignore[type-arg]
    """An environment with the settings file's values filled in under the real variables.

    :attr path: the settings file; :attr from_file: the names whose value came from it.
    """

    path: str = ""
    from_file: frozenset[str] = frozenset()


def settings_path(env: Mapping[str, str] | None = None) -> str:
    """``$AGENT_LINK_CONFIG``, else ``$XDG_CONFIG_HOME/agent-link/config.toml``, else ``~/.config/agent-link/config.toml``; ``~`` expanded."""
    env = os.environ if env is None else env
    explicit = env.get("AGENT_LINK_CONFIG")
    return os.path.expanduser(explicit) if explicit else _xdg(env, "XDG_CONFIG_HOME", ".config", "config.toml")


def _xdg(env: Mapping[str, str], variable: str, default: str, name: str) -> str:
    base = env.get(variable) or os.path.join(env.get("HOME") or os.path.expanduser("~"), default)
    return os.path.join(base, "agent-link", name)


def variable_name(key: str) -> str:
    """``state_dir`` or ``AGENT_LINK_STATE_DIR`` -> ``AGENT_LINK_STATE_DIR``."""
    upper = key.strip().upper().replace("-", "_")
    return upper if upper.startswith("AGENT_LINK_") else "AGENT_LINK_" + upper


def read_file(path: str) -> dict[str, Any]:
    """The whole TOML document at ``path`` (empty when the file does not exist); ``invalid_arguments`` when it is unreadable or not TOML."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise AgentLinkError("invalid_arguments", f"The settings file {path} cannot be read: {exc.strerror}.",
                             {"path": path}, hint=f"{'Move that folder away' if isinstance(exc, IsADirectoryError) else 'Fix its permissions'}"
                             " or point AGENT_LINK_CONFIG elsewhere.") from exc
    import tomllib

    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise AgentLinkError("invalid_arguments", f"The settings file {path} is not valid TOML: {exc}.",
                             {"path": path}, hint="Fix the file, or move it aside and use `agent-link config set`.") from exc


def with_settings(env: Mapping[str, str] | None = None) -> SettingsEnv:
    """``env`` (default ``os.environ``) with the settings file's values added where the environment has no value of its own.
    Passing a :class:`SettingsEnv` returns it as is.

    :raises AgentLinkError: ``invalid_arguments`` for an unreadable or invalid file.
    """
    env = os.environ if env is None else env
    if isinstance(env, SettingsEnv):
        return env
    merged = SettingsEnv(env)
    merged.path = settings_path(env)
    taken: set[str] = set()
    for key, value in read_file(merged.path).items():  # a key given twice (``x``, ``AGENT_LINK_X``): the last wins
        name = variable_name(key)
        if isinstance(value, (str, int)) and (name in taken or merged.get(name) in (None, "")):  # bool is an int
            merged[name] = ("1" if value else "0") if isinstance(value, bool) else str(value)
            taken.add(name)
    merged.from_file = frozenset(taken)
    return merged


def _state_dirs(env: Mapping[str, str] | None) -> tuple[str, dict[str, int]]:
    """The path of the state directories' record (module docstring) and its ``{path: last use in ms}`` entries."""
    path = _xdg(os.environ if env is None else env, "XDG_CACHE_HOME", ".cache", "state-dirs.json")
    data = read_json_object(path) or {}
    return path, {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, int)}


def record_state_dir(state_dir: str, env: Mapping[str, str] | None = None, now_ms: int | None = None) -> None:
    """Note that ``state_dir`` is in use now (at most once a minute; a failed write is ignored)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    path, known = _state_dirs(env)
    if now - known.get(state_dir, 0) < 60_000:
        return
    known[state_dir] = now
    try:
        write_json_object(path, known)  # private like every file agent-link makes, whatever the umask
    except (OSError, AgentLinkError):
        pass


def other_state_dirs(state_dir: str, env: Mapping[str, str] | None = None, now_ms: int | None = None) -> list[dict[str, object]]:
    """Other state directories used within :data:`STATE_DIR_RECENT_MS` that still exist (a removed one holds no mailbox anyone
    uses): ``[{path, lastUsedMs}]``, newest first."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    found = [{"path": p, "lastUsedMs": t} for p, t in _state_dirs(env)[1].items()
             if p != state_dir and now - t <= STATE_DIR_RECENT_MS and os.path.isdir(p)]
    return sorted(found, key=lambda item: -int(item["lastUsedMs"]))  # type: ignore[call-overload]


def forget_other_state_dirs(state_dir: str, env: Mapping[str, str] | None = None) -> list[str]:
    """Drop every state directory but ``state_dir`` from the record (``agent-link health --forget-state-dirs``; one still in use
    comes back with its next process): the paths dropped, sorted.

    :raises AgentLinkError: ``state_io_error`` when the record cannot be rewritten.
    """
    path, known = _state_dirs(env)
    dropped = sorted(p for p in known if p != state_dir)
    if dropped:
        try:
            write_json_object(path, {p: t for p, t in known.items() if p == state_dir})
        except OSError as exc:
            raise state_io_error(path, exc) from exc
    return dropped
