"""The settings file in a test's HOME and the ``agent-link`` command that reads it, for the
core's tests of the file (tests/test_settings_file.py) and the settings plugin's tests of
``agent-link config`` (plugins/settings/tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from agent_link_core.settings_file import settings_path

#: the ``agent-link`` console script of the interpreter running the tests (the venv's)
AGENT_LINK = str(Path(sys.executable).with_name("agent-link"))


def settings_file(monkeypatch: Any) -> Path:
    """The settings file agent-link reads in this test's HOME, its folder made, the file not
    written; ``AGENT_LINK_STATE_DIR`` is unset (``monkeypatch``), so the file's ``state_dir`` counts."""
    monkeypatch.delenv("AGENT_LINK_STATE_DIR")
    path = Path(settings_path())
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``agent-link <args>`` in a subprocess (``env``: default this process's), output captured
    as text; at most 120 s (:class:`subprocess.TimeoutExpired` past that)."""
    return subprocess.run([AGENT_LINK, *args], check=False, capture_output=True, text=True, timeout=120, env=env or dict(os.environ))
