"""The conversations plugin's tests load it alone (``AGENT_LINK_LOAD_PLUGINS=conversations``), in
this process and in every ``agent-link`` process they start, so other installed plugins never
change their result."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def only_this_plugin(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "conversations")
