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


@pytest.mark.parametrize("schema", [
    {"type": "array", "items": {"type": "object"}}, {"type": "array", "items": {"type": ["string", "null"]}},
    {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer"}},
    {"type": "array", "items": {"type": "string", "minLength": 1}}, {"type": "array", "items": False}, {"items": {"type": "integer"}},
])
@pytest.mark.parametrize("instance", [[], [{}, {}], [{}, 1, "x"], ["a", None], ["a", 1, 2], ["a", "b"], [""], "not a list", [True]])
def test_items_of_one_type_are_checked_as_draft_2020_12_checks_them(schema: dict, instance: object) -> None:
    """The tool layer checks items that need only a type without a descent into each (a read's messages): the same errors."""
    from jsonschema import Draft202012Validator

    from agent_link_core.tools.registry import _validator_class

    def errors(validator: Draft202012Validator) -> list[tuple[list[object], str, str]]:
        return sorted((list(e.absolute_path), str(e.validator), e.message) for e in validator.iter_errors(instance))

    assert errors(_validator_class()(schema)) == errors(Draft202012Validator(schema))
