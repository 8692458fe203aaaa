"""Fixtures for the presence plugin's tests: an App of the repository's plugins on the test's state dir."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_link_core.app import App


@pytest.fixture
def app(isolated_env: Path) -> Iterator[App]:
    made = App.create()
    yield made
    made.close()
