"""Where a send came from: the origin block of a receipt.

Each field (``threadId``, ``turnId``, ``toolCallId``) is taken from the first source that has
it, in this order, and ``sources`` says which one that was:

1. ``caller_supplied``: the ``receipt`` argument (``originThreadId``, ``originTurnId``,
   ``originToolCallId``);
2. ``runtime_context``: the tool call's MCP ``_meta`` (keys below, at the top level or under
   the ``openai/codex``, ``codex`` and ``claudecode`` namespaces), then the caller identity the
   harness derived from the runtime (its session id, ``turn_id``, ``tool_call_id``);
3. ``env``: the server's environment (a caller identified from it, ``CODEX_THREAD_ID``,
   ``CODEX_TURN_ID``); never for the tool call id; off with ``AGENT_LINK_INFER_RECEIPT_ORIGIN=0``;
4. ``not_supplied``.

``source`` is the one source used by every supplied field, ``mixed`` when they differ, or
``not_supplied``. Ids are trimmed and cut to 160 characters, the note to 700.

``_meta`` keys, first match wins (docs/behaviour.md §2, plus the keys Codex 0.169 sends, §25):
thread ``callerThreadId``, ``caller.thread.id``, ``threadId``, ``thread_id``,
``codexThreadId``, ``thread.id``, ``originThreadId``; turn ``callerTurnId``,
``caller.turn.id``, ``turnId``, ``turn_id``, ``codexTurnId``, ``turn.id``, ``originTurnId``,
``x-codex-turn-metadata.turn_id``; tool call ``callerToolCallId``, ``caller.toolCall.id``,
``toolCallId``, ``tool_call_id``, ``toolUseId``, ``tool_use_id``, ``originToolCallId``,
``callId``. A dotted key is tried as one key, then as a path into nested objects.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent_link_hostkit.callmeta import meta_text
from agent_link_core.envelope import escape_text, sanitize_text
from agent_link_core.model import Caller

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_ID_CHARS = 160
MAX_NOTE_CHARS = 700
RUNTIME_SOURCES = ("runtime_context", "current_session")
META_NAMESPACES = ("openai/codex", "codex", "claudecode")
META_KEYS: dict[str, tuple[str, ...]] = {
    "threadId": ("callerThreadId", "caller.thread.id", "threadId", "thread_id", "codexThreadId", "thread.id", "originThreadId"),
    "turnId": ("callerTurnId", "caller.turn.id", "turnId", "turn_id", "codexTurnId", "turn.id", "originTurnId",
               "x-codex-turn-metadata.turn_id"),
    "toolCallId": ("callerToolCallId", "caller.toolCall.id", "toolCallId", "tool_call_id", "toolUseId", "tool_use_id",
                   "originToolCallId", "callId"),
}


def clip(value: object, limit: int) -> str | None:
    """``value`` as trimmed text of at most ``limit`` characters, escaped by the envelope's
    rules (a caller's words reach other agents' models through receipts); None when empty or
    not text."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    text = sanitize_text(str(value)).strip()[:limit]
    return escape_text(text) if text else None


def meta_context(meta: Mapping[str, Any]) -> dict[str, str | None]:
    """``{threadId, turnId, toolCallId}`` found in a tool call's ``_meta`` (None when absent)."""
    return {field: meta_text(meta, keys, META_NAMESPACES) for field, keys in META_KEYS.items()}


def compute_origin(
    supplied: Mapping[str, Any], caller: Caller, meta: Mapping[str, Any], env: Mapping[str, str], *, infer_from_env: bool
) -> dict[str, Any]:
    """The origin block for a send.

    :param supplied: the tool call's ``receipt`` argument (may be empty).
    :param caller: who sent it, as the core identified them.
    :param meta: the tool call's MCP ``_meta`` (empty outside MCP).
    :param env: the server process's environment.
    :param infer_from_env: whether step 3 applies.
    :returns: ``{threadId, turnId, toolCallId, note, source, sources{threadId, turnId,
        toolCallId}, address, addressSource}``.
    """
    session_id = caller.address.split(":", 1)[1] if caller.known else None
    from_runtime = caller.source in RUNTIME_SOURCES
    from_env = caller.source == "env"
    runtime = meta_context(meta)
    # A harness that identified the caller from its environment also took the turn id from
    # there: label it env (and only when env inference is on); a tool call id never comes from env.
    caller_turn = (caller.turn_id, "runtime_context") if from_runtime else (caller.turn_id if infer_from_env and from_env else None, "env")
    candidates: dict[str, list[tuple[object, str]]] = {
        "threadId": [
            (supplied.get("originThreadId"), "caller_supplied"),
            (runtime["threadId"], "runtime_context"),
            (session_id if from_runtime else None, "runtime_context"),
            (session_id if infer_from_env and caller.source == "env" else None, "env"),
            (env.get("CODEX_THREAD_ID") if infer_from_env else None, "env"),
        ],
        "turnId": [
            (supplied.get("originTurnId"), "caller_supplied"),
            (runtime["turnId"], "runtime_context"),
            caller_turn,
            (env.get("CODEX_TURN_ID") if infer_from_env else None, "env"),
        ],
        "toolCallId": [
            (supplied.get("originToolCallId"), "caller_supplied"),
            (runtime["toolCallId"], "runtime_context"),
            (caller.tool_call_id if from_runtime else None, "runtime_context"),
        ],
    }
    origin: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for field, options in candidates.items():
        origin[field], sources[field] = None, "not_supplied"
        for value, source in options:
            text = clip(value, MAX_ID_CHARS)
            if text is not None:
                origin[field], sources[field] = text, source
                break
    used = {s for s in sources.values() if s != "not_supplied"}
    origin["note"] = clip(supplied.get("note"), MAX_NOTE_CHARS)
    origin["source"] = used.pop() if len(used) == 1 else ("mixed" if used else "not_supplied")
    origin["sources"] = sources
    origin["address"] = caller.address
    origin["addressSource"] = caller.source
    return origin
