"""The rest of agent-link works without the web plugin: the core's plugin-facing suites and
the receipts plugin's suite (whose panel the page shows) pass in a subprocess where
agent-link-web looks uninstalled."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_link_testing.plugin_suites import check_suites_without


@pytest.mark.nested_suites
@pytest.mark.timeout(900)  # a nested pytest run of several suites, serial
def test_suites_pass_with_web_uninstalled(tmp_path: Path) -> None:
    check_suites_without("web", "receipts", tmp_path)
