"""Fixtures shared by every test suite in the repository (core and plugins).

Every test runs with a temporary HOME and state dir and without inherited host or
agent-link variables, so no test can touch the real ~/.codex, ~/.claude or ~/.agent-link.

Which agent-link plugins load is pinned too: the plugins' and examples' suites load the
repository's own plugins (:data:`REPO_PLUGINS`, in this process and, through the environment,
in every ``agent-link`` process a test starts), never another plugin that happens to be
installed in the same environment; the core's suite loads none unless a test names them
(tests/conftest.py). A test that is about what is installed says so with its own setting.

Tests run in parallel workers (pytest-xdist, ``make test``): everything a test writes goes under
its ``tmp_path``, servers listen on ports the system picks, and nothing here is shared state.
"""

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_link_testing.dists import repo_plugin_names
from agent_link_testing.schema_cache import share_valid_schemas

_HOST_PREFIXES = ("AGENT_LINK_", "CODEX_", "CLAUDE_", "ANTHROPIC_", "OPENAI_", "OPENCODE_")
# the test kit's choice of real host folder for the whole run (agent_link_testing.hosts)
_KEEP = ("AGENT_LINK_HOSTS_DIR",)


#: the plugins this repository ships, the only ones its plugin suites load
REPO_PLUGINS = repo_plugin_names()
#: ``AGENT_LINK_OPENCODE_SERVERS`` for every test: an empty list (a bare comma: an empty value
#: would mean the default)
NO_OPENCODE_SERVERS = ","
#: test files whose time is mostly waiting (pip resolving against the package index: 1.5-4 min
#: of wall time, 16 CPU-seconds), run first so the other tests fill the cores meanwhile
_LONG_POLES = ("test_wheel_install.py",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the :data:`_LONG_POLES` first: xdist's workers take the items in this order, so one
    worker waits on them while the rest of the suite runs on the others (last, they would be
    the whole run's tail). Every worker collects the same order, as xdist requires."""
    items.sort(key=lambda item: item.path.name not in _LONG_POLES)


@pytest.fixture(scope="session")
def valid_schemas_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder per test process where every ``agent-link`` process a test starts remembers
    the JSON schemas it found valid (agent_link_core.tools.registry.check_schema): some 90
    schemas, about half a second of CPU per process, checked once per test process instead."""
    return tmp_path_factory.getbasetemp() / "valid-schemas"


@pytest.fixture(autouse=True)
def sigint_restored() -> Iterator[None]:
    """A command run in this process ends ignoring Ctrl-C (agent_link_core.cli_run.ignore_ctrl_c): the next test gets the handler back."""
    handler = signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGINT, handler)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, valid_schemas_dir: Path) -> Path:
    """Point HOME and every state location into ``tmp_path`` (the valid schemas' cache shared:
    :func:`valid_schemas_dir`) and load only the repository's plugins (``AGENT_LINK_LOAD_PLUGINS``);
    returns the state dir."""
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
    share_valid_schemas(home / ".cache", valid_schemas_dir)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", " ".join(REPO_PLUGINS))
    # The loops plugin's rate and repeat rules are off unless a test turns them on (as
    # plugins/loops/tests/test_loops.py does): tests exchange mail faster and more alike than agents do.
    monkeypatch.setenv("AGENT_LINK_PAIR_RATE", "0")
    monkeypatch.setenv("AGENT_LINK_REPEAT_WINDOW_MS", "0")
    # No opencode server by default: the plugin's default, 127.0.0.1:4096, is where a person's
    # own opencode (or another worker's) may listen, whose sessions would enter every listing.
    # Tests of opencode name their servers; tests of that default unset this.
    monkeypatch.setenv("AGENT_LINK_OPENCODE_SERVERS", NO_OPENCODE_SERVERS)
    return state


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
