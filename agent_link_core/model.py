"""Value types shared by the core and plugins: callers and sessions.

Address syntax lives in :mod:`agent_link_core.addresses` (re-exported here).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent_link_core.addresses import (  # noqa: F401 - re-exported for plugins
    ADDRESS_RE,
    ANTICIPATIONS,
    EXTERNAL,
    INVALID,
    ROLE_NAME_RE,
    ULID_RE,
    address_scheme,
    is_address,
    is_ulid,
)

@dataclass(frozen=True)
class Caller:
    """Who is calling a tool or command.

    :param address: the caller's address, or ``external`` when no runtime identity is known.
    :param source: where it came from: ``current_session``, ``env``, ``runtime_context``
        (MCP ``_meta``), ``config`` (``AGENT_LINK_ADDRESS``) or ``fallback``.
    :param host: the harness name, or ``None``.
    :param proven: whether the named session was found in its host
        (:func:`agent_link_core.identity.prove_sender`); None when not checked.
    """

    address: str = EXTERNAL
    source: str = "fallback"
    host: str | None = None
    turn_id: str | None = None
    tool_call_id: str | None = None
    proven: bool | None = None

    @property
    def verified(self) -> bool:
        """A provenance hint, not authentication: the identity came from the runtime, and
        its session was not found missing in its host."""
        return self.proven is not False and self.source in ("current_session", "env", "runtime_context") and is_address(self.address)

    @property
    def known(self) -> bool:
        """True when the caller has a well-formed address (not ``external``)."""
        return is_address(self.address)


@dataclass(frozen=True)
class Session:
    """One agent a harness knows about (a thread, a session, ...).

    ``last_activity_ms`` is epoch milliseconds. ``receive`` says how mail reaches it:
    ``{"push": str|None, "nudge": str|None, "pull": bool}``. ``extra`` holds harness fields
    (the host's own ids, status, ...) that list tools pass through.
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
