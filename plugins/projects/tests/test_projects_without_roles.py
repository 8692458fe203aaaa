"""This plugin's unit suite passes where the roles plugin is not
installed (entry point dropped, package unimportable, in every process it starts): role steps
then report that roles are unavailable."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_link_testing.plugin_suites import loaded_plugins, run_suites, uninstalled_env

HERE = "plugins/projects/tests"


@pytest.mark.nested_suites
@pytest.mark.timeout(900)  # a nested pytest run of this suite, serial
def test_suite_passes_with_roles_uninstalled(tmp_path: Path) -> None:
    env = uninstalled_env(tmp_path, "roles")
    loaded, hidden = loaded_plugins(env, "roles")
    assert "roles" not in loaded and "projects" in loaded and hidden
    code, passed, tail = run_suites(env, (HERE,), tmp_path / "nested", ignore=(f"{HERE}/test_projects_without_roles.py",))
    assert code == 0, tail
    assert passed >= 100, tail
    assert "skipped" in tail  # the two role-only tool tests say why they did not run
