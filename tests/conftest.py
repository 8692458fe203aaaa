"""The core's tests are hermetic: they load only the plugins a test names (``extra_plugins``),
never what happens to be installed, unless marked ``installed_plugins``."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def only_named_plugins(request: pytest.FixtureRequest, isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``AGENT_LINK_LOAD_PLUGINS=""`` (no installed plugin loads), in this process and in every
    ``agent-link`` process a test starts; a test marked ``installed_plugins`` loads everything
    installed (the variable unset)."""
    if request.node.get_closest_marker("installed_plugins") is None:
        monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "")
    else:
        monkeypatch.delenv("AGENT_LINK_LOAD_PLUGINS", raising=False)
