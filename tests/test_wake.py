"""Wake-ups across processes (issue 25; agent_link_core/wake.py): a commit pokes every live waiter's FIFO, stale
FIFOs go, and nobody waiting costs nothing. That a wait really wakes on a commit in another process is the waits
plugin's test (plugins/waits/tests/test_wait_wakes.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from agent_link_core import wake


def test_stale_fifos_are_removed_and_other_files_left_alone(tmp_path: Path) -> None:
    db = tmp_path / "agent-link.db"
    folder = Path(wake.waiters_dir(db))
    with wake.Wakeup(db) as live:
        assert live.path is not None
        os.mkfifo(folder / "4242-dead.fifo")  # its waiter died without removing it
        (folder / "note.fifo").write_bytes(b"keep")  # not a FIFO: never written into
        assert wake.notify(db) == 1
        assert sorted(p.name for p in folder.iterdir()) == sorted([Path(live.path).name, "note.fifo"])
        assert (folder / "note.fifo").read_bytes() == b"keep"
        assert live.wait_blocking(0) is True  # the byte was waiting
        assert live.wait_blocking(0) is False  # and was drained
    assert sorted(p.name for p in folder.iterdir()) == ["note.fifo"]


def test_nobody_waiting_costs_no_folder(tmp_path: Path) -> None:
    db = tmp_path / "agent-link.db"
    assert wake.notify(db) == 0
    assert not Path(wake.waiters_dir(db)).exists()
