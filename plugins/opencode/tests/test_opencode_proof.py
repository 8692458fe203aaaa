"""What the opencode harness accepts as naming a caller (``agent_link_opencode.proof``): the
argument agent-link's opencode plugin adds, well formed and naming a local server; a session
running that tool call; and no evidence for a process that no opencode started."""

from __future__ import annotations

from typing import Any

import pytest

from agent_link_opencode.proof import CALLER_ARGUMENT, claimed, evidence, running_call

NAMED = {"sessionID": "ses_abc", "callID": "toolu_1", "server": "http://127.0.0.1:4096/"}


def test_opencode_claimed_reads_the_plugins_argument() -> None:
    assert claimed({CALLER_ARGUMENT: NAMED}) == ("ses_abc", "toolu_1", "http://127.0.0.1:4096")


@pytest.mark.parametrize("value", [
    None, "ses_abc", {**NAMED, "sessionID": "../etc"}, {**NAMED, "callID": 5},
    {**NAMED, "server": "http://example.com:4096"}, {**NAMED, "server": "https://127.0.0.1:4096"},
    {**NAMED, "server": "http://127.0.0.1"},
])
def test_opencode_claimed_refuses_what_the_plugin_never_writes(value: Any) -> None:
    assert claimed({CALLER_ARGUMENT: value}) is None


def test_opencode_running_call_needs_that_call_pending_or_running() -> None:
    def part(call: str, status: str) -> list[dict[str, Any]]:
        return [{"info": {"role": "assistant"}, "parts": [{"type": "tool", "callID": call, "state": {"status": status}}]}]

    assert running_call(part("toolu_1", "running"), "toolu_1")
    assert running_call(part("toolu_1", "pending"), "toolu_1")
    assert not running_call(part("toolu_1", "completed"), "toolu_1")
    assert not running_call(part("toolu_2", "running"), "toolu_1")
    assert not running_call({"not": "a list"}, "toolu_1")


def test_opencode_no_evidence_for_a_process_that_no_opencode_started() -> None:
    # this test process descends from no opencode program listening on that port: nothing is
    # asked of the server and nothing is proved, whatever it would answer
    asked: list[str] = []
    assert evidence({CALLER_ARGUMENT: NAMED}, lambda url, path, pid: asked.append(path) or []) is None
    assert asked == []
