"""Wake-ups across processes, the writer's side (issue 25; agent_link_core/wake.py): a commit pokes every live waiter's
FIFO, stale FIFOs go, and nobody waiting costs nothing. The waiter's side and that a wait really wakes on a commit in
another process are the waits plugin's tests (plugins/waits/tests/test_wakeup.py, test_wait_wakes.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from agent_link_core import wake


def test_stale_fifos_are_removed_and_other_files_left_alone(tmp_path: Path) -> None:
    db = tmp_path / "agent-link.db"
    folder = Path(wake.waiters_dir(db))
    folder.mkdir()
    os.mkfifo(folder / "live.fifo")
    live = os.open(folder / "live.fifo", os.O_RDWR | os.O_NONBLOCK)  # a waiter holding its FIFO open
    try:
        os.mkfifo(folder / "4242-dead.fifo")  # its waiter died without removing it
        (folder / "note.fifo").write_bytes(b"keep")  # not a FIFO: never written into
        assert wake.notify(db) == 1
        assert sorted(p.name for p in folder.iterdir()) == ["live.fifo", "note.fifo"]
        assert (folder / "note.fifo").read_bytes() == b"keep"
        assert os.read(live, 16) == b"\0"
    finally:
        os.close(live)


def test_nobody_waiting_costs_no_folder(tmp_path: Path) -> None:
    db = tmp_path / "agent-link.db"
    assert wake.notify(db) == 0
    assert not Path(wake.waiters_dir(db)).exists()
