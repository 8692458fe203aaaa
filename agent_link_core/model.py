"""Value types shared by the core and plugins: callers and sessions (address syntax, from :mod:`agent_link_core.addresses`, is re-exported)."""

from __future__ import annotations

from agent_link_core.lazy import Struct, field
from agent_link_core.addresses import EXTERNAL, INVALID, address_scheme, is_address, is_ulid  # noqa: F401 - re-exported for plugins

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: where a runtime identity comes from (``Caller.source``); only these can be verified
RUNTIME_SOURCES = ("current_session", "env", "runtime_context")


class Caller(Struct, frozen=True):
    """Who is calling a tool or command.

    :param address: the caller's address, or ``external`` when no runtime identity is known.
    :param source: where it came from: ``current_session``, ``env``, ``runtime_context`` (MCP ``_meta``), ``config``
        (``AGENT_LINK_ADDRESS``) or ``fallback``.
    :param host: the harness name, or ``None``.
    :param evidence: what the host's own records proved about this process, in words (e.g. "pid 4242, an ancestor of
        this process, is the host process of that session"); None when the session is only named. See :mod:`agent_link_core.identity`.
    :param proven: the verdict of :func:`agent_link_core.identity.prove_sender`; None when not checked yet.
    """

    address: str = EXTERNAL
    source: str = "fallback"
    host: str | None = None
    turn_id: str | None = None
    tool_call_id: str | None = None
    proven: bool | None = None
    evidence: str | None = None

    @property
    def verified(self) -> bool:
        """True only when :func:`agent_link_core.identity.prove_sender` proved this runtime-named caller."""
        return self.proven is True and self.source in RUNTIME_SOURCES and is_address(self.address)

    @property
    def known(self) -> bool:
        """True when the caller has a well-formed address (not ``external``)."""
        return is_address(self.address)


#: how mail reaches a session unless its harness says otherwise (``Session.receive``)
DEFAULT_RECEIVE = {"push": None, "nudge": None, "pull": True}


class Session(Struct, frozen=True):
    """One agent a harness knows about (a thread, a session, ...).

    ``last_activity_ms`` is epoch milliseconds. ``receive`` says how mail reaches it: ``{"push": str|None, "nudge":
    str|None, "pull": bool}``. ``extra`` holds harness fields (the host's own ids, status, ...) that list tools pass through.
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
    receive: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_RECEIVE))
    aliases: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
