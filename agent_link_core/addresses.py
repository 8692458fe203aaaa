"""Address (``<scheme>:<id>``, docs/behaviour.md §2) and message id (ULID) syntax, checked by string operations: the hook
fast path runs them on every prompt, and importing :mod:`re` costs half an interpreter start. The patterns (``HARNESS_RE``
...) are compiled on first access; ``tests/test_addresses.py`` checks each function against them.
"""

TYPE_CHECKING = False  # keep typing out of the fast path
if TYPE_CHECKING:
    from re import Pattern

    HARNESS_RE: Pattern[str]
    MODULE_RE: Pattern[str]
    ADDRESS_RE: Pattern[str]
    ROLE_NAME_RE: Pattern[str]
    ULID_RE: Pattern[str]

_LOWER = "abcdefghijklmnopqrstuvwxyz"
_DIGITS = "0123456789"
_IDENT = _LOWER + _LOWER.upper() + _DIGITS + "_"
_HARNESS_CHARS = _LOWER + _DIGITS + "-"
_ID_CHARS = _IDENT + ".-"
_ULID_CHARS = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

#: the patterns the functions below check, as regular expressions (JSON schemas use them)
PATTERNS = {
    "HARNESS_RE": r"^[a-z][a-z0-9-]{0,31}$",
    "MODULE_RE": r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$",
    "ADDRESS_RE": r"^([a-z][a-z0-9-]{0,31}):([A-Za-z0-9_.-]{1,128})$",
    "ROLE_NAME_RE": r"^[a-z0-9-]{1,40}$",
    # 128 bits in 26 base-32 digits: the first digit carries only 3 of them, so it is 0-7
    "ULID_RE": r"^[0-7][0-9A-HJKMNP-TV-Z]{25}$",
}
EXTERNAL = "external"
INVALID = "invalid"
ANTICIPATIONS = ("reply", "action", "fyi")
#: the longest argument naming an agent (an address, id, role or words of a title), in characters
MAX_TARGET_CHARS = 1000


def __getattr__(name: str) -> object:
    """``HARNESS_RE`` and the other :data:`PATTERNS`, compiled on first access."""
    if name not in PATTERNS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import re

    compiled = globals()[name] = re.compile(PATTERNS[name])
    return compiled


def _only(value: str, chars: str) -> bool:
    """True when every character of ``value`` is one of ``chars`` (an empty value too)."""
    return not value.strip(chars)


def is_harness_name(value: object) -> bool:
    """True for a harness name (an address scheme): ``[a-z][a-z0-9-]{0,31}``."""
    return isinstance(value, str) and 0 < len(value) <= 32 and value[0] in _LOWER and _only(value, _HARNESS_CHARS)


def is_module_path(value: object) -> bool:
    """True for a dotted module path of ASCII identifiers (a prompt hook's adapter)."""
    return isinstance(value, str) and all(part and part[0] not in _DIGITS and _only(part, _IDENT) for part in value.split("."))


def is_role_name(value: object) -> bool:
    """True for a role's name: ``[a-z0-9-]{1,40}``."""
    return isinstance(value, str) and 0 < len(value) <= 40 and _only(value, _HARNESS_CHARS)


def _scheme(value: str) -> str | None:
    """The scheme of ``value`` when it is ``<harness name>:<id>`` (a role's name unchecked)."""
    scheme, colon, rest = value.partition(":")
    return scheme if colon and is_harness_name(scheme) and 0 < len(rest) <= 128 and _only(rest, _ID_CHARS) else None


def is_address(value: object) -> bool:
    """True for a well-formed ``<scheme>:<id>`` address (``role:<name>`` included)."""
    if not isinstance(value, str):
        return False
    scheme = _scheme(value)
    return scheme is not None and (scheme != "role" or is_role_name(value[5:]))


#: what a message id argument must be, in words (a UUID finds the message stored under its ULID)
MESSAGE_ID_WORDS = "a message id (a 26-character ULID, or a UUID)"


def is_ulid(value: object) -> bool:
    """True for a 26-character Crockford base-32 ULID in canonical upper case."""
    return isinstance(value, str) and len(value) == 26 and value[0] in "01234567" and _only(value, _ULID_CHARS)


def address_scheme(address: str) -> str:
    """The scheme of an address (``"team"`` for ``team:abc``); ``external`` otherwise."""
    return _scheme(address) or EXTERNAL
