"""The opencode mail-note adapter (``agent-link hook opencode MessagesTransform``): silent
without mail and for bad input, the pending note (never a body, nothing marked), reminders
claimed once, and the real command through the core's hook fast path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from agent_link_core.config import load_config
from agent_link_core.hook import HookContext
from agent_link_core.mailbox import Mailbox, new_message_id
from agent_link_core.records import OutgoingMessage
from agent_link_core.model import Caller
from agent_link_core.store import Store, now_ms
from agent_link_opencode.hook import handle

SESSION = "ses_1f2e3d4c5b6aAbCdEfGhIjKlMn"
ADDRESS = f"opencode:{SESSION}"
PAYLOAD = {"session_id": SESSION}


def seed(senders: list[str], *, delivered_ago_ms: int | None = None) -> list[str]:
    config = load_config()
    box = Mailbox(Store(config.db_path), config)
    ids = []
    for sender in senders:
        row, _ = box.store_message(OutgoingMessage(new_message_id(), Caller(sender, "config", "test"), ADDRESS, ADDRESS, "SECRET BODY",
                                                   "reply", None, None))
        ids.append(row["id"])
        if delivered_ago_ms is not None:
            at = now_ms() - delivered_ago_ms
            with box.store.write() as conn:
                conn.execute("UPDATE messages SET sent_at = ?, delivered_at = ?, first_delivered_at = ? WHERE id = ?", (at, at, at, row["id"]))
    box.store.close()
    return ids


def run(payload: dict, event: str = "MessagesTransform") -> dict | None:
    return handle(event, payload, HookContext(load_config()))


def test_silent_without_mail_and_for_bad_input(isolated_env: Path) -> None:
    assert run(PAYLOAD) is None  # no database yet
    seed(["test:alice"])
    for bad in ({"session_id": ""}, {"session_id": "a:b"}, {"session_id": 7}, {}):
        assert run(bad) is None, bad
    assert run(PAYLOAD, "UserPromptSubmit") is None
    assert run({"session_id": "ses_other"}) is None  # the mail is for another session


def test_pending_note_never_a_body_and_marks_nothing(isolated_env: Path) -> None:
    seed(["test:a", "test:b"])
    out = run(PAYLOAD)
    assert out is not None and set(out) == {"note"}
    assert "2 peer messages are waiting" in out["note"] and "test:a" in out["note"] and "read_agent_link_inbox" in out["note"]
    assert "SECRET BODY" not in out["note"]
    assert run(PAYLOAD) == out  # repeats while unread: nothing was marked delivered


def test_due_reminders_are_claimed_once(isolated_env: Path) -> None:
    [mid] = seed(["test:alice"], delivered_ago_ms=60_000)
    out = run(PAYLOAD)
    assert out is not None and "reminder 1 of 3" in out["note"]
    assert run(PAYLOAD) is None
    rows = Store(load_config().db_path).conn.execute("SELECT n, via, to_addr FROM reminders WHERE message_id = ?", (mid,)).fetchall()
    assert [tuple(r) for r in rows] == [(1, "opencode-plugin", ADDRESS)]


def test_the_hook_command_prints_the_note(isolated_env: Path) -> None:
    seed(["test:alice"])
    done = subprocess.run([str(Path(sys.executable).with_name("agent-link")), "hook", "opencode", "MessagesTransform"],
                          input=json.dumps(PAYLOAD), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "1 peer message is waiting" in json.loads(done.stdout)["note"], done.stderr
