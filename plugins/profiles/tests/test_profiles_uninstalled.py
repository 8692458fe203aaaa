"""The rest of agent-link works without the profiles plugin (every server then lists every
tool): the core's plugin-facing suites, the codex unit tests and the approvals plugin's suite
(which asks what a host's server lists) pass in a subprocess where agent-link-profiles looks
uninstalled (entry point dropped, package unimportable, in every process it starts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_link_testing.plugin_suites import check_suites_without


@pytest.mark.nested_suites
@pytest.mark.timeout(900)  # a nested pytest run of several suites, serial
def test_suites_pass_with_profiles_uninstalled(tmp_path: Path) -> None:
    check_suites_without("profiles", "approvals", tmp_path)
