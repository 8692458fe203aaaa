"""Every tool argument that names a file or directory refuses a NUL, which no path can hold
(the OS raises "embedded null byte"): the caller gets ``invalid_arguments``, never an
internal error. Walks the tools of every installed plugin."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError
from agent_link_core.tools.registry import validate_arguments

pytestmark = pytest.mark.installed_plugins

PATH_NAMES = re.compile(r"^(cwd|.*(Root|Path|Dir|Directory|File))$")


def path_arguments(app: App) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for name, spec in sorted(app.hooks.tools().items()):
        for prop, schema in (spec.input_schema.get("properties") or {}).items():
            if PATH_NAMES.match(prop) and takes_a_string(schema):
                yield name, prop, schema


def takes_a_string(schema: dict[str, Any]) -> bool:
    """A string itself is a valid value (not only inside a list: a policy's list of senders)."""
    kinds = schema.get("type")
    return "string" in (kinds if isinstance(kinds, list) else [kinds]) or any(takes_a_string(a) for a in schema.get("anyOf", []))


def test_every_path_argument_refuses_nul() -> None:
    app = App.create()
    try:
        found = list(path_arguments(app))
        assert found, "no tool takes a path: the walk would prove nothing"
        for tool, prop, schema in found:
            assert list(Draft202012Validator(schema).iter_errors("/tmp/a\x00b")), f"{tool}.{prop} takes a NUL"
            spec = app.hooks.tools()[tool]
            with pytest.raises(AgentLinkError) as caught:
                validate_arguments(spec, {prop: "/tmp/a\x00b"})
            errors = caught.value.details["errors"]
            assert any(e["path"] == prop and "NUL" in e["expected"] for e in errors), (tool, errors)
    finally:
        app.close()
