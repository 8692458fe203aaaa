"""Fixtures for the codex plugin's tests (async tests run on anyio's pytest plugin, asyncio backend)."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    """Run ``@pytest.mark.anyio`` tests on asyncio (the app-server client is asyncio-based)."""
    return "asyncio"
