"""Schemas found valid are remembered (agent_link_core.tools.registry.check_schema): in the
process and in ``$XDG_CACHE_HOME/agent-link/valid-schemas/``, so the next process skips the
meta-schema check; an invalid schema, or one that is not plain JSON, is checked every time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from agent_link_core.tools import registry

VALID = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}, "additionalProperties": False}
INVALID = {"type": "object", "properties": {"n": {"type": "integer", "minimum": "one"}}}


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[Any]:
    """A fresh process's memory, a cache folder of its own; returns the meta-schema checks made."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(registry, "_VALID_SCHEMAS", set())
    monkeypatch.setattr(registry, "_READ_FILES", {})
    made: list[Any] = []
    check = Draft202012Validator.check_schema

    def counted(schema: Any) -> None:
        made.append(schema)
        check(schema)

    monkeypatch.setattr(Draft202012Validator, "check_schema", staticmethod(counted))
    return made


def new_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_VALID_SCHEMAS", set())
    monkeypatch.setattr(registry, "_READ_FILES", {})


def test_a_valid_schema_is_checked_once_then_read_from_the_cache(checks: list[Any], monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    registry.check_schema(VALID)
    registry.check_schema(dict(VALID))
    assert len(checks) == 1
    (cache,) = (tmp_path / "cache" / "agent-link" / "valid-schemas").iterdir()
    assert cache.read_text().split() == [registry._schema_key(VALID)]
    new_process(monkeypatch)
    registry.check_schema(VALID)
    assert len(checks) == 1  # the next process reads it from the file


def test_an_invalid_schema_is_refused_every_time_and_never_written(checks: list[Any], tmp_path: Path) -> None:
    for _ in range(2):
        with pytest.raises(SchemaError):
            registry.check_schema(INVALID)
    assert len(checks) == 2
    assert not (tmp_path / "cache" / "agent-link" / "valid-schemas").exists()


def test_only_the_exact_json_value_counts(checks: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    registry.check_schema({"enum": [1]})
    for other in ({"enum": [True]}, {"enum": [1.0]}, {"enum": ["1"]}):
        registry.check_schema(other)
    assert len(checks) == 4
    with pytest.raises(SchemaError):  # a tuple is no array to the meta-schema: never remembered as one
        registry.check_schema({"enum": (1,)})
    with pytest.raises(SchemaError):
        registry.check_schema({"enum": (1,)})
    assert len(checks) == 6


def test_an_unreadable_cache_only_costs_the_check(checks: list[Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "cache").write_text("a file where the cache folder would be")
    registry.check_schema(VALID)
    new_process(monkeypatch)
    registry.check_schema(VALID)
    assert len(checks) == 2


def test_a_full_cache_file_starts_over(checks: list[Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(registry, "MAX_REMEMBERED_SCHEMAS", 2)
    for n in range(3):
        registry.check_schema({"minimum": n})
    (cache,) = (tmp_path / "cache" / "agent-link" / "valid-schemas").iterdir()
    new_process(monkeypatch)
    registry.check_schema({"maximum": 1})  # the file holds 3 keys >= 2: it is rewritten with this one
    assert cache.read_text().split() == [registry._schema_key({"maximum": 1})]
