"""A JSON schema ``pattern`` is an ECMA-262 regular expression: its ``$`` matches only at the end of the string. Python's
``$`` also matches before a final line break, so ``"all\\n"`` passed ``^(all|...)$``; tool arguments are checked with
ECMA's reading (:func:`agent_link_core.tools.registry.ecma_regex`)."""

from __future__ import annotations

import pytest

from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError
from agent_link_core.tools.registry import ecma_regex, validate_arguments

ULID = "01JZ0000000000000000000000"


@pytest.mark.parametrize(("regex", "text", "matches"), [
    ("^a$", "a", True), ("^a$", "a\n", False), ("^(all|[a-z]+)$", "all\n", False), ("^(all|[a-z]+)$", "codex", True),
    ("^[$]+$", "$$", True), ("^\\$x$", "$x", True), ("^\\$x$", "$x\n", False), ("a", "ba\n", True), ("^a$", "a\nb", False),
    ("^[\\]$]+$", "]$", True), ("^[\\]$]+$", "]$\n", False),
])
def test_dollar_ends_the_string_as_in_ecma_262(regex: str, text: str, matches: bool) -> None:
    assert bool(ecma_regex(regex).search(text)) is matches


@pytest.mark.parametrize(("tool", "argument", "good"), [
    ("list_agents", "harness", "all"), ("get_agent_link_message_status", "messageId", ULID), ("message_agent", "messageId", ULID),
])
def test_a_trailing_line_break_fails_the_pattern(tool: str, argument: str, good: str) -> None:
    app = App.create()
    try:
        spec = app.hooks.tools()[tool]
        others = {"to": "test:bob", "message": "hi"} if tool == "message_agent" else {}
        assert validate_arguments(spec, {**others, argument: good})[0][argument] == good
        with pytest.raises(AgentLinkError) as caught:
            validate_arguments(spec, {**others, argument: good + "\n"})
        assert caught.value.code == "invalid_arguments"
        assert [(e["path"], e["rule"]) for e in caught.value.details["errors"]] == [(argument, "pattern")]
    finally:
        app.close()
