"""Fixtures shared by every test suite in the repository (core and plugins).

Every test runs with a temporary HOME and state dir and without inherited host or
agent-link variables, so no test can touch the real ~/.codex, ~/.claude or ~/.agent-link.
"""

import os
from pathlib import Path

import pytest

_HOST_PREFIXES = ("AGENT_LINK_", "CODEX_", "CLAUDE_", "ANTHROPIC_", "OPENAI_", "OPENCODE_")
# the test kit's choice of real host folder for the whole run (agent_link_testing.hosts)
_KEEP = ("AGENT_LINK_HOSTS_DIR",)
# Real hosts are whole programs whose timing under a loaded 2-core CI machine varies (a first
# model request built before an MCP server's tools were listed, a turn Codex itself ends
# "interrupted"); a real-host test that fails is run once more, shown as R in the summary.
# A fault that repeats still fails. A module may ask for more with its own flaky marker.
REALHOST_RERUNS = 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give every real-host test without its own ``flaky`` marker one rerun (pytest-rerunfailures)."""
    for item in items:
        if item.get_closest_marker("realhost") is not None and item.get_closest_marker("flaky") is None:
            item.add_marker(pytest.mark.flaky(reruns=REALHOST_RERUNS))


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point HOME and every state location into ``tmp_path``; returns the state dir."""
    for name in list(os.environ):
        if name.startswith(_HOST_PREFIXES) and name not in _KEEP:
            monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    state = home / ".agent-link"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("AGENT_LINK_STATE_DIR", str(state))
    monkeypatch.setenv("CODEX_HOME", str(home / ".codex"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / ".claude"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    # The loop guard (agent_link_core/loops.py) is off unless a test turns it on (as
    # tests/test_loop_guard.py does): tests exchange mail faster and more alike than agents do.
    monkeypatch.setenv("AGENT_LINK_PAIR_RATE", "0")
    monkeypatch.setenv("AGENT_LINK_REPEAT_WINDOW_MS", "0")
    return state


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
