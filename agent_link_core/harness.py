"""The harness interface a host plugin implements (docs/plugins.md section 5), its result records, and the calls of its
methods through the plugin boundary."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from agent_link_core.harness_decl import HarnessDeclaration, OutputBudget, SenderOption  # noqa: F401 - plugins import them from here
from agent_link_core.errors import AgentLinkError
from agent_link_core.lazy import Struct, field
from agent_link_core.model import Caller, Session

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from agent_link_core.plugins import Hooks


class SessionListing(Struct):
    """What one harness found.

    :param sessions: the sessions, any order.
    :param provider: ``{"available": bool, "reason": str|None, "source": str|None, "detail"?: str}``: an unreachable
        source is reported here, never hidden as an empty list.
    :param complete: False when the scan stopped early (paging ceiling, an endpoint down).
    """

    sessions: list[Session] = field(default_factory=list)
    provider: dict[str, Any] = field(default_factory=lambda: {"available": True, "reason": None})
    complete: bool = True


class Delivery(Struct):
    """The outcome of one push attempt.

    :param delivered: True only on evidence the session received the envelope (the host echoed the message id, a
        notification was written); else it stays queued.
    :param via: the push path (a name the harness chooses) when delivered.
    :param state: shown as ``deliveryState``: ``queued``, or the harness's own names (docs/delivery-states.md).
    :param evidence: what proved delivery (ids), recorded with the event.
    :param warnings: ``[{"code", "message", "details"?}]`` for the sender.
    :param fields: extra result fields of ``message_agent`` (its plugin declares them: ``agent_link_extend_tools``).
    :param unknown: True when the push may or may not have landed: it stays queued and is never resent blindly.
    :param retryable: True when the push failed before the host accepted anything (retrying cannot duplicate it).
    :param accepted: True when the host accepted the push but has not shown it to the model yet: never pushed again,
        delivered once :meth:`Harness.recheck` sees evidence. ``note`` says so in words (default "accepted, awaiting the session").
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


class Harness:
    """Base class for a host's harness. Subclass it and set :attr:`name`, the address scheme it owns (``[a-z][a-z0-9-]{0,31}``).
    Every method has a safe default; methods that do I/O are async and must not block the event loop."""

    name: str = ""
    #: what one of its sessions is called in receipts (``target.kind``); empty: the harness name
    session_kind: str = ""
    #: every source kind its sessions can have (``extra["source"]``, ``surface``), for ``agent-link sessions|who|find --source``
    source_kinds: tuple[str, ...] = ()
    #: variables the host sets in the processes it starts (health's ``hostDetection``)
    host_variables: tuple[str, ...] = ()
    #: the order in which harnesses' ``host_variables`` are tried (lower first)
    host_priority: int = 100
    #: variables other than settings it reads wherever it runs (the host's folders), which every host passes to agent-link's
    #: server. Never per-process ``host_variables``.
    env_variables: tuple[str, ...] = ()
    #: whether mail to the exact address of an archived session is accepted (it waits until resumed)
    archived_sessions_take_mail: bool = False
    #: what its host shows the model in full (inbox reads are cut to fit; pushes too); None: no limit known
    output_budget: OutputBudget | None = None
    #: command-line options naming a sender this harness recognises (see SenderOption)
    sender_options: tuple[SenderOption, ...] = ()
    #: tool-call arguments (starting with ``_``) the host's side, never the model, adds to name the calling session where MCP
    #: requests carry no caller: the core moves them into the ``meta`` :meth:`identify_caller` receives before validation
    caller_arguments: tuple[str, ...] = ()

    def attach(self, app: Any) -> None:
        """Called once by the App that loaded this harness, before any other method."""
        self.app = app

    async def aclose(self) -> None:
        """Release what the harness holds (connections, child processes), once, at shutdown."""

    def identify_caller(self, meta: Mapping[str, Any], env: Mapping[str, str]) -> Caller | None:
        """Who is calling, from a tool call's MCP ``_meta`` and the process environment.

        :param meta: the request's ``_meta`` (may be empty).
        :param env: the server's environment.
        :returns: a :class:`~agent_link_core.model.Caller` when this host can tell, else None; with ``evidence`` only when
            the host's own records tie this process to the session (:mod:`agent_link_core.identity`).
        """

    async def list_sessions(self, *, include_archived: bool = False, limit: int = 200) -> SessionListing:
        """All sessions this harness can see, up to ``limit`` (newest first preferred)."""
        return SessionListing(provider={"available": False, "reason": "not_implemented"})

    async def get_session(self, session_id: str) -> Session | None:
        """One session by id (without the scheme), archived ones included; None if unknown."""

    async def deliver(self, message: dict[str, Any], envelope: str, options: Mapping[str, Any]) -> Delivery:
        """Push a stored message into its recipient session.

        :param message: the stored message (``id``, ``recipient``, ``from``, ...).
        :param envelope: the rendered ``<agent-link-message>`` text to show the model.
        :param options: the ``message_agent`` arguments plugins added (``agent_link_extend_tools``) that the call gave
            (validated; a plugin refuses those its target cannot take in ``agent_link_tool_send``); ``{}`` from the CLI.
        :returns: a :class:`Delivery`; the default keeps the message queued for pull.
        :raises AgentLinkError: when the target cannot receive at all (``archived``, ``not_found``); the message row then
            stays queued and is reported as such.
        """
        return Delivery()

    async def prepare_health(self, options: Mapping[str, Any]) -> None:
        """Called by ``agent_link_health`` before :meth:`health` with the arguments plugins added to it (``agent_link_extend_tools``) that the call gave."""

    async def recheck(self, message: dict[str, Any]) -> Delivery | None:
        """Look again for evidence of an earlier push of ``message`` that the host accepted (or whose answer was lost).
        Never pushes anything.

        :param message: the stored message (``id``, ``recipient``, ...), still undelivered.
        :returns: a delivered :class:`Delivery` (``via``, ``evidence``) when the session has it now; None when there is
            no new evidence (the default).
        """

    async def serve(self, app: Any, peer: Any) -> None:
        """Background work of an MCP server process (e.g. pushing new mail), started before the client's first message and
        cancelled when the connection ends. ``peer``: what the plugin watching the connection answered
        (``agent_link_mcp_connection``), or None."""

    def health(self) -> dict[str, Any]:
        """This harness's health section (cheap, never raises)."""
        return {}


# A harness's methods run as its plugin's code: a fault is reported as ``harness.<name>.<method>``
# of the plugin that registered it (``harness <name>`` when none did).

def _named(hooks: Hooks, harness: Harness | HarnessDeclaration, method: str) -> tuple[str, str]:
    return hooks.owner("harness", harness.name) or f"harness {harness.name}", f"harness.{harness.name}.{method}"


def delivery_refused(answer: Any, plugin: str) -> str | None:
    """Why a push's answer (``deliver``, ``recheck``) is refused: not a :class:`Delivery` of its fields' documented types."""
    from agent_link_core.boundary import plain, warnings_ok

    kinds = [(bool,), (str, type(None)), (str,), (dict,), (list,), (dict,), (bool,), (bool,), (bool,), (str, type(None))]  # Delivery._fields
    ok = type(answer) is Delivery and all(type(v) in t for v, t in zip(answer._values(), kinds, strict=True))
    ok = ok and plain([answer.evidence, answer.fields]) and warnings_ok(answer.warnings)
    return None if ok else f"returned {type(answer).__name__}; expected a Delivery of the documented types"


def harness_fault(hooks: Hooks, harness: Harness | HarnessDeclaration, method: str, error: str, *, exc: BaseException | None = None,
                  disable: bool = False) -> None:
    """Report ``error`` (cut to 300 characters) as a fault of ``harness``'s ``method`` (``disable``: leave its plugin out)."""
    hooks.boundary.fault(*_named(hooks, harness, method), error[:300], exc=exc, disable=disable)


def call_harness(hooks: Hooks, harness: Harness, method: str, fn: Callable[[], Any], *, default: Any = None,
                 check: Callable[[Any, str], str | None] | None = None) -> Any:
    """Run ``fn`` (a sync method of ``harness``, arguments bound) through the boundary (:meth:`~agent_link_core.boundary.Boundary.call`):
    ``default`` when it faults or when ``check(answer, plugin)`` gives why a non-None answer is refused.

    :raises AgentLinkError: what ``fn`` raises deliberately.
    """
    return hooks.boundary.call(*_named(hooks, harness, method), fn, default=default, check=check, passing=(AgentLinkError,))


async def acall_harness(hooks: Hooks, harness: Harness, method: str, make: Callable[[], Awaitable[Any]], *,
                        bound_s: float | None = -1.0, default: Any = None,
                        check: Callable[[Any, str], str | None] | None = None, on_timeout: Callable[[], Any] | None = None) -> Any:
    """Await ``make()`` (an async method of ``harness``, arguments bound) through the boundary (:meth:`~agent_link_core.boundary.Boundary.acall`,
    ``on_timeout`` as there) within ``bound_s`` seconds (None: unbounded; by default ``AGENT_LINK_HOOK_TIMEOUT_MS``);
    ``default`` and ``check`` as for :func:`call_harness`.

    :raises AgentLinkError: what the method raises deliberately.
    """
    boundary = hooks.boundary
    bound_s = boundary.timeout_ms / 1000 or None if bound_s is not None and bound_s < 0 else bound_s
    return await boundary.acall(*_named(hooks, harness, method), make, bound_s=bound_s, default=default, check=check,
                                on_timeout=on_timeout, passing=(AgentLinkError,))
