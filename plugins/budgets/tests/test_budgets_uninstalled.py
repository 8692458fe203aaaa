"""The rest of agent-link works without the budgets plugin (reads whole, pushes whole): the core's plugin-facing
suites, the codex unit tests and the waits plugin's suite pass in a subprocess where agent-link-budgets looks
uninstalled (entry point dropped, package unimportable, in every process it starts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_link_testing.plugin_suites import check_suites_without


@pytest.mark.nested_suites
@pytest.mark.timeout(900)  # a nested pytest run of several suites, serial
def test_suites_pass_with_budgets_uninstalled(tmp_path: Path) -> None:
    check_suites_without("budgets", "waits", tmp_path)
