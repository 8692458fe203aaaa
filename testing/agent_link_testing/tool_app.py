"""The core's tools called in the test's process: an :class:`~agent_link_core.app.App` as one
address, a tool call without an MCP session, the messages stored.

For tests of what a tool does with its arguments; a test of the MCP wire uses
:mod:`agent_link_testing.mcp_client` instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from agent_link_core.app import App
from agent_link_core.tools.registry import output_schema, run_tool


@contextmanager
def app_as(monkeypatch: pytest.MonkeyPatch, address: str) -> Iterator[App]:
    """An App of the test's environment as ``address`` (``AGENT_LINK_ADDRESS``, set through
    ``monkeypatch`` so it lasts the test), closed when the ``with`` body ends."""
    monkeypatch.setenv("AGENT_LINK_ADDRESS", address)
    application = App.create()
    try:
        yield application
    finally:
        application.close()


async def call_tool(app: App, tool: str, /, **arguments: Any) -> dict[str, Any]:
    """Run ``tool`` (a name ``app`` serves) with ``arguments`` and return its result object
    (``{"ok": ...}``), checked against the tool's declared outputSchema as an MCP client
    checks it.

    :raises KeyError: for a tool ``app`` does not serve.
    :raises AssertionError: when the result breaks the outputSchema.
    """
    spec = app.hooks.tools()[tool]
    result = await run_tool(app, spec, arguments, {})
    problems = [e.message for e in Draft202012Validator(output_schema(spec)).iter_errors(result)]
    assert not problems, (tool, problems, result)
    return result


def stored_count(app: App) -> int:
    """How many messages ``app``'s database holds (every address's)."""
    return int(app.store.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0])
