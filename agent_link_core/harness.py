"""The harness interface: what a host plugin provides to the core.

A harness owns one address scheme (its ``name``). The core asks it who is calling, which
sessions exist, and to push a stored message into a session. Every method has a safe
default, so a harness implements only what its host supports. Methods that do I/O are
async; none may block the event loop.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from agent_link_core.model import Caller, Session

#: a harness name, its address scheme
HARNESS_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,31}$")


class PeerGone(Exception):
    """The MCP client's connection is closed; nothing was written."""


#: ``McpPeer.era``: the connection opened with ``initialize`` (MCP revisions up to 2025-11-25)
HANDSHAKE = "handshake"
#: ``McpPeer.era``: the connection speaks the stateless revision 2026-07-28 (``server/discover``,
#: per-request ``_meta``), which has no path for notifications sent outside a request
STATELESS = "stateless"


class McpPeer:
    """The MCP client connection, as a harness's :meth:`Harness.serve` sees it.

    It exists from the moment the server starts serving, before any client message; the
    attributes fill in as the connection opens (:mod:`agent_link_core.handshake`).

    :param notify: ``async (method, params) -> None`` writing one JSON-RPC notification
        to the client's stream; raises :class:`PeerGone` when it cannot be written.
    :param client_info: the client's ``clientInfo`` (name, version), from ``initialize`` or
        from the stateless revision's request ``_meta``; ``{}`` until the client says it.

    Attributes: ``era`` (:data:`HANDSHAKE`, :data:`STATELESS` or None before the first
    request), ``protocol_version`` (the negotiated revision, e.g. ``"2025-11-25"``),
    ``initialized`` (a handshake client sent ``notifications/initialized``: notifications may
    now be written), ``discover_refused`` (this server answered ``server/discover`` with
    "method not found" so the client would use the handshake).
    """

    def __init__(self, notify: Any, client_info: Mapping[str, Any] | None = None) -> None:
        self._notify = notify
        self.client_info = dict(client_info or {})
        self.era: str | None = None
        self.protocol_version: str | None = None
        self.initialized = False
        self.discover_refused = False

    async def notify(self, method: str, params: Mapping[str, Any]) -> None:
        """Write a notification; returns only once it was handed to the transport."""
        await self._notify(method, params)

    def view(self) -> dict[str, Any]:
        """What health shows about the connection."""
        return {
            "era": self.era, "protocolVersion": self.protocol_version, "initialized": self.initialized,
            "discoverRefused": self.discover_refused,
            "client": {k: self.client_info.get(k) for k in ("name", "version")} if self.client_info else None,
        }


@dataclass
class SessionListing:
    """What one harness found.

    :param sessions: the sessions, any order (the directory sorts and filters).
    :param provider: ``{"available": bool, "reason": str|None, "source": str|None, ...}``;
        an unreachable source is reported here, never hidden as an empty list.
    :param complete: False when the scan stopped early (paging ceiling, an endpoint down);
        resolving by a bare id refuses to guess from an incomplete scan.
    """

    sessions: list[Session] = field(default_factory=list)
    provider: dict[str, Any] = field(default_factory=lambda: {"available": True, "reason": None})
    complete: bool = True


@dataclass
class Delivery:
    """The outcome of one push attempt.

    :param delivered: True only on evidence the session received the envelope (the host
        echoed the message id, a notification was written). Otherwise it stays queued.
    :param via: the push path (a name the harness chooses) when delivered.
    :param state: the push outcome shown as ``deliveryState`` (``queued`` when the message only
        waits in the mailbox; other names are the harness's own, listed in docs/delivery-states.md).
    :param evidence: what proved delivery (ids, item ids), recorded with the event.
    :param warnings: ``[{"code", "message", "details"?}]`` for the sender.
    :param fields: extra result fields for the sender (ids the host gave, action, ...;
        declared in :attr:`Harness.send_result_fields`).
    :param unknown: True when the push may or may not have landed (answer lost and the
        session could not be checked); the message stays queued and is never resent blindly.
    :param retryable: True when the push failed before the host accepted anything (e.g. the
        host said it is overloaded): trying again cannot duplicate it.
    :param accepted: True when the host accepted the push but has not shown it to the model
        yet (e.g. queued behind a running tool call). It is never pushed again; it becomes
        delivered when the harness sees the evidence, however late (:meth:`Harness.recheck`).
        ``note`` then says so in words (default "accepted, awaiting the session").
    """

    delivered: bool = False
    via: str | None = None
    state: str = "queued"
    evidence: dict[str, Any] = field(default_factory=dict)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    fields: dict[str, Any] = field(default_factory=dict)
    unknown: bool = False
    retryable: bool = False
    accepted: bool = False
    note: str | None = None


@dataclass(frozen=True)
class OutputBudget:
    """How much text the host shows the model in full, measured on the real host.

    :param tool_result_bytes: UTF-8 bytes of one tool result object, serialised as the host
        shows it (see ``json_indent``), beyond which the host cuts it, hides it behind a
        preview or refuses it.
    :param json_indent: the host shows the result's ``structuredContent`` as JSON with this
        indent; None for compact JSON.
    :param push_bytes: UTF-8 bytes of one pushed text (a pushed prompt, a channel event); a
        larger envelope is announced instead and read from the inbox in pages.
    """

    tool_result_bytes: int
    json_indent: int | None = None
    push_bytes: int | None = None


@dataclass(frozen=True)
class SendOption:
    """A ``message_agent`` argument that only some harnesses understand, declared by them.

    The core adds every declared option to ``message_agent``'s input schema and passes the
    ones given to the recipient's harness (``deliver(..., options)``); aimed at a session of a
    harness that does not declare it, an option is refused before anything is stored.

    :param name: the argument's name (camelCase, like the core's arguments).
    :param schema: its JSON schema (with a ``description``: models read it).
    :param capability: when set, a harness without the option refuses it as ``unsupported``
        with ``details.capability`` (a missing ability of the target, e.g. changing its
        model); when None, as ``invalid_arguments`` (``unsupported_for_target``).
    """

    name: str
    schema: dict[str, Any]
    capability: str | None = None


@dataclass(frozen=True)
class SenderOption:
    """A command-line option of ``agent-link send|reply|status|wait`` naming a sender in a
    form only this harness recognises (a host's own session naming).

    The value is passed to every harness's :meth:`Harness.identify_caller` as ``meta`` of
    exactly ``{key: value, ...}`` (with the other given sender options); the harness that
    recognises it answers, else the command fails naming the option.

    :param flag: the option, ``--from-<something>``.
    :param key: the ``meta`` key the value is passed under.
    :param help: one line for ``--help``.
    :param requires: another declared flag this one needs, or None.
    """

    flag: str
    key: str
    help: str
    requires: str | None = None

    @property
    def param(self) -> str:
        """The click parameter name (``--from-x`` -> ``from_x``)."""
        return self.flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class HarnessDeclaration:
    """A harness registered by what the core reads without its code; the harness itself is
    built from ``target`` the first time a command needs it (discovery, delivery, a caller
    only its host can name). Register one instead of an instance to keep the host's modules
    out of processes that never talk to that host (``agent-link inbox``, a send to a plain
    address).

    Every field but ``target`` and ``caller_variables`` must equal the built harness's
    attribute of the same name (a plugin's test should compare them).

    :param name: the address scheme, as :attr:`Harness.name`.
    :param target: ``"package.module:attribute"`` of the :class:`Harness` subclass (or of a
        function without arguments returning the harness).
    :param session_kind: as :attr:`Harness.session_kind`.
    :param host_variables: as :attr:`Harness.host_variables`.
    :param host_priority: as :attr:`Harness.host_priority`.
    :param sender_options: as :attr:`Harness.sender_options`.
    :param caller_variables: environment variables without which (and without a request's
        ``_meta``) :meth:`Harness.identify_caller` answers None: the harness is not built just
        to be asked who is calling when none of them is set.
    :param caller_arguments: as :attr:`Harness.caller_arguments`.
    """

    name: str
    target: str
    session_kind: str = ""
    host_variables: tuple[str, ...] = ()
    host_priority: int = 100
    sender_options: tuple[SenderOption, ...] = ()
    caller_variables: tuple[str, ...] = ()
    caller_arguments: tuple[str, ...] = ()

    def may_identify(self, meta: Mapping[str, Any], env: Mapping[str, str]) -> bool:
        """Whether the harness could name the caller from ``meta`` and ``env`` (so must be built)."""
        return bool(meta) or any((env.get(v) or "").strip() for v in self.caller_variables)

    def build(self) -> Harness:
        """The harness, its module imported now.

        :raises Exception: whatever importing or building it raises; ``TypeError`` when the
            target is not a :class:`Harness` named :attr:`name`.
        """
        import importlib

        module, _, attribute = self.target.partition(":")
        made = getattr(importlib.import_module(module), attribute)()
        if not isinstance(made, Harness) or made.name != self.name:
            raise TypeError(f"{self.target} built a {type(made).__name__} named {getattr(made, 'name', None)!r}, "
                            f"not the Harness {self.name!r} it declares")
        return made


class HarnessTable(MutableMapping[str, "Harness"]):
    """The harnesses of an App by name: declared ones are built on first access.

    Membership, ``len`` and iteration over the names never build anything; ``[name]``,
    ``get``, ``values()`` and ``items()`` build what they return. :meth:`declared` gives
    what the core reads without building (a :class:`Harness` or a
    :class:`HarnessDeclaration` per name).

    :param entries: ``{name: Harness | HarnessDeclaration}``.
    :param build: ``(declaration) -> Harness | None``: builds and attaches one (None when it
        failed; the builder reports the failure and may drop the name from this table).
    """

    def __init__(self, entries: Mapping[str, Harness | HarnessDeclaration],
                 build: Callable[[HarnessDeclaration], Harness | None]) -> None:
        self._entries: dict[str, Harness | HarnessDeclaration] = dict(entries)
        self._build = build

    def __getitem__(self, name: str) -> Harness:
        entry = self._entries[name]
        if isinstance(entry, HarnessDeclaration):
            built = self._build(entry)
            if built is None or self._entries.get(name) is not entry:  # failed, or left out meanwhile
                self._entries.pop(name, None)
                raise KeyError(name)
            self._entries[name] = entry = built
        return entry

    def __setitem__(self, name: str, harness: Harness) -> None:
        self._entries[name] = harness

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def pop(self, name: str, *default: Any) -> Any:  # type: ignore[override]
        """Remove ``name`` without building it; its entry (built or declared), or ``default``."""
        return self._entries.pop(name, *default)

    def items(self) -> list[tuple[str, Harness]]:  # type: ignore[override]
        """``[(name, harness)]``, each built now; one that cannot be built is left out."""
        return [(name, h) for name in list(self._entries) if (h := self.get(name)) is not None]

    def values(self) -> list[Harness]:  # type: ignore[override]
        """Every harness, each built now; one that cannot be built is left out."""
        return [h for _, h in self.items()]

    def declared(self) -> dict[str, Harness | HarnessDeclaration]:
        """``{name: harness or declaration}``, nothing built."""
        return dict(self._entries)

    def built(self) -> list[Harness]:
        """The harnesses built so far (registered instances included)."""
        return [h for h in self._entries.values() if isinstance(h, Harness)]


class Harness:
    """Base class for a host's harness. Subclass it and set :attr:`name`.

    ``name`` is the address scheme the harness owns (``[a-z][a-z0-9-]{0,31}``).
    """

    name: str = ""
    #: delivery options of message_agent this harness honours (``mode``, ``model``, ...);
    #: others aimed at its sessions are refused before anything is stored
    send_options: frozenset[str] = frozenset()
    #: what one of its sessions is called in audit receipts (``target.kind``), e.g.
    #: ``<host>_thread``; empty means the harness name
    session_kind: str = ""
    #: environment variables the host sets in processes it starts: one of them present means
    #: this process runs inside the host (health's ``hostDetection``)
    host_variables: tuple[str, ...] = ()
    #: order in which harnesses' ``host_variables`` are tried (lower first), for a process
    #: that sees the variables of more than one host
    host_priority: int = 100
    #: environment variables other than agent-link settings that this harness reads wherever
    #: it runs (the host's own folders, e.g. its config dir): every host must pass them to
    #: agent-link's server, since a server of another host reads them too. Never the
    #: per-process ``host_variables`` (a server must not inherit another process's session).
    env_variables: tuple[str, ...] = ()
    #: whether mail sent to the exact address of an archived session is accepted (it waits
    #: in the mailbox until the session is resumed); fuzzy queries never pick archived ones
    archived_sessions_take_mail: bool = False
    #: result fields of ``wait_for_agent`` its ``activity_check`` outcomes add (name → JSON schema)
    wait_result_fields: Mapping[str, dict[str, Any]] = {}
    #: arguments of ``agent_link_health`` this harness understands (name → JSON schema, with a
    #: description); given ones reach :meth:`prepare_health`
    health_options: Mapping[str, dict[str, Any]] = {}
    #: what its host shows the model in full (inbox reads are cut to fit; pushes too); None: no limit known
    output_budget: OutputBudget | None = None
    #: the options this harness declares (schema and refusal); their names count as
    #: :attr:`send_options` too
    send_option_specs: tuple[SendOption, ...] = ()
    #: extra result fields of a send to its sessions (``Delivery.fields``), as JSON schemas;
    #: the core declares them in ``message_agent``'s output schema
    send_result_fields: Mapping[str, dict[str, Any]] = {}
    #: command-line options naming a sender this harness recognises (see SenderOption)
    sender_options: tuple[SenderOption, ...] = ()
    #: tool-call argument names that the host's side (a host plugin agent-link installs, never
    #: the model) adds to every call of agent-link's tools to name the calling session, for hosts
    #: whose MCP requests carry no caller: the core moves them out of the arguments into the
    #: ``meta`` that :meth:`identify_caller` receives before the arguments are validated.
    #: Start them with ``_`` so they cannot clash with a tool's own arguments.
    caller_arguments: tuple[str, ...] = ()

    def accepted_send_options(self) -> frozenset[str]:
        """Every ``message_agent`` option this harness honours (:attr:`send_options` and the
        names of :attr:`send_option_specs`)."""
        return frozenset(self.send_options) | {o.name for o in self.send_option_specs}

    def attach(self, app: Any) -> None:
        """Called once by the :class:`~agent_link_core.app.App` that loaded this harness,
        before any other method: keep ``app`` for its settings, environment and database."""
        self.app = app

    async def aclose(self) -> None:
        """Release what the harness holds (connections, child processes). Called once when
        the process shuts down (MCP server exit, end of a CLI command)."""
        return None

    def identify_caller(self, meta: Mapping[str, Any], env: Mapping[str, str]) -> Caller | None:
        """Who is calling, from a tool call's MCP ``_meta`` and the process environment.

        :param meta: the request's ``_meta`` (may be empty).
        :param env: the server's environment.
        :returns: a :class:`~agent_link_core.model.Caller` when this host can tell, else None.
            Set its ``evidence`` only when the host's own records tie this process to the
            session (what :mod:`agent_link_core.identity` asks); a session only named by a
            variable or ``_meta`` key gets none, and its mail is signed ``fromVerified="false"``.
        """
        return None

    async def list_sessions(self, *, include_archived: bool = False, limit: int = 200) -> SessionListing:
        """All sessions this harness can see, up to ``limit`` (newest first preferred)."""
        return SessionListing(provider={"available": False, "reason": "not_implemented"})

    async def get_session(self, session_id: str) -> Session | None:
        """One session by id (without the scheme), archived ones included; None if unknown."""
        return None

    async def deliver(self, message: dict[str, Any], envelope: str, options: Mapping[str, Any]) -> Delivery:
        """Push a stored message into its recipient session.

        :param message: the stored message (``id``, ``recipient``, ``from``, ...).
        :param envelope: the rendered ``<agent-link-message>`` text to show the model.
        :param options: harness-specific send options from the tool call (validated).
        :returns: a :class:`Delivery`; the default keeps the message queued for pull.
        :raises AgentLinkError: when the target cannot receive at all (``archived``,
            ``not_found``); the message row then stays queued and is reported as such.
        """
        return Delivery()

    def activity_check(self, session_id: str) -> Callable[[], Awaitable[dict[str, Any] | None]] | None:
        """For ``wait_for_agent`` without ``replyToMessageId``: a check the wait calls every
        poll, returning the session's own outcome once its activity ends the wait
        (``{"outcome": "turn_completed"|"idle", ...}``, extra fields declared in
        :attr:`wait_result_fields`) or None to keep waiting. The default (None) waits for
        messages only. May raise AgentLinkError."""
        return None

    async def prepare_health(self, options: Mapping[str, Any]) -> None:
        """Called by ``agent_link_health`` before :meth:`health`, with the given arguments
        among every harness's :attr:`health_options` (a harness may then start or connect what
        it needs to report fully, or probe nothing). The default does nothing."""

    async def recheck(self, message: dict[str, Any]) -> Delivery | None:
        """Look again for evidence of an earlier push of ``message`` that the host accepted
        (or whose answer was lost). Never pushes anything.

        :param message: the stored message (``id``, ``recipient``, ...), still undelivered.
        :returns: a delivered :class:`Delivery` (``via``, ``evidence``) when the session has it
            now; None when there is no new evidence. The default finds none.
        """
        return None

    def mcp_capabilities(self, app: Any) -> dict[str, dict[str, Any]]:
        """Experimental MCP capabilities to advertise at ``initialize`` (``{name: {}}``)."""
        return {}

    def needs_handshake(self, app: Any) -> bool:
        """True when this harness writes notifications outside any request (a live channel).

        The stateless revision 2026-07-28 has no path for those, so the server then answers
        ``server/discover`` with "method not found" and clients open the connection with the
        ``initialize`` handshake instead. Asked once, after :meth:`mcp_capabilities`.
        """
        return False

    async def serve(self, app: Any, peer: McpPeer) -> None:
        """Background work of an MCP server process (e.g. pushing new mail). Started when the
        server starts serving, before the client's first message, under every protocol
        revision; cancelled when the connection ends. ``peer`` fills in as the connection
        opens: check ``peer.era`` / ``peer.initialized`` before writing notifications.
        The default does nothing."""
        return None

    def health(self) -> dict[str, Any]:
        """This harness's health section (cheap, never raises)."""
        return {}


def check_harness(record: Any) -> None:
    """Refuse a harness that is not a :class:`~agent_link_core.harness.Harness` (or a
    :class:`~agent_link_core.harness.HarnessDeclaration` with a ``module:attribute`` target)
    with a valid name.

    :raises Refused: naming what is wrong and how to fix it.
    """
    from agent_link_core.boundary import Refused

    if not isinstance(record, (Harness, HarnessDeclaration)):
        raise Refused(f"registered a {type(record).__name__}, not a Harness", "Subclass agent_link_core.harness.Harness.")
    name = getattr(record, "name", None)
    if not isinstance(name, str) or not HARNESS_NAME_RE.match(name):
        raise Refused(f"registered a harness named {name!r}",
                      "A harness name is its address scheme: 1-32 of a-z 0-9 -, starting with a letter.")
    if isinstance(record, HarnessDeclaration):
        module, sep, attribute = record.target.partition(":") if isinstance(record.target, str) else ("", "", "")
        if not (module and sep and attribute):
            raise Refused(f"declared harness {name!r} with target {record.target!r}",
                          "Give the harness class as 'package.module:ClassName'.")
        return
    options: Any = getattr(record, "send_options", frozenset())
    if not isinstance(options, (set, frozenset)) or not all(isinstance(o, str) for o in options):
        raise Refused(f"harness {name!r} declares send_options that are not a set of strings",
                      "Set send_options = frozenset({'option', ...}).")
    named: Any = getattr(record, "caller_arguments", ())
    if not isinstance(named, tuple) or not all(isinstance(a, str) and len(a) > 1 and a.startswith("_") for a in named):
        raise Refused(f"harness {name!r} declares caller_arguments that are not a tuple of names starting with '_'",
                      "Set caller_arguments = ('_hostCaller', ...): names no tool uses as an argument.")
