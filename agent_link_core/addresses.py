"""Address and id syntax (stdlib ``re`` only: the hook fast path imports this).

An address is ``<scheme>:<id>``: the scheme names a harness (registered by a plugin) or
``role``; with no harness plugin any well-formed address can still receive mail.
``external`` stands for a sender with no runtime identity, ``invalid`` for one that failed
validation (never delivered to, never verified). Message ids are ULIDs.
"""

import re

#: a harness name: its address scheme
HARNESS_RE = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
#: a dotted module path (a prompt hook's adapter)
MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
ADDRESS_RE = re.compile(r"^([a-z][a-z0-9-]{0,31}):([A-Za-z0-9_.-]{1,128})$")
ROLE_NAME_RE = re.compile(r"^[a-z0-9-]{1,40}$")
# 128 bits in 26 base-32 digits: the first digit carries only 3 of them, so it is 0-7
ULID_RE = re.compile(r"^[0-7][0-9A-HJKMNP-TV-Z]{25}$")
EXTERNAL = "external"
INVALID = "invalid"
ANTICIPATIONS = ("reply", "action", "fyi")
#: the longest argument naming an agent (an address, id, role or words of a title), in characters
MAX_TARGET_CHARS = 1000


def is_address(value: object) -> bool:
    """True for a well-formed ``<scheme>:<id>`` address (``role:<name>`` included)."""
    if not isinstance(value, str):
        return False
    m = ADDRESS_RE.fullmatch(value)
    if not m:
        return False
    return m.group(1) != "role" or bool(ROLE_NAME_RE.fullmatch(m.group(2)))


def is_ulid(value: object) -> bool:
    """True for a 26-character Crockford base-32 ULID in canonical upper case."""
    return isinstance(value, str) and bool(ULID_RE.fullmatch(value))


def address_scheme(address: str) -> str:
    """The scheme of an address (``"team"`` for ``team:abc``); ``external`` otherwise."""
    m = ADDRESS_RE.fullmatch(address)
    return m.group(1) if m else EXTERNAL
