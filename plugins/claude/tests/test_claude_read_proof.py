"""Reading a Claude session's mail needs Claude Code's proof, as signing
``fromVerified="true"`` does (issue 29: :func:`agent_link_core.identity.prove_reader`).

``CLAUDE_CODE_SESSION_ID`` set by hand to a real session's id names that session but proves
nothing: ``agent-link inbox`` outside the session is refused with one line and exit 1, and the
mail stays unread. Run under a Claude Code process whose live-session record names the session
(a process of a program named ``claude`` stands in for it,
:mod:`agent_link_testing.host_program`), it reads the mail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_link_testing.host_program import HostProgram
from agent_link_testing.output import said

pytestmark = pytest.mark.timeout(120)
A = "44444444-4444-4444-8444-444444444444"
CLI = [sys.executable, "-m", "agent_link_core"]


def env_of(**extra: str) -> dict[str, str]:
    skip = ("AGENT_LINK_ADDRESS", "AGENT_LINK_INSPECT_ALL", "CLAUDE_CODE_SESSION_ID", "CLAUDE_SESSION_ID", "CODEX_THREAD_ID")
    return {**{k: v for k, v in os.environ.items() if k not in skip}, "AGENT_LINK_DISABLE_PLUGINS": "codex roles", **extra}


def cli(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], env=env_of(**extra), capture_output=True, text=True, timeout=60)


def test_a_session_id_set_by_hand_reads_nothing_the_proved_session_reads(fake_claude, tmp_path: Path) -> None:
    fake_claude.write_transcript(A, "/work/alpha", prompt="hello")
    sent = cli("send", f"claude:{A}", "the deploy key is in vault 7", "--json", AGENT_LINK_ADDRESS="test:bob")
    assert sent.returncode == 0, sent.stderr
    mid = json.loads(sent.stdout)["messageId"]

    for variable in ("CLAUDE_CODE_SESSION_ID", "CLAUDE_SESSION_ID"):
        forged = cli("inbox", "--json", **{variable: A})
        assert forged.returncode == 1 and forged.stdout == "", forged
        lines = said(forged.stderr)
        assert len(lines) == 1 and f"claude:{A}" in lines[0] and "did not prove" in lines[0], forged.stderr
        assert cli("show", mid, CLAUDE_CODE_SESSION_ID=A).returncode == 1
    assert json.loads(cli("status", mid, "--json", AGENT_LINK_ADDRESS="test:bob").stdout)["delivery"] != "delivered"

    with HostProgram(tmp_path / "bin", "claude") as claude:
        fake_claude.write_live(claude.pid, A)
        inside = claude.run([*CLI, "inbox", "--json"], env_of(CLAUDE_CODE_SESSION_ID=A))
        assert inside["rc"] == 0, inside["stderr"]
        read = json.loads(inside["stdout"])
        assert [m["id"] for m in read["messages"]] == [mid] and read["markedDelivered"] == [mid]
