"""The budgets plugin's own rules: its setting, whose budget a caller gets, and the notice a push too large for its host
is replaced by."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_link_budgets import fit
from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError
from agent_link_core.harness import Harness, OutputBudget
from agent_link_core.model import Caller
from agent_link_testing.harnesses import HarnessPlugin


class Shown(Harness):
    """A host declaring how much it shows."""

    name = "shown"
    output_budget = OutputBudget(tool_result_bytes=9_000, json_indent=2, push_bytes=3_000)


def test_a_bad_read_bytes_is_refused_naming_it(isolated_env: Path) -> None:
    with pytest.raises(AgentLinkError) as info:
        App.create({**os.environ, "AGENT_LINK_READ_BYTES": "5"})
    assert info.value.code == "invalid_arguments"
    assert "AGENT_LINK_READ_BYTES='5' is invalid: expected a whole number from 2000 to 4000000." in info.value.message


def test_a_caller_gets_its_hosts_budget_else_read_bytes_of_compact_json(isolated_env: Path) -> None:
    app = App.create({**os.environ, "AGENT_LINK_READ_BYTES": "12345"}, (HarnessPlugin(Shown()),))
    try:
        assert fit.caller_budget(app, Caller("shown:one", "runtime_context", "shown")) == Shown.output_budget
        assert fit.caller_budget(app, Caller("team:me", "explicit")) == OutputBudget(tool_result_bytes=12_345)
    finally:
        app.close()


def test_the_notice_names_the_message_its_sender_and_how_to_read_it() -> None:
    notice = fit.oversized_notice({"id": "01J00000000000000000000001", "from_addr": "team:<ann>"}, 70_000)
    assert notice.startswith('<agent-link-notice id="01J00000000000000000000001" from="team:&lt;ann&gt;">')
    assert "too large (70000 bytes)" in notice and "read_agent_link_inbox" in notice and "(messageId 01J00000000000000000000001)" in notice
