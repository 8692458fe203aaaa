"""Fixtures for the waits plugin's tests: ``make_app``, Apps with only this plugin loaded."""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Callable, Iterator

import pytest

from agent_link_core.app import App
from agent_link_core.harness import Harness
from agent_link_testing.harnesses import HarnessPlugin

#: every installed plugin but this one, for ``AGENT_LINK_DISABLE_PLUGINS``
OTHER_PLUGINS = " ".join(sorted(ep.name for ep in importlib.metadata.entry_points(group="agent_link") if ep.name != "waits"))
MakeApp = Callable[..., App]


@pytest.fixture
def make_app() -> Iterator[MakeApp]:
    """``make_app(address, harness=None)``: an App at ``address`` with the waits plugin alone (and ``harness``, if
    given), closed when the test ends."""
    made: list[App] = []

    def make(address: str, harness: Harness | None = None) -> App:
        env = {**os.environ, "AGENT_LINK_DISABLE_PLUGINS": OTHER_PLUGINS, "AGENT_LINK_ADDRESS": address}
        made.append(App.create(env, (HarnessPlugin(harness),) if harness else ()))
        return made[-1]

    yield make
    for app in made:
        app.close()
