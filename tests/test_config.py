"""Settings: canonical names win over aliases, flag words, paths, bounded numbers."""

from __future__ import annotations

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
    assert "OLD_X_LEVEL" in load_config({"OLD_X_LEVEL": "-4"}, aliased).warnings[0]["message"]


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


@pytest.mark.parametrize("env,limit,interval,codes", [
    ({}, 3, 30000, []),
    ({"AGENT_LINK_REMINDER_LIMIT": "0", "AGENT_LINK_REMINDER_INTERVAL_MS": "60000"}, 0, 60000, []),
    ({"AGENT_LINK_REMINDER_LIMIT": "21"}, 3, 30000, ["reminder_limit_ignored"]),
    ({"AGENT_LINK_REMINDER_LIMIT": "x"}, 3, 30000, ["reminder_limit_ignored"]),
    ({"AGENT_LINK_REMINDER_INTERVAL_MS": "29999"}, 3, 30000, ["reminder_interval_ignored"]),
])
def test_reminder_settings(env: dict[str, str], limit: int, interval: int, codes: list[str]) -> None:
    cfg = load_config(env)
    assert (cfg.reminder_limit, cfg.reminder_interval_ms) == (limit, interval)
    assert [w["code"] for w in cfg.warnings] == codes


def test_setting_errors_can_be_collected() -> None:
    seen: list[AgentLinkError] = []
    cfg = load_config({"AGENT_LINK_DEBUG": "maybe", "HOME": "/h"}, on_setting_error=seen.append)
    assert cfg.get("AGENT_LINK_DEBUG") is False and seen[0].code == "invalid_arguments"
