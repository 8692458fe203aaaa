"""The settings file (agent_link_core.settings_file) and the state-directory record health
warns from (agent_link_core.settings_file too); ``agent-link config``, which edits the file, is the
settings plugin's (plugins/settings/tests)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent_link_core.app import App
from agent_link_core.config import load_config
from agent_link_core.errors import AgentLinkError
from agent_link_core import settings_file as settings_mod
from agent_link_core.settings_file import with_settings
from agent_link_testing.settings_file import cli, settings_file


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch) -> Path:
    return settings_file(monkeypatch)


def test_file_values_fill_in_and_the_environment_wins(settings: Path, tmp_path: Path) -> None:
    settings.write_text(f'state_dir = "{tmp_path / "box"}"\nAGENT_LINK_DEBUG = true\nreminder_limit = 5\n[mine]\nx = 1\n')
    cfg = load_config()
    assert cfg.state_dir == str(tmp_path / "box") and cfg.get("AGENT_LINK_DEBUG") is True and cfg.reminder_limit == 5
    assert cfg.sources["AGENT_LINK_STATE_DIR"] == "settings-file" and cfg.settings_file == str(settings)
    cfg = load_config({**os.environ, "AGENT_LINK_STATE_DIR": str(tmp_path / "env")})
    assert cfg.state_dir == str(tmp_path / "env") and cfg.sources["AGENT_LINK_STATE_DIR"] == "AGENT_LINK_STATE_DIR"


def test_the_app_and_its_plugins_read_the_file(settings: Path, tmp_path: Path) -> None:
    settings.write_text(f'state_dir = "{tmp_path / "box"}"\ndisable_plugins = "roles"\n')
    app = App.create()
    try:
        assert app.config.state_dir == str(tmp_path / "box") and "roles" in app.plugin_report.blocked
        health = app.health()
        assert health["settings"]["sources"]["AGENT_LINK_STATE_DIR"] == "settings-file"
    finally:
        app.close()


def test_an_invalid_file_is_one_clear_error(settings: Path) -> None:
    settings.write_text("state_dir = \n")
    with pytest.raises(AgentLinkError) as caught:
        with_settings(dict(os.environ))
    assert caught.value.code == "invalid_arguments" and caught.value.hint
    done = cli("health")
    assert done.returncode == 1 and "not valid TOML" in done.stderr and "Traceback" not in done.stderr
    problems: list[AgentLinkError] = []
    load_config(on_setting_error=problems.append)  # health's path: reported, not raised
    assert problems and "not valid TOML" in problems[0].message


def test_a_settings_file_that_is_a_folder_says_so(settings: Path) -> None:
    settings.mkdir()
    with pytest.raises(AgentLinkError) as caught:
        with_settings(dict(os.environ))
    assert caught.value.hint == "Move that folder away or point AGENT_LINK_CONFIG elsewhere."
    settings.rmdir()
    settings.write_text("x = 1\n")
    settings.chmod(0)
    if not os.access(settings, os.R_OK):  # root reads it all the same
        with pytest.raises(AgentLinkError) as caught:
            with_settings(dict(os.environ))
        assert caught.value.hint == "Fix its permissions or point AGENT_LINK_CONFIG elsewhere."


def test_other_state_dirs_used_lately(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    a, b, old, gone = (str(tmp_path / name) for name in ("a", "b", "old", "gone"))
    for folder in (a, b, old):
        os.mkdir(folder)
    day = settings_mod.STATE_DIR_RECENT_MS
    settings_mod.record_state_dir(a, env, now_ms=10 * day)
    settings_mod.record_state_dir(b, env, now_ms=10 * day + 5)
    settings_mod.record_state_dir(old, env, now_ms=day)
    settings_mod.record_state_dir(gone, env, now_ms=10 * day + 6)  # a temporary server's folder, since removed
    assert settings_mod.other_state_dirs(a, env, now_ms=10 * day + 10) == [{"path": b, "lastUsedMs": 10 * day + 5}]
    assert settings_mod.other_state_dirs(b, env, now_ms=12 * day) == []


def test_health_warns_of_another_state_dir(tmp_path: Path) -> None:
    cli("health", env={**os.environ, "AGENT_LINK_STATE_DIR": str(tmp_path / "elsewhere")})
    done = cli("health")
    assert "another agent-link process recently used the state dir" in done.stdout and str(tmp_path / "elsewhere") in done.stdout
    assert "agent-link health --forget-state-dirs" in done.stdout  # the way out, said where the warning is


def test_health_forgets_the_other_state_dirs(tmp_path: Path) -> None:
    elsewhere = str(tmp_path / "elsewhere")
    cli("health", env={**os.environ, "AGENT_LINK_STATE_DIR": elsewhere})
    done = cli("health", "--forget-state-dirs", "--json")
    assert done.returncode == 0 and f"forgot the state dir {elsewhere}" in done.stderr
    assert json.loads(done.stdout)["settings"]["otherStateDirs"] == []
    again = cli("health")
    assert "another agent-link process" not in again.stdout and os.environ["AGENT_LINK_STATE_DIR"] in settings_mod._state_dirs(None)[1]
    cli("health", env={**os.environ, "AGENT_LINK_STATE_DIR": elsewhere})  # used again: warned again
    assert elsewhere in cli("health").stdout
