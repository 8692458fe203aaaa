"""Value types shared by the core and plugins: addresses, sessions, messages.

An address is ``<scheme>:<id>``: the scheme names a harness (registered by a plugin) or
``role``; with no harness plugin any well-formed address can still receive mail.
``external`` stands for a sender with no runtime identity, ``invalid`` for one that failed
validation (never delivered to, never verified).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

ADDRESS_RE = re.compile(r"^([a-z][a-z0-9-]{0,31}):([A-Za-z0-9_.-]{1,128})$")
ROLE_NAME_RE = re.compile(r"^[a-z0-9-]{1,40}$")
ULID_RE = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")
EXTERNAL = "external"
INVALID = "invalid"

Anticipation = Literal["reply", "action", "fyi"]
ANTICIPATIONS: tuple[str, ...] = ("reply", "action", "fyi")
ResolutionKind = Literal["reply", "decline", "done"]
RESOLUTION_KINDS: tuple[str, ...] = ("reply", "decline", "done")


def is_address(value: object) -> bool:
    """True for a well-formed ``<scheme>:<id>`` address (``role:<name>`` included)."""
    if not isinstance(value, str):
        return False
    m = ADDRESS_RE.match(value)
    if not m:
        return False
    return m.group(1) != "role" or bool(ROLE_NAME_RE.match(m.group(2)))


def is_ulid(value: object) -> bool:
    """True for a 26-character Crockford base-32 ULID in canonical upper case."""
    return isinstance(value, str) and bool(ULID_RE.match(value))


def address_scheme(address: str) -> str:
    """The scheme of an address (``"team"`` for ``team:abc``); ``external`` otherwise."""
    m = ADDRESS_RE.match(address)
    return m.group(1) if m else EXTERNAL


@dataclass(frozen=True)
class Caller:
    """Who is calling a tool or command.

    :param address: the caller's address, or ``external`` when no runtime identity is known.
    :param source: where it came from: ``current_session``, ``env``, ``runtime_context``
        (MCP ``_meta``), ``config`` (``AGENT_LINK_ADDRESS``) or ``fallback``.
    :param host: the harness name, or ``None``.
    """

    address: str = EXTERNAL
    source: str = "fallback"
    host: str | None = None
    turn_id: str | None = None
    tool_call_id: str | None = None

    @property
    def verified(self) -> bool:
        """A provenance hint, not authentication: the identity came from the runtime."""
        return self.source in ("current_session", "env", "runtime_context") and is_address(self.address)

    @property
    def known(self) -> bool:
        return is_address(self.address)


@dataclass(frozen=True)
class Session:
    """One agent a harness knows about (a thread, a session, ...).

    ``last_activity_ms`` is epoch milliseconds. ``receive`` says how mail reaches it:
    ``{"push": str|None, "nudge": str|None, "pull": bool}``. ``extra`` holds harness fields
    (threadId, status, cliSessionId, ...) that list tools pass through.
    """

    address: str
    harness: str
    id: str
    title: str | None = None
    cwd: str | None = None
    surface: tuple[str, ...] = ()
    loaded: bool | None = None
    archived: bool = False
    last_activity_ms: int | None = None
    receive: dict[str, Any] = field(default_factory=lambda: {"push": None, "nudge": None, "pull": True})
    aliases: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
