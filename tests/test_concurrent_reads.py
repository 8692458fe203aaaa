"""Reads of one address at once (docs/delivery-states.md, "Two reads of one address at once"): a message may be shown
to each, it is marked delivered once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agent_link_core.app import App


def test_parallel_cli_reads_mark_a_message_once(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "AGENT_LINK_STATE_DIR": str(tmp_path / "state"), "AGENT_LINK_LOAD_PLUGINS": ""}
    sent = subprocess.run([sys.executable, "-m", "agent_link_core", "send", "--json", "team:alice", "hello"],
                          env={**env, "AGENT_LINK_ADDRESS": "team:bob"}, capture_output=True, text=True, timeout=120)
    assert sent.returncode == 0, sent.stderr
    readers = [subprocess.Popen([sys.executable, "-m", "agent_link_core", "inbox", "--json"], env={**env, "AGENT_LINK_ADDRESS": "team:alice"},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    shown = [json.loads(r.communicate(timeout=120)[0])["messages"] for r in readers]
    assert all(r.returncode == 0 for r in readers)
    assert 1 <= sum(len(m) for m in shown) <= 4  # shown at least once, maybe to several readers
    app = App.create({**env, "AGENT_LINK_ADDRESS": "team:alice"})
    try:
        events = app.store.conn.execute("SELECT COUNT(*) FROM message_events WHERE kind = 'delivered'").fetchone()[0]
        assert events == 1  # marked once
    finally:
        app.close()
