"""JSON schema fragments and builders shared by every tool's input and output schemas (the
core's and the plugins'), so a type is spelt once."""

from __future__ import annotations

from typing import Any

from agent_link_core.addresses import ADDRESS_RE, HARNESS_RE, MAX_TARGET_CHARS, MESSAGE_ID_WORDS

ANY: dict[str, Any] = {}
STR: dict[str, Any] = {"type": "string"}
NSTR: dict[str, Any] = {"type": ["string", "null"]}
BOOL: dict[str, Any] = {"type": "boolean"}
OBJ: dict[str, Any] = {"type": "object"}
NOBJ: dict[str, Any] = {"type": ["object", "null"]}
INT: dict[str, Any] = {"type": "integer"}
# either case: a lower-case copy of an id finds the stored upper-case one
_ULID_OR_UUID = "^([0-7][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{25}|[0-9A-Fa-f]{8}-?[0-9A-Fa-f]{4}-?[0-9A-Fa-f]{4}-?[0-9A-Fa-f]{4}-?[0-9A-Fa-f]{12})$"
#: Every tool argument naming a stored message: a ULID or a UUID (with or without hyphens, the id a sender chose with
#: ``messageId``). Validation recognises the argument by this exact pattern and hands the tool the ULID a UUID is stored under.
ULID: dict[str, Any] = {"type": "string", "pattern": _ULID_OR_UUID.replace("(", "(?:", 1)}
#: A send's idempotency key (the CLI's ``send --message-id``): a ULID or a UUID, passed as given (kept in the fingerprint).
IDEMPOTENCY_KEY: dict[str, Any] = {"type": "string", "pattern": _ULID_OR_UUID}
NO_NUL = "^[^\\u0000]*$"
PATH: dict[str, Any] = {"type": "string", "minLength": 1, "pattern": NO_NUL}
PATHS: dict[str, Any] = {"anyOf": [PATH, {"type": "array", "items": PATH}]}
ADDRESS: dict[str, Any] = {"type": "string", "pattern": ADDRESS_RE.pattern}
#: an argument naming an agent: an address, a bare id, a role or words of a title (resolved); bounded so a runaway value
#: is refused instead of echoed back whole in a not_found answer
AGENT_QUERY: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": MAX_TARGET_CHARS}
HARNESS: dict[str, Any] = {"type": "string", "pattern": HARNESS_RE.pattern}
#: What an argument with one of these patterns must be, in words (errors say these, not the pattern); a pattern not here
#: is said by the argument's description.
PATTERN_WORDS: dict[str, str] = {
    ULID["pattern"]: MESSAGE_ID_WORDS,
    IDEMPOTENCY_KEY["pattern"]: MESSAGE_ID_WORDS,
    NO_NUL: "without NUL characters",
    ADDRESS["pattern"]: "an address <harness>:<id> such as team:alice",
    HARNESS["pattern"]: "a harness name (a lower-case letter, then up to 31 of a-z 0-9 -)",
}
#: The result of a resolve tool (resolve_agent and a harness's own): a verdict, not an error.
RESOLVE_RESULT: dict[str, Any] = {
    "status": {"type": "string", "enum": ["resolved", "ambiguous", "not_found"]}, "query": STR, "best": NOBJ,
    "candidates": {"type": "array", "items": OBJ}, "selection": OBJ, "providers": OBJ, "via": NSTR,
}
#: A session listing's page cursor argument (the ``nextCursor`` of an earlier answer).
CURSOR: dict[str, Any] = {"type": "string", "maxLength": 1000, "description": "The nextCursor of an earlier answer: the page after it."}
#: What a session listing page says about itself (list_agents and the harnesses' own lists).
LISTING_PAGE: dict[str, Any] = {
    "complete": {"type": "boolean", "description": "True only when this answer holds every session the sources hold for these filters."},
    "hasMore": BOOL, "nextCursor": NSTR, "filters": OBJ,
    "filteredOut": {"type": "object", "additionalProperties": INT, "description": "How many sessions each filter left out."},
}
#: How long a wait runs (``wait_for_agent``, ``waitForReply``: the waits plugin; the host plugins' sends with a wait).
TIMEOUT_MS: dict[str, Any] = {
    "type": "integer", "minimum": 0, "maximum": 600000, "default": 60000,
    "description": "How long to wait, in ms. A client that sends a progress token gets a progress notification every 10 s "
                   "and the wait runs up to timeoutMs; without one a call returns within 50 s (result capped: true; "
                   "call again to keep waiting)."}
POLL_MS: dict[str, Any] = {"type": "integer", "minimum": 250, "maximum": 10000, "default": 1000, "description": "Poll interval in ms."}


def closed_object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """A tool's input schema: an object of ``properties`` (name -> JSON schema), no others, the ``required`` names required."""
    return {"type": "object", "properties": properties, "additionalProperties": False, **({"required": list(required)} if required else {})}


def limit_arg(default: int, maximum: int, minimum: int = 1) -> dict[str, Any]:
    """A ``limit``-style integer argument in ``[minimum, maximum]``, ``default`` when omitted."""
    return {"type": "integer", "minimum": minimum, "maximum": maximum, "default": default}
