"""The rest of agent-link works without the waits plugin (no wait_for_agent, no ``agent-link wait``; ``waitForReply``
and ``send --wait`` refused): the core's plugin-facing suites and the search, conversations and loops plugins' suites pass in a
subprocess where agent-link-waits looks uninstalled, with the plugins that need it (the Codex and Claude plugins, and
forks on Codex)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_link_testing.plugin_suites import ASSUME_ALL_INSTALLED, CORE_SUITES, loaded_plugins, run_suites, uninstalled_env

#: agent-link-waits and what depends on it
HIDDEN = ("waits", "codex", "claude", "forks")


@pytest.mark.nested_suites
@pytest.mark.timeout(900)  # a nested pytest run of several suites, serial
def test_suites_pass_with_waits_uninstalled(tmp_path: Path) -> None:
    env = uninstalled_env(tmp_path, ",".join(HIDDEN))
    loaded, hidden = loaded_plugins(env, "waits")
    assert not set(HIDDEN) & set(loaded) and "search" in loaded and hidden
    others = ("search", "conversations", "loops")
    suites = (*[s for s in CORE_SUITES if not s.startswith("plugins/")], *[f"plugins/{p}/tests" for p in others])
    code, passed, tail = run_suites(env, suites, tmp_path / "nested", ASSUME_ALL_INSTALLED,
                                    ignore=tuple(f"plugins/{p}/tests/test_{p}_uninstalled.py" for p in others))
    assert code == 0, tail
    assert passed >= 80, tail
