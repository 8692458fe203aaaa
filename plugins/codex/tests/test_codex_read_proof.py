"""Reading a thread's mail needs Codex's proof, as signing ``fromVerified="true"`` does
(issue 29: the read rule of :func:`agent_link_core.identity.prove_reader`).

``CODEX_THREAD_ID`` set by hand to a real thread's id names that thread but proves nothing: a
command outside the thread that reads as it (``inbox``, ``wait``, ``status``, ``show``,
``search``, ``watch``, ``receipts``) is refused with one line and exit 1, and the mail stays
unread. The same command run under a Codex process that holds the thread's transcript (a
process of a program named ``codex`` stands in for it, :mod:`agent_link_testing.host_program`)
reads it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_link_testing.host_program import HostProgram
from agent_link_testing.output import said

pytestmark = pytest.mark.timeout(120)
REAL = "01a22a93-0000-7000-8000-000000000002"
BASE = {"AGENT_LINK_CODEX_AUTOSTART": "0", "AGENT_LINK_DISABLE_PLUGINS": "claude roles"}
CLI = [sys.executable, "-m", "agent_link_core"]


def env_of(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("AGENT_LINK_ADDRESS", "AGENT_LINK_INSPECT_ALL", "CODEX_THREAD_ID")}
    return {**env, **BASE, **extra}


def cli(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], env=env_of(**extra), capture_output=True, text=True, timeout=60)


def test_a_thread_id_set_by_hand_reads_nothing_the_proved_thread_reads(
        isolated_env: Path, make_rollout: Callable[..., Path], tmp_path: Path) -> None:
    rollout = make_rollout(isolated_env.parent / ".codex", REAL, cwd="/work/alpha", messages=[("user", "hello", None)])
    sent = cli("send", f"codex:{REAL}", "the deploy key is in vault 7", "--json", AGENT_LINK_ADDRESS="test:bob")
    assert sent.returncode == 0, sent.stderr
    mid = json.loads(sent.stdout)["messageId"]

    reads = [["inbox", "--json"], ["inbox", "--peek"], ["inbox", "--as", f"codex:{REAL}"],
             ["wait", mid, "--timeout-ms", "0", "--json"], ["status", mid], ["show", mid, "--json"], ["search", "vault"],
             ["watch", "--ndjson"], ["receipts", "--json"]]
    for args in reads:
        done = cli(*args, CODEX_THREAD_ID=REAL)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert done.stdout == "" and "vault" not in done.stderr, args
        lines = said(done.stderr)
        assert len(lines) == 1 and lines[0].startswith("agent-link:") and f"codex:{REAL}" in lines[0], (args, done.stderr)
        assert "did not prove that this process belongs to that session" in lines[0], (args, lines)

    # send --wait shows the answer, which goes to the thread: refused before anything is stored
    waited = cli("send", "test:bob", "answer me", "--wait", "--timeout-ms", "0", "--json", CODEX_THREAD_ID=REAL)
    assert waited.returncode == 1 and waited.stdout == "" and len(said(waited.stderr)) == 1, waited
    everyone = cli("search", "answer", "--json", AGENT_LINK_INSPECT_ALL="1")
    assert everyone.returncode == 0 and json.loads(everyone.stdout)["results"] == [], everyone.stderr

    with HostProgram(tmp_path / "bin", "codex") as codex:
        refused = codex.run([*CLI, "inbox", "--json"], env_of(CODEX_THREAD_ID=REAL))  # a Codex process without the thread
        assert refused["rc"] == 1 and len(said(refused["stderr"])) == 1, refused
        codex.hold(rollout)
        inside = codex.run([*CLI, "inbox", "--json"], env_of(CODEX_THREAD_ID=REAL))
        assert inside["rc"] == 0, inside["stderr"]
        read = json.loads(inside["stdout"])
        assert [m["id"] for m in read["messages"]] == [mid] and read["markedDelivered"] == [mid]
        shown = codex.run([*CLI, "show", mid], env_of(CODEX_THREAD_ID=REAL))
        assert shown["rc"] == 0 and "vault 7" in shown["stdout"], shown["stderr"]

    # nothing the refused reads did marked the message: its sender still sees it undelivered
    # until the proved read (which marked it)
    status = cli("status", mid, "--json", AGENT_LINK_ADDRESS="test:bob")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["delivery"] == "delivered"


def test_refused_reads_mark_nothing(isolated_env: Path, make_rollout: Callable[..., Path]) -> None:
    make_rollout(isolated_env.parent / ".codex", REAL, cwd="/work/alpha", messages=[("user", "hello", None)])
    sent = cli("send", f"codex:{REAL}", "for the thread only", "--json", AGENT_LINK_ADDRESS="test:bob")
    assert sent.returncode == 0, sent.stderr
    mid = json.loads(sent.stdout)["messageId"]
    assert cli("inbox", CODEX_THREAD_ID=REAL).returncode == 1
    status = cli("status", mid, "--json", AGENT_LINK_ADDRESS="test:bob")
    assert json.loads(status.stdout)["delivery"] != "delivered"
    # the machine's user may read every mailbox
    everyone = cli("inbox", "--as", f"codex:{REAL}", "--peek", "--json", AGENT_LINK_INSPECT_ALL="1")
    assert everyone.returncode == 0 and [m["id"] for m in json.loads(everyone.stdout)["messages"]] == [mid], everyone.stderr
