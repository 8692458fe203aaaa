"""The core's tests are hermetic: they load only the plugins a test names (``extra_plugins``),
never what happens to be installed, unless marked ``installed_plugins`` (all of them) or
``installed_plugins("waits", ...)`` (only those installed plugins, by entry-point name)."""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each core test that loads no installed plugin (every one not marked
    ``installed_plugins``: :func:`only_named_plugins`) ``no_installed_plugins``: such a test cannot
    see whether a plugin is installed, so the nested runs with one plugin uninstalled
    (:mod:`agent_link_testing.plugin_suites`) leave it out."""
    for item in items:
        if _HERE in item.path.parents and item.get_closest_marker("installed_plugins") is None:
            item.add_marker(pytest.mark.no_installed_plugins)


@pytest.fixture(autouse=True)
def only_named_plugins(request: pytest.FixtureRequest, isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``AGENT_LINK_LOAD_PLUGINS=""`` (no installed plugin loads), in this process and in every
    ``agent-link`` process a test starts; a test marked ``installed_plugins`` loads everything
    installed (the variable unset), one marked ``installed_plugins("a", "b")`` only the installed
    plugins named ``a`` and ``b`` (the variable ``"a b"``)."""
    marker = request.node.get_closest_marker("installed_plugins")
    if marker is None:
        monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "")
    elif marker.args:
        monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", " ".join(marker.args))
    else:
        monkeypatch.delenv("AGENT_LINK_LOAD_PLUGINS", raising=False)
