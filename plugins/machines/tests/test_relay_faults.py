"""A relay batch whose commit fails: nothing of it is kept, every engine message comes again,
and what observers do after a commit (the receipts plugin's JSONL log) happens once, for the
commit that kept it. In one process, without an engine: the relay applies fetched messages
(:meth:`agent_link_machines.relay.Relay.apply_batch`) as the inbound loop hands them over."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from agent_link_core.app import App
from agent_link_machines.common import mail_subject
from agent_link_machines.relay import Relay

MESSAGE_ID = "01M8TW0REMOTE0000000000000"


class FetchedMessage:
    """An engine message as the inbound loop fetched it: its data, subject, header, and what
    the relay answered (ack, nak, term)."""

    def __init__(self, record: dict[str, Any], publisher: str) -> None:
        self.data = json.dumps(record).encode()
        self.subject = mail_subject("beta", publisher)
        self.header = {"Nats-Msg-Id": f"{publisher}.{record['message']['id']}.tag"}
        self.answers: list[str] = []

    async def ack(self) -> None:
        self.answers.append("ack")

    async def nak(self, delay: float | None = None) -> None:
        self.answers.append("nak")

    async def term(self) -> None:
        self.answers.append("term")


class FailingCommit:
    """The store's connection, whose next ``COMMIT`` fails as a full disk would."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self.failures = 1

    def execute(self, sql: str, *args: Any) -> Any:
        if sql == "COMMIT" and self.failures:
            self.failures -= 1
            raise sqlite3.OperationalError("disk I/O error (injected at the commit)")
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def message_record() -> dict[str, Any]:
    return {"type": "message", "message": {
        "id": MESSAGE_ID, "from": "team:alice", "source": "config", "verified": True, "to": "team:bob", "recipient": "team:bob",
        "body": "once, whatever the commit does", "anticipation": "fyi", "replyBy": None, "replyTo": None, "metadata": {},
        "origin": "alpha"}}


def test_a_batch_whose_commit_fails_is_applied_and_logged_once_when_it_comes_again(tmp_path: Path) -> None:
    home = tmp_path / "home"
    log_path = tmp_path / "receipts.jsonl"
    base = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_LINK_")}
    env = {**base, "HOME": str(home), "AGENT_LINK_STATE_DIR": str(home / ".agent-link"), "AGENT_LINK_LOAD_PLUGINS": "presence waits machines receipts",
           "AGENT_LINK_MACHINE": "beta", "AGENT_LINK_MACHINES_AUTOSTART": "off", "AGENT_LINK_ENGINE_URL": "nats://127.0.0.1:4222",
           "AGENT_LINK_RECEIPT_LOG": str(log_path)}
    app = App.create(env=env)
    try:
        relay = Relay(app)
        store = app.store
        real = store.conn
        first = FetchedMessage(message_record(), "alpha")
        store.conn = FailingCommit(real)  # type: ignore[assignment]
        try:
            asyncio.run(relay.apply_batch([first], mail_subject("beta", "*")))
        finally:
            store.conn = real
        assert first.answers == ["nak"]  # not kept: the engine delivers it again
        assert real.execute("SELECT COUNT(*) FROM messages WHERE id = ?", (MESSAGE_ID,)).fetchone()[0] == 0
        assert not log_path.exists() or MESSAGE_ID not in log_path.read_text(encoding="utf-8")
        again = FetchedMessage(message_record(), "alpha")
        asyncio.run(relay.apply_batch([again], mail_subject("beta", "*")))
        assert again.answers == ["ack"]
        assert real.execute("SELECT COUNT(*) FROM messages WHERE id = ?", (MESSAGE_ID,)).fetchone()[0] == 1
        logged = [json.loads(line) for line in log_path.read_text(encoding="utf-8").splitlines()]
        mine = [(r.get("action"), r.get("kind")) for r in logged if r.get("message_id", r.get("messageId")) == MESSAGE_ID]
        assert mine == [("message_agent", None)], logged
        stored = real.execute("SELECT action FROM receipts WHERE message_id = ?", (MESSAGE_ID,)).fetchall()
        assert [r[0] for r in stored] == ["message_agent"]
    finally:
        asyncio.run(app.aclose())
