"""The host kit is a library, not a plugin: its tests load no installed plugin
(``AGENT_LINK_LOAD_PLUGINS=""``), in this process and in every ``agent-link`` process they
start, so the MCP servers they start answer as the core alone (with the host kit) does."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def no_installed_plugin(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "")
