"""The rest of agent-link works without the presence plugin: the core's plugin-facing suites and the search,
conversations and legacy plugins' suites pass in a subprocess where agent-link-presence looks uninstalled, with the
plugins that need it (the host kit, whose process facts include its pid check, the host plugins on the kit,
approvals, receipts, forks, leases, machines)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_link_testing.plugin_suites import ASSUME_ALL_INSTALLED, CORE_SUITES, loaded_plugins, run_suites, uninstalled_env

#: agent-link-presence and what depends on it, directly or through the host kit
HIDDEN = ("presence", "hostkit", "codex", "claude", "opencode", "approvals", "receipts", "forks", "leases", "machines")


@pytest.mark.nested_suites
@pytest.mark.timeout(900)  # a nested pytest run of several suites, serial
def test_suites_pass_with_presence_uninstalled(tmp_path: Path) -> None:
    env = uninstalled_env(tmp_path, ",".join(HIDDEN))
    loaded, hidden = loaded_plugins(env, "presence")
    assert not set(HIDDEN) & set(loaded) and "search" in loaded and hidden
    others = ("search", "conversations", "legacy")
    suites = (*[s for s in CORE_SUITES if not s.startswith("plugins/")], *[f"plugins/{p}/tests" for p in others])
    code, passed, tail = run_suites(env, suites, tmp_path / "nested", ASSUME_ALL_INSTALLED,
                                    ignore=tuple(f"plugins/{p}/tests/test_{p}_uninstalled.py" for p in others))
    assert code == 0, tail
    assert passed >= 80, tail
