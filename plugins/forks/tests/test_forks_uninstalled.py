"""The rest of agent-link works without the forks plugin: the core's plugin-facing suites, the
codex override tests (whose refusal hint must then not name fork_codex_thread), and the
receipts and roles suites pass in a subprocess where agent-link-forks looks uninstalled
(entry point dropped, package unimportable, in every process it starts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_link_testing.plugin_suites import (
    ASSUME_ALL_INSTALLED,
    CORE_SUITES,
    loaded_plugins,
    run_suites,
    uninstalled_env,
)


@pytest.mark.nested_suites
@pytest.mark.timeout(900)  # a nested pytest run of several suites, serial
def test_suites_pass_with_forks_uninstalled(tmp_path: Path) -> None:
    env = uninstalled_env(tmp_path, "forks")
    loaded, hidden = loaded_plugins(env, "forks")
    assert "forks" not in loaded and {"codex", "receipts", "roles"} <= set(loaded) and hidden
    suites = (*CORE_SUITES, "tests/test_mcp_tools.py", "plugins/codex/tests/test_codex_overrides.py",
              "plugins/receipts/tests", "plugins/roles/tests")
    code, passed, tail = run_suites(env, suites, tmp_path / "nested", ASSUME_ALL_INSTALLED,
                                    ignore=("plugins/receipts/tests/test_receipts_uninstalled.py", "plugins/roles/tests/test_roles_uninstalled.py"))
    assert code == 0, tail
    assert passed >= 150, tail
