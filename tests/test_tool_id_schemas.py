"""Every tool argument that holds a message id, an address or a harness name uses the core's
one schema for it (agent_link_core.tools.schemas), whichever plugin declares the tool. A
``messageId`` of a send tool is the sender's idempotency key (``schemas.IDEMPOTENCY_KEY``: a
ULID or a UUID); every other names a stored message (``schemas.ULID``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_link_core.addresses import ULID_RE
from agent_link_core.app import App
from agent_link_core.tools import schemas

ULID_ARGUMENT = re.compile(r"^(messageId|.+MessageId)$")


def test_the_ulid_schema_is_the_ulid_regex_in_either_case() -> None:
    pattern = re.compile(schemas.ULID["pattern"])
    for value in ("01J0000000000000000000000A", "7ZZZZZZZZZZZZZZZZZZZZZZZZZ", "01j0000000000000000000000a"):
        assert pattern.fullmatch(value) and ULID_RE.fullmatch(value.upper())
    for value in ("8ZZZZZZZZZZZZZZZZZZZZZZZZZ", "01J000000000000000000000I0", "01J000000000000000000000U0", "01J00000"):
        assert not pattern.fullmatch(value) and not ULID_RE.fullmatch(value.upper())


def _properties(schema: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """``(dotted path, schema)`` of every named property, nested ones and array items included."""
    if not isinstance(schema, dict):
        return
    for name, sub in (schema.get("properties") or {}).items():
        yield f"{path}{name}", sub
        yield from _properties(sub, f"{path}{name}.")
    if isinstance(schema.get("items"), dict):
        yield from _properties(schema["items"], path)


@pytest.mark.installed_plugins
def test_every_plugin_tool_takes_message_ids_by_the_core_schema(isolated_env: Path) -> None:
    app = App.create()
    tools, owners = app.hooks.tools(), app.hooks.tool_owners()
    assert {"receipts", "codex", "projects"} <= set(owners.values())  # the installed plugins loaded
    checked, wrong = 0, []
    for name, spec in tools.items():
        for path, prop in _properties(spec.input_schema):
            leaf = path.rsplit(".", 1)[-1]
            kind = prop.get("items", prop) if prop.get("type") == "array" else prop
            if ULID_ARGUMENT.match(leaf):
                checked += 1
                if kind.get("pattern") not in (schemas.ULID["pattern"], schemas.IDEMPOTENCY_KEY["pattern"]):
                    wrong.append(f"{owners[name]} {name}.{path}: {kind.get('pattern')!r}")
    assert checked >= 5 and not wrong, wrong
