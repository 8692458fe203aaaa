"""The record of the state dirs agent-link processes use (agent_link_settings.state_dirs), written when an App
opens (``agent_link_app_opened``), and health's warning about the others, with ``--forget-state-dirs``."""

from __future__ import annotations

import json
import os
from pathlib import Path

from agent_link_core.app import App
from agent_link_settings import state_dirs
from agent_link_testing.settings_file import cli


def test_other_state_dirs_used_lately(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    a, b, old, gone = (str(tmp_path / name) for name in ("a", "b", "old", "gone"))
    for folder in (a, b, old):
        os.mkdir(folder)
    day = state_dirs.STATE_DIR_RECENT_MS
    state_dirs.record_state_dir(a, env, now_ms=10 * day)
    state_dirs.record_state_dir(b, env, now_ms=10 * day + 5)
    state_dirs.record_state_dir(old, env, now_ms=day)
    state_dirs.record_state_dir(gone, env, now_ms=10 * day + 6)  # a temporary server's folder, since removed
    assert state_dirs.other_state_dirs(a, env, now_ms=10 * day + 10) == [{"path": b, "lastUsedMs": 10 * day + 5}]
    assert state_dirs.other_state_dirs(b, env, now_ms=12 * day) == []
    state_dirs.record_state_dir(a, env, now_ms=10 * day + state_dirs.RECORD_EVERY_MS - 1)  # noted a minute ago: not written
    assert state_dirs._state_dirs(env)[1][a] == 10 * day


def test_opening_an_app_records_its_state_dir_and_health_warns_of_the_others(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    app = App.create({**os.environ, "AGENT_LINK_STATE_DIR": str(elsewhere)})
    app.close()
    assert str(elsewhere) in state_dirs._state_dirs(None)[1]
    app = App.create()
    try:
        section = app.health()["sections"]["settings"]
        assert section["otherStateDirs"][0]["path"] == str(elsewhere) and "state dir " + str(elsewhere) in section["summary"]
        assert app.health()["problems"] == []  # a warning: health stays ok
    finally:
        app.close()


def test_health_warns_of_another_state_dir(tmp_path: Path) -> None:
    cli("health", env={**os.environ, "AGENT_LINK_STATE_DIR": str(tmp_path / "elsewhere")})
    cli("health", env={**os.environ, "AGENT_LINK_STATE_DIR": str(tmp_path / "third")})
    done = cli("health")
    assert done.returncode == 0
    [line] = [line for line in done.stdout.splitlines() if "another agent-link process" in line]
    assert line.startswith("  settings: another agent-link process recently used the state dirs ")
    assert str(tmp_path / "elsewhere") in line and str(tmp_path / "third") in line and "separate mailboxes" in line
    assert "agent-link health --forget-state-dirs" in line  # the way out, said where the warning is


def test_health_forgets_the_other_state_dirs(tmp_path: Path) -> None:
    elsewhere = str(tmp_path / "elsewhere")
    cli("health", env={**os.environ, "AGENT_LINK_STATE_DIR": elsewhere})
    assert "--forget-state-dirs" in cli("health", "--help").stdout
    done = cli("health", "--forget-state-dirs", "--json")
    assert done.returncode == 0 and f"forgot the state dir {elsewhere}" in done.stderr
    assert json.loads(done.stdout)["sections"]["settings"] == {"otherStateDirs": []}
    again = cli("health")
    assert "another agent-link process" not in again.stdout and os.environ["AGENT_LINK_STATE_DIR"] in state_dirs._state_dirs(None)[1]
    cli("health", env={**os.environ, "AGENT_LINK_STATE_DIR": elsewhere})  # used again: warned again
    assert elsewhere in cli("health").stdout


def test_forget_state_dirs_needs_this_plugin() -> None:
    done = cli("health", "--forget-state-dirs", env={**os.environ, "AGENT_LINK_LOAD_PLUGINS": ""})
    assert done.returncode == 2 and "--forget-state-dirs" in done.stderr
    assert "--forget-state-dirs" not in cli("health", "--help", env={**os.environ, "AGENT_LINK_LOAD_PLUGINS": ""}).stdout
