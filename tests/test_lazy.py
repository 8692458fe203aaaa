"""agent_link_core.lazy: Struct behaves as the dataclasses it replaced (construction,
defaults, equality, hash, repr, replace, frozen or not), and the CLI send path stays free of
dataclasses."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from agent_link_core.harness import Delivery
from agent_link_core.lazy import Struct, field
from agent_link_core.model import Caller


class Plain(Struct):
    name: str
    items: list[str] = field(default_factory=list)
    count: int = 1


class Frozen(Struct, frozen=True):
    name: str
    extra: dict[str, Any] = field(default_factory=dict)


def test_construction_by_position_and_keyword_with_defaults() -> None:
    assert Plain("a") == Plain(name="a", items=[], count=1)
    assert Plain("a", ["x"], 3) == Plain(count=3, items=["x"], name="a")
    assert Plain("a").items is not Plain("a").items  # a factory builds a new default each time
    assert repr(Plain("a")) == "Plain(name='a', items=[], count=1)"
    assert Plain("a") != Plain("b")
    assert Plain("a") != Frozen("a")


@pytest.mark.parametrize(("args", "kwargs", "message"), [
    ((), {}, "Plain is missing field 'name'"),
    (("a", [], 1, 2), {}, "Plain takes 3 fields, 4 given"),
    (("a",), {"colour": 1}, "Plain has no field 'colour'"),
    (("a",), {"name": "b"}, "Plain has no field 'name' (or it was given twice)"),
])
def test_bad_construction_is_a_type_error(args: tuple[Any, ...], kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(TypeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Plain(*args, **kwargs)


def test_plain_is_assignable_and_unhashable() -> None:
    record = Plain("a")
    record.count = 2
    record.items.append("x")
    assert record == Plain("a", ["x"], 2)
    with pytest.raises(TypeError):
        hash(record)


def test_frozen_is_hashable_refuses_assignment_and_replaces() -> None:
    record = Frozen("a")
    assert len({Caller("codex:a"), Caller("codex:a"), Caller("codex:b")}) == 2
    with pytest.raises(TypeError):
        hash(record)  # a dict field, as in a frozen dataclass
    with pytest.raises(AttributeError, match="cannot assign to field 'name' of a frozen Frozen"):
        record.name = "b"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del record.name  # type: ignore[misc]
    assert record.replace(name="b") == Frozen("b")
    with pytest.raises(TypeError, match="no field 'colour'"):
        record.replace(colour=1)


def test_core_records_keep_their_defaults() -> None:
    assert Caller() == Caller("external", "fallback")
    assert Caller(address="codex:x").replace(proven=True).proven is True
    delivery = Delivery()
    delivery.delivered = True
    assert (delivery.state, delivery.warnings, delivery.delivered) == ("queued", [], True)


def test_send_command_imports_no_dataclasses() -> None:
    code = ("import sys; import agent_link_core.commands.send, agent_link_core.sending, agent_link_core.directory, "
            "agent_link_core.records, agent_link_core.harness; print('dataclasses' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
