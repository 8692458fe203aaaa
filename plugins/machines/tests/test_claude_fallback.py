"""A message to a Claude Code session on another machine whose push is not possible there (no
running session, so no inbox socket) lands in its mailbox on that machine: the session's
prompt hook there announces it, its inbox holds it with the sending machine named, and its
reply travels back to the sender's wait. No real ``claude`` here: alpha's Claude harness lists
the session from a transcript file, as it lists a finished ``claude -p`` run."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_link_machines.testkit import Machine, until

pytestmark = [pytest.mark.machines, pytest.mark.timeout(240)]


def write_transcript(config_dir: Path, session_id: str, cwd: str = "/home/user/proj") -> None:
    """A transcript like a finished ``claude -p`` run (plugins/claude/tests/conftest.py's shape)."""
    path = config_dir / "projects" / cwd.replace("/", "-") / f"{session_id}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    ts = "2026-01-02T03:04:05.678Z"
    lines = [
        {"type": "user", "sessionId": session_id, "cwd": cwd, "timestamp": ts, "entrypoint": "sdk-cli", "uuid": "u1",
         "message": {"role": "user", "content": [{"type": "text", "text": "fix the parser"}]}},
        {"type": "assistant", "sessionId": session_id, "timestamp": ts, "message": {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def test_mail_to_a_claude_session_on_another_machine_without_a_push_lands_in_its_inbox_there(
    machines: Callable[..., Machine],
) -> None:
    alpha, beta = machines("alpha"), machines("beta")
    claude_dir = alpha.root / "home" / ".claude"
    session_id = str(uuid.uuid4())
    write_transcript(claude_dir, session_id)
    target = f"claude:{session_id}"
    # alpha has the Claude plugin (it lists the session); beta has no Claude plugin at all
    alpha.env.update(AGENT_LINK_LOAD_PLUGINS="presence waits claude machines listings", CLAUDE_CONFIG_DIR=str(claude_dir))
    beta.env["AGENT_LINK_LOAD_PLUGINS"] = "presence waits machines listings"
    for m in (alpha, beta):
        m.start_relay()
    for m in (alpha, beta):
        m.wait_connected()
    beta.cli("inbox", address="team:bob")

    def listed() -> bool:
        out = beta.json("sessions", "--harness", "machines")
        return any(s["address"] == target and s["machine"] == "alpha" for s in out["sessions"])

    until(listed, 30, "beta to list the Claude session of alpha")
    sent = json.loads(beta.cli("send", target, "please look at the parser", "--anticipation", "reply", "--json",
                               address="team:bob").stdout)
    message_id = sent["messageId"]

    def arrived() -> bool:
        conn = sqlite3.connect(alpha.state / "agent-link.db")
        try:
            return conn.execute("SELECT 1 FROM messages WHERE id = ?", (message_id,)).fetchone() is not None
        finally:
            conn.close()

    until(arrived, 30, "the message on alpha")
    # no running session there, so nothing was pushed: the message waits in its mailbox
    status = alpha.json("status", message_id, address=target)
    assert (status["delivery"], status["deliveredAt"], status["fromVerified"]) == ("queued", None, False), status
    # the session's next prompt there announces it (the Claude plugin's hook), without the body
    hooked = alpha.cli("hook", "claude", "UserPromptSubmit", stdin=json.dumps({"session_id": session_id, "hook_event_name": "UserPromptSubmit", "prompt": "go on"}))
    note = json.loads(hooked.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "1 peer message is waiting from team:bob" in note and "please look at the parser" not in note, note
    # its inbox there holds it, from bob as beta attested, the envelope naming beta
    inbox = alpha.json("inbox", address=target)
    got = next(m for m in inbox["messages"] if m["id"] == message_id)
    assert got["from"] == "team:bob" and '<machine from="beta" />' in inbox["renderedBlock"]
    alpha.cli("reply", message_id, "the parser is fixed", address=target)
    waited = beta.json("wait", message_id, "--timeout-ms", "30000", address="team:bob")
    assert waited["outcome"] == "reply" and waited["reply"]["from"] == target, waited
    # the inbox read on alpha counted as the delivery, and beta learnt it
    assert message_id in inbox["markedDelivered"]

    def delivered_via() -> str | None:
        conn = sqlite3.connect(beta.state / "agent-link.db")
        try:
            return str(conn.execute("SELECT delivered_via FROM messages WHERE id = ?", (message_id,)).fetchone()[0] or "") or None
        finally:
            conn.close()

    assert until(delivered_via, 30, "alpha's delivery report on beta") == "machine:alpha"
