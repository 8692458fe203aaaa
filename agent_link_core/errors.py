"""The closed set of error codes and the exception that carries them.

Every failure a tool, the CLI or a plugin reports is an :class:`AgentLinkError` with one of
:data:`ERROR_CODES`; the MCP layer turns it into
``{"ok": false, "error": {"code", "message", "details"?, "hint"?}}`` with ``isError`` set.
The list and each code's ``details`` keys follow the original Agent Link contract
(docs/behaviour.md §3).
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # typing stays off the hook fast path
if TYPE_CHECKING:
    from typing import Any

ERROR_CODES: tuple[str, ...] = (
    "invalid_arguments",  # details: errors[{path, rule, expected}], removed?[{argument, replacement}]
    "unknown_tool",  # details: name
    "not_found",  # details: query | id, candidates
    "ambiguous",  # details: query, candidates
    "archived",  # details: address
    "wrong_recipient",  # details: messageId, expected, caller
    "already_resolved",  # details: messageId, status, resolvedAt
    "no_current_session",  # details: host, sources
    "body_too_large",  # details: limitBytes, actualBytes
    "permission_denied",  # details: reason
    "active_turn_conflict",  # details: status, activeTurnId
    "upstream_error",  # details: method, rpcCode, rpcMessage
    "unsupported",  # details: capability
    "state_io_error",  # details: path (relative to the state dir), errno
    "internal_error",  # details: cause (exception class name only)
)
# Besides the fixed codes, each harness has one "<harness>_unavailable" code (details:
# searched, and for endpoint-based hosts endpoint and reason): the host could not be reached.
HARNESS_UNAVAILABLE_RE = re.compile(r"^[a-z][a-z0-9-]{0,31}_unavailable$")


def is_error_code(code: str) -> bool:
    """True for a code of the closed list: a fixed code or ``<harness>_unavailable``."""
    return code in ERROR_CODES or bool(HARNESS_UNAVAILABLE_RE.match(code))


class AgentLinkError(Exception):
    """A failure with a code from :data:`ERROR_CODES`.

    :param code: one of :data:`ERROR_CODES` or ``<harness>_unavailable``; anything else
        raises ``ValueError``.
    :param message: one sentence saying what went wrong.
    :param details: JSON-serialisable facts for programs (keys per code, see the list).
    :param hint: what the caller can do about it, when there is something.
    """

    def __init__(
        self,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        hint: str | None = None,
    ) -> None:
        if not is_error_code(code):
            raise ValueError(f"unknown error code {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details or {}
        self.hint = hint

    def to_dict(self) -> dict[str, Any]:
        """The ``error`` object of a failed tool result."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            error["details"] = self.details
        if self.hint:
            error["hint"] = self.hint
        return error


def invalid_arguments(errors: list[dict[str, Any]], message: str | None = None, **extra: Any) -> AgentLinkError:
    """Build an ``invalid_arguments`` error from ``[{path, rule, expected}]`` entries."""
    # a value may break several rules (a schema's type and format): each field named once
    paths = ", ".join(dict.fromkeys(e["path"] or "(arguments)" for e in errors))
    expected = "; ".join(dict.fromkeys(f"{e['path'] or 'arguments'}: {e['expected']}" for e in errors))
    return AgentLinkError(
        "invalid_arguments",
        message or f"Invalid arguments: {paths}.",
        {"errors": errors, **extra},
        hint=f"Expected {expected}.",
    )
