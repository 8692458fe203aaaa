"""Fixtures for the forks plugin's tests (async tests run on anyio's asyncio backend)."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    """The app-server client is asyncio-based."""
    return "asyncio"
