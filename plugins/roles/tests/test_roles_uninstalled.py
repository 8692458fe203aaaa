"""The rest of agent-link works without the roles plugin: the core's plugin-facing suites, the
codex unit tests and the receipts plugin's suite pass in a subprocess where agent-link-roles
looks uninstalled (entry point dropped, package unimportable, in every process it starts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_link_testing.plugin_suites import check_suites_without


@pytest.mark.nested_suites
@pytest.mark.timeout(900)  # a nested pytest run of several suites, serial
def test_suites_pass_with_roles_uninstalled(tmp_path: Path) -> None:
    check_suites_without("roles", "receipts", tmp_path)
