"""The settings file every agent-link process reads (README.md, "The settings file"). Standard library only, ``tomllib``
only when the file exists: the hook fast path reads it.
"""

from __future__ import annotations

import os

from agent_link_core.errors import AgentLinkError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


class SettingsEnv(dict):  # type: ignore[type-arg]
    """An environment with the settings file's values under the real variables: :attr:`path` the file, :attr:`from_file`
    the names whose value came from it."""

    path: str = ""
    from_file: frozenset[str] = frozenset()


def settings_path(env: Mapping[str, str] | None = None) -> str:
    """``$AGENT_LINK_CONFIG``, else ``$XDG_CONFIG_HOME/agent-link/config.toml``, else ``~/.config/agent-link/config.toml``; ``~`` expanded."""
    env = os.environ if env is None else env
    if explicit := env.get("AGENT_LINK_CONFIG"):
        return os.path.expanduser(explicit)
    base = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".config")
    return os.path.join(base, "agent-link", "config.toml")


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
    """``env`` (default ``os.environ``; a :class:`SettingsEnv` is returned as is) with the settings file's values where it
    has no value of its own; ``invalid_arguments`` for an unreadable or invalid file."""
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
