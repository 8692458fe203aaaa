"""The address and id checks are string operations (the hook fast path imports no ``re``):
each must accept exactly what its published pattern (``addresses.PATTERNS``) matches."""

from __future__ import annotations

import random
import re

import pytest

from agent_link_core import addresses
from agent_link_core.hook import is_event_name

# every character class the patterns name, their edges, and what lies just outside them
ALPHABET = "az09AZ_-.:`{/@[" + "bmHJKLUVW7 \n\t" + "é٣ǅ\u00a0K"


def strings(seed: int, count: int = 4000) -> list[str]:
    """Strings around the patterns' edges: lengths 0-140 and 24-28, plus prefixed addresses."""
    rng = random.Random(seed)
    out = ["", "a", "role:", ":x", "a:", "a" * 32, "a" * 33, "A" * 26, "7" + "Z" * 25, "8" + "Z" * 25]
    for _ in range(count):
        length = rng.choice([rng.randint(0, 6), rng.randint(24, 28), rng.randint(30, 45), rng.randint(120, 140)])
        text = "".join(rng.choice(ALPHABET) for _ in range(length))
        out += [text, "role:" + text[:50], "team:" + text, text + "\n"]
    return out


def full(name: str, value: str) -> bool:
    return re.fullmatch(addresses.PATTERNS[name].strip("^$"), value) is not None


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_each_check_accepts_exactly_what_its_pattern_matches(seed: int) -> None:
    for value in strings(seed):
        assert addresses.is_harness_name(value) == full("HARNESS_RE", value), value
        assert addresses.is_module_path(value) == full("MODULE_RE", value), value
        assert addresses.is_role_name(value) == full("ROLE_NAME_RE", value), value
        assert addresses.is_ulid(value) == full("ULID_RE", value), value
        as_address = full("ADDRESS_RE", value)
        role_ok = not value.startswith("role:") or full("ROLE_NAME_RE", value[5:])
        assert addresses.is_address(value) == (as_address and role_ok), value
        assert addresses.address_scheme(value) == (value.split(":", 1)[0] if as_address else addresses.EXTERNAL), value
        assert is_event_name(value) == (re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]{0,63}", value) is not None), value


def test_non_strings_are_never_valid() -> None:
    for check in (addresses.is_harness_name, addresses.is_module_path, addresses.is_role_name, addresses.is_address, addresses.is_ulid):
        assert check(None) is False and check(42) is False and check(b"codex") is False


def test_the_patterns_stay_importable_compiled() -> None:
    from agent_link_core.addresses import ADDRESS_RE, ULID_RE

    assert ADDRESS_RE.fullmatch("team:alice") and ULID_RE.pattern == addresses.PATTERNS["ULID_RE"]
    with pytest.raises(AttributeError):
        addresses.NOT_A_PATTERN  # noqa: B018
