"""Receipts in a state dir agent-link cannot write: the repair that
reads run on the way is not tried (no warning per read; health says why nothing is written)."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_link_core.app import App
from agent_link_core.model import Caller
from agent_link_receipts.recording import repair
from tests.test_bad_configuration import unwritable
from tests.test_read_only_state import NoSpace


def test_a_read_only_app_tries_no_receipt_repair(make_app: Callable[..., App], isolated_env: Path,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    writer = make_app()
    asyncio.run(writer.send(caller=Caller("test:alice", "config", "test"), to="test:bob", body="leave a receipt"))
    # an event whose receipt is still missing: the repair would write it
    writer.store.conn.execute("UPDATE receipts_repair SET last_seq = 0 WHERE id = 1")
    writer.close()
    with unwritable(isolated_env):
        reader = App.create(read_only_ok=True)
        try:
            assert reader.read_only is not None
            with caplog.at_level(logging.WARNING):
                assert repair(reader) == 0
            assert "not repaired" not in caplog.text
        finally:
            reader.close()


def test_a_full_disk_tries_no_receipt_repair(make_app: Callable[..., App], monkeypatch: pytest.MonkeyPatch,
                                            caplog: pytest.LogCaptureFixture) -> None:
    """The disk filled after the database opened (health says so): the repair is not tried, and says nothing."""
    app = make_app()
    asyncio.run(app.send(caller=Caller("test:alice", "config", "test"), to="test:bob", body="leave a receipt"))
    app.store.conn.execute("UPDATE receipts_repair SET last_seq = 0 WHERE id = 1")
    app.store.conn.execute("DELETE FROM receipts")  # as a process without plugins leaves them: missing
    monkeypatch.setattr(os, "statvfs", lambda path: NoSpace())
    with caplog.at_level(logging.WARNING):
        assert repair(app) == 0
    assert "not repaired" not in caplog.text
    assert app.store.conn.execute("SELECT COUNT(*) FROM receipts").fetchone()[0] == 0
    monkeypatch.undo()
    assert repair(app) > 0  # with room again, the missing receipt is written
