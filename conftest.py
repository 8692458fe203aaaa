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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_link_testing.dists import repo_plugin_names

_HOST_PREFIXES = ("AGENT_LINK_", "CODEX_", "CLAUDE_", "ANTHROPIC_", "OPENAI_", "OPENCODE_")
# the test kit's choice of real host folder for the whole run (agent_link_testing.hosts)
_KEEP = ("AGENT_LINK_HOSTS_DIR",)


#: the plugins this repository ships, the only ones its plugin suites load
REPO_PLUGINS = repo_plugin_names()


def _frozen(value: Any) -> Any:
    """A hashable, type-exact copy of a JSON value (dicts, lists, strings, numbers, booleans,
    None); None for anything else (a tuple, a set, an object), which is never remembered."""
    if isinstance(value, dict):
        items = [(k, _frozen(v)) for k, v in value.items()]
        return None if any(not isinstance(k, str) or v is None for k, v in items) else ("d", frozenset(items))
    if isinstance(value, list):
        items = [_frozen(v) for v in value]
        return None if any(v is None for v in items) else ("l", tuple(items))
    if value is None or isinstance(value, (str, int, float, bool)):
        return (type(value).__name__, value)
    return None


@pytest.fixture(autouse=True, scope="session")
def remembered_valid_schemas() -> Iterator[None]:
    """Check each JSON schema against the draft 2020-12 meta-schema once per test process.

    Every App that lists its tools checks every tool's schemas (agent_link_core.boundary
    check_tool), some 90 schemas at a few ms of CPU each; a test process builds hundreds of
    Apps from the same plugins. A schema found valid is remembered by its exact JSON value;
    an invalid one, or one holding anything but plain JSON types, is checked every time, so
    what a test sees is what the check says. Processes a test starts check as usual.
    """
    from jsonschema import Draft202012Validator

    check = Draft202012Validator.check_schema
    valid: set[Any] = set()

    def check_schema(schema: Any, *args: Any, **kwargs: Any) -> None:
        key = _frozen(schema) if not args and not kwargs else None
        if key is not None and key in valid:
            return
        check(schema, *args, **kwargs)
        if key is not None:
            valid.add(key)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Draft202012Validator, "check_schema", staticmethod(check_schema))
        yield


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point HOME and every state location into ``tmp_path`` and load only the repository's
    plugins (``AGENT_LINK_LOAD_PLUGINS``); returns the state dir."""
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
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", " ".join(REPO_PLUGINS))
    # The loop guard (agent_link_core/loops.py) is off unless a test turns it on (as
    # tests/test_loop_guard.py does): tests exchange mail faster and more alike than agents do.
    monkeypatch.setenv("AGENT_LINK_PAIR_RATE", "0")
    monkeypatch.setenv("AGENT_LINK_REPEAT_WINDOW_MS", "0")
    return state


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
