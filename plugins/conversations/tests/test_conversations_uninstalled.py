"""The rest of agent-link works without the conversations plugin (no get_agent_link_conversation,
no ``show --thread``; ``show`` of one message is the core's): the core's plugin-facing suites,
the codex unit tests and the search plugin's suite (whose results point at the tool) pass in a
subprocess where agent-link-conversations looks uninstalled (entry point dropped, package
unimportable, in every process it starts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_link_testing.plugin_suites import check_suites_without


@pytest.mark.nested_suites
@pytest.mark.timeout(900)  # a nested pytest run of several suites, serial
def test_suites_pass_with_conversations_uninstalled(tmp_path: Path) -> None:
    check_suites_without("conversations", "search", tmp_path)
