"""Atomic replacement: same mode, a backup with the old bytes, symlinks kept, no write when the
file changed under us, nothing left behind on failure."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from agent_link_approvals import files
from agent_link_approvals.files import (
    ChangedWhileApplying,
    replace_atomically,
    unified_diff,
)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """An empty folder (tmp_path also holds the test's HOME)."""
    path = tmp_path / "cfg"
    path.mkdir()
    return path


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_replace_keeps_mode_and_backs_up(folder: Path) -> None:
    path = folder / "config.toml"
    path.write_bytes(b"old\n")
    path.chmod(0o640)
    backup = replace_atomically(path, b"old\nnew\n", b"old\n")
    assert path.read_bytes() == b"old\nnew\n" and mode(path) == 0o640
    assert backup is not None and backup.read_bytes() == b"old\n" and mode(backup) == 0o640
    assert backup.name.startswith("config.toml.agent-link-") and backup.suffix == ".bak"
    assert sorted(p.name for p in folder.iterdir()) == sorted(["config.toml", backup.name])  # no temp file left


def test_new_file_is_private_and_has_no_backup(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    assert replace_atomically(path, b"{}\n", None) is None
    assert path.read_bytes() == b"{}\n" and mode(path) == 0o600


def test_symlinked_config_is_replaced_at_its_target(tmp_path: Path) -> None:
    target = tmp_path / "dotfiles" / "config.toml"
    target.parent.mkdir()
    target.write_bytes(b"a = 1\n")
    link = tmp_path / "config.toml"
    link.symlink_to(target)
    replace_atomically(link, b"a = 1\nb = 2\n", b"a = 1\n")
    assert link.is_symlink() and target.read_bytes() == b"a = 1\nb = 2\n"


def test_a_file_changed_since_reading_is_not_written(folder: Path) -> None:
    path = folder / "config.toml"
    path.write_bytes(b"changed by Codex\n")
    with pytest.raises(ChangedWhileApplying):
        replace_atomically(path, b"ours\n", b"what we read\n")
    assert path.read_bytes() == b"changed by Codex\n" and len(list(folder.iterdir())) == 1
    with pytest.raises(ChangedWhileApplying):
        replace_atomically(path, b"ours\n", None)  # appeared since


@pytest.mark.parametrize("exchange", [True, False], ids=["exchange", "rename"])
def test_a_failed_swap_leaves_the_original_and_no_temp_file(folder: Path, monkeypatch: pytest.MonkeyPatch,
                                                             exchange: bool) -> None:
    path = folder / "config.toml"
    path.write_bytes(b"old\n")

    def full_disk(*args: object) -> bool:
        raise OSError(28, "No space left on device")

    if exchange:
        monkeypatch.setattr(files, "_exchange", full_disk)
    else:
        monkeypatch.setattr(files, "_exchange", lambda a, b: False)
        monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OSError):
        replace_atomically(path, b"new\n", b"old\n")
    assert path.read_bytes() == b"old\n"
    assert [p.name for p in folder.iterdir()] == ["config.toml"]  # no temporary file, no backup


def test_diff_shows_the_added_lines(tmp_path: Path) -> None:
    diff = unified_diff(tmp_path / "c.toml", "a = 1\n", "a = 1\n\n[b]\nc = 2\n")
    assert "+[b]" in diff and "+c = 2" in diff and "-a = 1" not in diff
