"""The settings file (agent_link_core.settings_file); ``agent-link config``, which edits the file, and the
state-directory record health warns from are the settings plugin's (plugins/settings/tests)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent_link_core.app import App
from agent_link_core.config import load_config
from agent_link_core.errors import AgentLinkError
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
        assert app.config.state_dir == str(tmp_path / "box") and "roles" in app.hooks.blocked
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


def test_health_says_where_the_address_was_read(settings: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``addressSource`` stays ``config`` (docs/behaviour.md); health's line names the variable or the settings file."""
    monkeypatch.delenv("AGENT_LINK_ADDRESS", raising=False)
    settings.write_text('address = "test:alice"\n')
    from_file, as_json = cli("health"), cli("health", "--json")
    from_env = cli("health", env={**os.environ, "AGENT_LINK_ADDRESS": "test:bob"})
    assert "address:    test:alice (settings file)" in from_file.stdout, from_file.stdout + from_file.stderr
    assert "address:    test:bob (AGENT_LINK_ADDRESS)" in from_env.stdout, from_env.stdout + from_env.stderr
    assert json.loads(as_json.stdout)["addressSource"] == "config"
