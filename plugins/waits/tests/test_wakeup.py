"""A waiter's FIFO (plugins/waits/agent_link_waits/wakeup.py): a commit's poke reaches the live one, stale FIFOs go,
other files are left alone, and closing removes it."""

from __future__ import annotations

import os
from pathlib import Path

from agent_link_core import wake
from agent_link_waits.wakeup import Wakeup


def test_stale_fifos_are_removed_and_other_files_left_alone(tmp_path: Path) -> None:
    db = tmp_path / "agent-link.db"
    folder = Path(wake.waiters_dir(db))
    with Wakeup(db) as live:
        assert live.path is not None
        os.mkfifo(folder / "4242-dead.fifo")  # its waiter died without removing it
        (folder / "note.fifo").write_bytes(b"keep")  # not a FIFO: never written into
        assert wake.notify(db) == 1
        assert sorted(p.name for p in folder.iterdir()) == sorted([Path(live.path).name, "note.fifo"])
        assert (folder / "note.fifo").read_bytes() == b"keep"
        assert live.wait_blocking(0) is True  # the byte was waiting
        assert live.wait_blocking(0) is False  # and was drained
    assert sorted(p.name for p in folder.iterdir()) == ["note.fifo"]
