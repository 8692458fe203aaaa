"""Settings: canonical names win over aliases, flag words, paths, bounded numbers."""

from __future__ import annotations

from typing import Any

import pytest

from agent_link_core.config import Setting, load_config, parse_flag
from agent_link_core.errors import AgentLinkError

ALIASED = (Setting("AGENT_LINK_X_URL", "str", None, aliases=("OLD_X_URL", "OLDER_X_URL")),)


@pytest.mark.parametrize("word,value", [("1", True), ("TRUE", True), ("yes", True), ("On", True),
                                        ("0", False), ("false", False), ("NO", False), ("off", False)])
def test_flag_words(word: str, value: bool) -> None:
    assert parse_flag("AGENT_LINK_DEBUG", word) is value


def test_bad_flag_names_the_variable() -> None:
    with pytest.raises(AgentLinkError) as e:
        load_config({"AGENT_LINK_DEBUG": "maybe"})
    assert e.value.code == "invalid_arguments"
    assert e.value.details["errors"][0]["path"] == "env.AGENT_LINK_DEBUG"
    assert "AGENT_LINK_DEBUG" in e.value.message


def test_a_bad_alias_value_names_the_alias_that_was_set() -> None:
    # The person set OLD_X_PATH: an error naming only AGENT_LINK_X_PATH would send them looking
    # for a variable they never set.
    aliased = (Setting("AGENT_LINK_X_PATH", "path", None, aliases=("OLD_X_PATH",)),
               Setting("AGENT_LINK_X_LEVEL", "int", 3, aliases=("OLD_X_LEVEL",), minimum=0))
    with pytest.raises(AgentLinkError) as e:
        load_config({"OLD_X_PATH": "relative/file"}, aliased)
    assert "OLD_X_PATH" in e.value.message and e.value.details["errors"][0]["path"] == "env.OLD_X_PATH"
    with pytest.raises(AgentLinkError) as e:
        load_config({"OLD_X_LEVEL": "-4"}, aliased)
    assert "OLD_X_LEVEL='-4'" in e.value.message


def test_paths_absolute_or_home_relative() -> None:
    cfg = load_config({"HOME": "/h", "AGENT_LINK_STATE_DIR": "~/state"})
    assert str(cfg.state_dir) == "/h/state"
    assert str(cfg.db_path) == "/h/state/agent-link.db"
    assert str(load_config({"HOME": "/h"}).state_dir) == "/h/.agent-link"
    with pytest.raises(AgentLinkError) as e:
        load_config({"HOME": "/h", "AGENT_LINK_STATE_DIR": "relative/dir"})
    assert "AGENT_LINK_STATE_DIR" in e.value.message
    with pytest.raises(AgentLinkError) as e:
        load_config({"HOME": "/h", "AGENT_LINK_MAILBOX_PATH": "mail.db"})
    assert e.value.details["errors"][0]["path"] == "env.AGENT_LINK_MAILBOX_PATH"


def test_canonical_wins_and_health_reports_names_only() -> None:
    cfg = load_config({"AGENT_LINK_X_URL": "ws://a", "OLD_X_URL": "ws://secret"}, ALIASED)
    assert cfg.get("AGENT_LINK_X_URL") == "ws://a"
    report = cfg.env_report()
    assert report["deprecated"] == [{"name": "OLD_X_URL", "canonical": "AGENT_LINK_X_URL"}]
    assert report["conflicts"] == [{"canonical": "AGENT_LINK_X_URL", "winner": "AGENT_LINK_X_URL", "ignored": "OLD_X_URL"}]
    assert "secret" not in repr(report)


def test_alias_used_when_canonical_unset() -> None:
    cfg = load_config({"OLDER_X_URL": "ws://b"}, ALIASED)
    assert cfg.get("AGENT_LINK_X_URL") == "ws://b" and cfg.sources["AGENT_LINK_X_URL"] == "OLDER_X_URL"
    cfg = load_config({"OLD_X_URL": "ws://b", "OLDER_X_URL": "ws://c"}, ALIASED)
    assert cfg.get("AGENT_LINK_X_URL") == "ws://b"
    assert cfg.conflicts == [{"canonical": "AGENT_LINK_X_URL", "winner": "OLD_X_URL", "ignored": "OLDER_X_URL"}]


@pytest.mark.parametrize("env,limit,interval", [
    ({}, 3, 30000),
    ({"AGENT_LINK_REMINDER_LIMIT": "0", "AGENT_LINK_REMINDER_INTERVAL_MS": "60000"}, 0, 60000),
])
def test_reminder_settings(env: dict[str, str], limit: int, interval: int) -> None:
    cfg = load_config(env)
    assert (cfg.reminder_limit, cfg.reminder_interval_ms) == (limit, interval)


@pytest.mark.parametrize("env,expected", [
    ({"AGENT_LINK_REMINDER_LIMIT": "21"}, "AGENT_LINK_REMINDER_LIMIT='21' is invalid: expected a whole number from 0 to 20."),
    ({"AGENT_LINK_REMINDER_LIMIT": "abc"}, "AGENT_LINK_REMINDER_LIMIT='abc' is invalid: expected a whole number from 0 to 20."),
    ({"AGENT_LINK_REMINDER_INTERVAL_MS": "29999"},
     "AGENT_LINK_REMINDER_INTERVAL_MS='29999' is invalid: expected a whole number from 30000 to 2592000000."),
    ({"AGENT_LINK_BUSY_TIMEOUT_MS": "5"}, "AGENT_LINK_BUSY_TIMEOUT_MS='5' is invalid: expected a whole number from 100 to 600000."),
    ({"AGENT_LINK_LOG_LEVEL": "loud"}, "AGENT_LINK_LOG_LEVEL='loud' is invalid: expected one of error, warn, info, debug."),
    ({"AGENT_LINK_DEBUG": "maybe"}, "AGENT_LINK_DEBUG='maybe' is invalid: expected one of 1/true/yes/on or 0/false/no/off."),
    ({"AGENT_LINK_STATE_DIR": "rel/dir"}, "AGENT_LINK_STATE_DIR='rel/dir' is invalid: expected an absolute path"),
])
def test_every_bad_value_is_refused_naming_setting_value_and_allowed(env: dict[str, str], expected: str) -> None:
    """A number out of range or a word not among the choices is refused like a bad flag or
    path (never silently replaced by the default), and the message says value and range."""
    with pytest.raises(AgentLinkError) as info:
        load_config({"HOME": "/h", **env})
    assert info.value.code == "invalid_arguments" and expected in info.value.message


def test_bad_value_from_the_settings_file_is_refused_naming_the_file(tmp_path: Any) -> None:
    path = tmp_path / "config.toml"
    path.write_text('reminder_limit = "many"\n')
    with pytest.raises(AgentLinkError) as info:
        load_config({"HOME": "/h", "AGENT_LINK_CONFIG": str(path)})
    assert f"AGENT_LINK_REMINDER_LIMIT = 'many' in the settings file {path} is invalid: expected a whole number from 0 to 20" \
        in info.value.message
    seen: list[AgentLinkError] = []
    cfg = load_config({"HOME": "/h", "AGENT_LINK_CONFIG": str(path)}, on_setting_error=seen.append)
    # the collected value fell back: its source is the default, not the file it was refused from
    assert cfg.reminder_limit == 3 and cfg.sources["AGENT_LINK_REMINDER_LIMIT"] == "default" and len(seen) == 1


def test_setting_errors_can_be_collected() -> None:
    seen: list[AgentLinkError] = []
    cfg = load_config({"AGENT_LINK_DEBUG": "maybe", "HOME": "/h"}, on_setting_error=seen.append)
    assert cfg.get("AGENT_LINK_DEBUG") is False and seen[0].code == "invalid_arguments"


def test_an_empty_value_is_refused_unless_the_setting_is_text() -> None:
    """AGENT_LINK_STATE_DIR="" is refused as "rel/dir" is (it was silently ~/.agent-link): a path, number, flag, choice or
    address has no empty value; a text setting keeps its own meaning of empty (AGENT_LINK_DISABLE_PLUGINS="": none)."""
    for name in ("AGENT_LINK_STATE_DIR", "AGENT_LINK_HOOK_TIMEOUT_MS", "AGENT_LINK_DEBUG", "AGENT_LINK_LOG_LEVEL", "AGENT_LINK_ADDRESS"):
        with pytest.raises(AgentLinkError) as info:
            load_config({"HOME": "/h", name: ""})
        assert f"{name}='' is invalid" in info.value.message
    with pytest.raises(AgentLinkError, match="OLD_DIR='' is invalid"):  # an alias alike
        load_config({"HOME": "/h", "OLD_DIR": ""}, extra=(Setting("AGENT_LINK_X_DIR", "path", None, aliases=("OLD_DIR",)),))
    cfg = load_config({"HOME": "/h", "AGENT_LINK_DISABLE_PLUGINS": "", "OLD_X_URL": ""}, extra=ALIASED)
    assert cfg.get("AGENT_LINK_DISABLE_PLUGINS") == "" and cfg.get("AGENT_LINK_X_URL") is None
