"""Records passed between the core and plugins around a message; apart from :mod:`agent_link_core.mailbox` so the hook
fast path imports no typing."""

from __future__ import annotations

from agent_link_core.lazy import Struct, field
from agent_link_core.model import Caller

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class Event(Struct):
    """A committed change, passed to ``agent_link_on_event``.

    :param kind: sent, delivered, released, resolved, reminded, status_changed, or a plugin's (launched, archived, forked, reconciled ...).
    :param message_id: the message concerned (None for harness events such as launched).
    :param at_ms: epoch ms.
    :param actor: the address that caused it (sender, resolver, ...).
    :param data: kind-specific fields (``via``, ``resolution``, ``status``, ``target`` ...).
    :param result: for the ``sent`` event of a send in progress, the send's result fields (``SendContext.result``), which
        an observer may complete; None otherwise.
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

    :param tool: the tool or command sending (``message_agent``, ``reply_agent_link_message``...).
    :param arguments: the validated tool arguments.
    :param via: the indirect address the target was reached through (``role:x``) or None.
    :param is_reply: True when the message answers another (resolutions are never blocked).
    :param meta: the tool call's MCP ``_meta`` (empty outside MCP).
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
    """What ``agent_link_render_envelope`` adds: ``via``/``procedure`` attributes, elements."""

    attributes: dict[str, str] = field(default_factory=dict)
    elements: list[str] = field(default_factory=list)


class PromptHook(Struct, frozen=True):
    """A harness's prompt-hook adapter, registered with ``agent_link_register_prompt_hooks``.

    :param harness: the harness name (the address scheme, ``[a-z][a-z0-9-]{0,31}``): the ``<harness>`` of
        ``agent-link hook <harness> <event>``.
    :param module: a dotted module path whose ``handle(event: str, payload: dict, ctx: HookContext) -> dict | None``
        computes the hook's output; the returned dict is printed as JSON, ``None`` prints nothing. It runs on every
        prompt: import only light standard modules (see :mod:`agent_link_core.hook`).
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
