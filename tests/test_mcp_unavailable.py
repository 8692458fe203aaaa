"""``agent-link mcp`` with a bad setting still serves (so the host shows why): its log line
says so, and every tool call answers with the setting's error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_link_testing.mcp_client import agent_link_mcp

pytestmark = pytest.mark.anyio


def test_the_log_says_the_server_runs_and_its_tools_answer_the_error(isolated_env: Path) -> None:
    env = {**os.environ, "AGENT_LINK_DEBUG": "maybe"}
    out = subprocess.run([sys.executable, "-m", "agent_link_core", "mcp"], stdin=subprocess.DEVNULL, capture_output=True,
                         text=True, env=env, timeout=120, check=False)
    assert "cannot start" not in out.stderr
    assert "agent-link mcp is serving, but every tool call answers with this error until it is fixed and the server restarted: " \
           "The environment variable AGENT_LINK_DEBUG='maybe' is invalid" in out.stderr


async def test_every_tool_call_answers_the_settings_error(isolated_env: Any) -> None:
    async with agent_link_mcp({"AGENT_LINK_REMINDER_LIMIT": "99"}) as client:
        out = await client.call("list_agents", {})
        assert out["error"]["code"] == "invalid_arguments" and "AGENT_LINK_REMINDER_LIMIT='99'" in out["error"]["message"]
