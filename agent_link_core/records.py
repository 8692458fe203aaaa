"""Records passed between the core and plugins around a message; apart from :mod:`agent_link_core.mailbox` so the hook fast path imports no typing."""

from __future__ import annotations

from agent_link_core.lazy import Struct, field
from agent_link_core.model import Caller

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class Event(Struct):
    """A committed change, passed to ``agent_link_on_event``: ``kind`` (sent, delivered, released, resolved, reminded,
    status_changed, or a plugin's: launched, forked ...) of ``message_id`` (None for a harness event) at ``at_ms`` (epoch ms)
    by ``actor`` (an address); ``data``: kind-specific fields (``via``, ``status`` ...).

    :param result: for the ``sent`` event of a send in progress, its result fields (``SendContext.result``) an observer may complete.
    :param notes: what ``agent_link_record_event`` observers leave for their own ``agent_link_on_event`` (keyed by plugin).
    """

    kind: str
    message_id: str | None
    at_ms: int
    actor: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] | None = None
    notes: dict[str, Any] = field(default_factory=dict)


class OutgoingMessage(Struct):
    """A message about to be stored; ``agent_link_before_send`` may edit ``metadata``."""

    id: str
    sender: Caller
    to: str
    recipient: str
    body: str
    anticipation: str
    reply_by_ms: int | None
    reply_to: str | None
    metadata: dict[str, Any] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)


class SendContext(Struct):
    """What ``agent_link_before_send`` and ``agent_link_before_store`` may look at besides the message itself.

    :param tool: the tool or command sending (``message_agent`` ...) with its validated ``arguments``.
    :param via: the indirect address the target was reached through (``role:x``) or None.
    :param is_reply: True when the message answers another (resolutions are never blocked); ``meta``: the MCP call's ``_meta``.
    :param result: send-result fields a hook adds (only fields the tool declares are kept, e.g. ``roleProcedure``, ``receipt``).
    :param chosen_id: True when the caller chose the message's id (``messageId``): a send under it is idempotent, so a
        guard answers no other message's id for it.
    """

    tool: str
    arguments: dict[str, Any]
    via: str | None = None
    is_reply: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] = field(default_factory=dict)
    chosen_id: bool = False


class EnvelopeContribution(Struct):
    """What ``agent_link_render_envelopes`` adds to one message: ``via``/``procedure`` attributes, elements, ``author``."""

    attributes: dict[str, str] = field(default_factory=dict)
    elements: list[str] = field(default_factory=list)
    author: str | None = None


class PromptHook(Struct, frozen=True):
    """A harness's prompt-hook adapter, registered with ``agent_link_register_prompt_hooks``.

    :param harness: the harness name (the address scheme): the ``<harness>`` of ``agent-link hook <harness> <event>``.
    :param module: a dotted module path whose ``handle(event: str, payload: dict, ctx: HookContext) -> dict | None`` computes
        the hook's output (a dict printed as JSON, or None); it runs on every prompt: light standard modules only (:mod:`agent_link_core.hook`).
    """

    harness: str
    module: str

    @property
    def name(self) -> str:
        """The registration name: one adapter per harness."""
        return self.harness


def check_prompt_hook(record: Any) -> None:
    """Refuse a prompt-hook record that is not a :class:`~agent_link_core.records.PromptHook` with a harness name and a dotted module path."""
    from agent_link_core.addresses import is_harness_name, is_module_path
    from agent_link_core.errors import Refused

    if not isinstance(record, PromptHook):
        raise Refused(f"registered a {type(record).__name__}, not a PromptHook", "Register agent_link_core.records.PromptHook records.")
    if not is_harness_name(record.harness):
        raise Refused(f"registered a prompt hook for harness {record.harness!r}",
                      "The harness is a harness name: 1-32 of a-z 0-9 -, starting with a letter.")
    if not is_module_path(record.module):
        raise Refused(f"registered a prompt hook with module {record.module!r}", "The module is a dotted module path.")
