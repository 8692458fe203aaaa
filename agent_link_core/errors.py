"""The closed set of error codes (docs/behaviour.md §3) and :class:`AgentLinkError`, which
carries one: the failure every tool, the CLI and a plugin reports, an MCP result's ``error``.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing stays off the hook fast path
if TYPE_CHECKING:
    from typing import Any

# What a caller can do about each code (its ``details`` keys in the comment), for an error raised without a hint of
# its own: every failed tool result carries one (README "Every tool returns one JSON object").
DEFAULT_HINTS: dict[str, str] = {
    "invalid_arguments":  # details: errors[{path, rule, expected}], removed?[{argument, replacement}]
        "Fix the arguments named in details.errors and call again.",
    "unknown_tool": "Call tools/list for the tools this server offers (the AGENT_LINK_TOOLS setting may leave some out).",  # details: name
    "not_found": "Check the id or address; list_agents shows the sessions agent-link knows.",  # details: query | id, candidates
    "ambiguous": "Pick one of details.candidates and use its full address.",  # details: query, candidates
    "archived": "Unarchive the session in its host first, or message another one.",  # details: address
    "wrong_recipient": "Only the message's recipient can do this; check the messageId.",  # details: messageId, expected, caller
    "already_resolved": "Nothing more to do: the message is resolved (details.status says how).",  # details: messageId, status, resolvedAt
    "no_current_session": "Call from inside a host session, or set AGENT_LINK_ADDRESS to give this process an address.",  # details: host, sources
    "body_too_large": "Send at most 64 KiB of UTF-8: split the text, or send a file path instead.",  # details: limitBytes, actualBytes
    "permission_denied": "details.reason names the rule that refused it; whoever set the rule can change it.",  # details: reason
    "active_turn_conflict": "Wait for the running work to finish (wait_for_agent), then send again.",  # details: status, activeTurnId
    "lease_conflict":  # details: conflicts[{holder, paths, exclusive, reason, expiresAt, ...}]
        "Others hold some of these paths (details.conflicts): message them to ask, or claim other paths.",
    "upstream_error":  # details: method, rpcCode, rpcMessage
        "The host answered with an error: agent_link_health shows whether it is reachable; try again.",
    "unsupported": "This host or release cannot do it; agent_link_health shows what it offers.",  # details: capability
    "state_io_error":  # details: path (relative to the state dir), errno, reason?
        "Check that agent-link's state dir (agent_link_health: stateDir) exists, is yours and has space.",
    "state_busy":  # details: path, retryable (true), retryAfterMs: a lock timeout, retry
        "Another agent-link process holds the database's write lock: retry in a moment; the database is fine.",
    "internal_error":  # details: cause (exception class name only)
        "A fault in agent-link or a plugin: agent_link_health lists plugin problems; please report it.",
}
ERROR_CODES: tuple[str, ...] = tuple(DEFAULT_HINTS)
# Besides the fixed codes, each harness has one "<harness>_unavailable" code (details:
# searched, and for endpoint-based hosts endpoint and reason): the host could not be reached.
UNAVAILABLE_SUFFIX = "_unavailable"
UNAVAILABLE_HINT = "agent_link_health shows why this harness cannot be reached and what it searched."


def is_error_code(code: str) -> bool:
    """True for a code of the closed list: a fixed code or ``<harness>_unavailable``."""
    from agent_link_core.addresses import is_harness_name

    return code in ERROR_CODES or (code.endswith(UNAVAILABLE_SUFFIX) and is_harness_name(code[: -len(UNAVAILABLE_SUFFIX)]))


class AgentLinkError(Exception):
    """A failure with a code from :data:`ERROR_CODES`.

    :param code: one of :data:`ERROR_CODES` or ``<harness>_unavailable``; anything else
        raises ``ValueError``.
    :param message: one sentence saying what went wrong.
    :param details: JSON-serialisable facts for programs (keys per code, see the list).
    :param hint: what the caller can do about it, when there is something.
    """

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None, hint: str | None = None) -> None:
        if not is_error_code(code):
            raise ValueError(f"unknown error code {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details or {}
        self.hint = hint

    def to_dict(self) -> dict[str, Any]:
        """The ``error`` object of a failed tool result, ``{code, message, details?, hint}``; the
        hint defaults to the code's (:data:`DEFAULT_HINTS`, :data:`UNAVAILABLE_HINT`)."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            error["details"] = self.details
        error["hint"] = self.hint or DEFAULT_HINTS.get(self.code, UNAVAILABLE_HINT)
        return error


def invalid_arguments(errors: list[dict[str, Any]], message: str | None = None, **extra: Any) -> AgentLinkError:
    """Build an ``invalid_arguments`` error from ``[{path, rule, expected}]`` entries."""
    # a value may break several rules (a schema's type and format): each field named once
    paths = ", ".join(dict.fromkeys(e["path"] or "(arguments)" for e in errors))
    expected = "; ".join(dict.fromkeys(f"{e['path'] or 'arguments'}: {e['expected']}" for e in errors))
    return AgentLinkError("invalid_arguments", message or f"Invalid arguments: {paths}.", {"errors": errors, **extra},
                          hint=f"Expected {expected}.")


class Refused(Exception):
    """A plugin's contribution the core refuses (raised by a ``register`` callback once the refusal is
    recorded, so a plugin that swallows it is still left out)."""

    def __init__(self, message: str, fix: str = "") -> None:
        super().__init__(message)
        self.fix = fix
