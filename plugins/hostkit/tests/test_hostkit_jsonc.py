"""The JSONC reader (:mod:`agent_link_hostkit.jsonc`): what opencode accepts in a config file
and what it refuses."""

from __future__ import annotations

from typing import Any

import pytest
from agent_link_hostkit import jsonc


@pytest.mark.parametrize(("text", "expected"), [
    ('{"a": 1, // one\n "b": [1, 2,], /* two\n lines */ "c": "// not a comment",}', {"a": 1, "b": [1, 2], "c": "// not a comment"}),
    ('{"s": "a \\" /* x */ , }", }', {"s": 'a " /* x */ , }'}),
    ('{"k": 1, "k": 2, "j": 3}', {"k": 2, "j": 3}),
])
def test_jsonc_reads_comments_and_trailing_commas(text: str, expected: Any) -> None:
    assert jsonc.loads(text) == expected
    assert list(jsonc.loads('{"k": 1, "j": 3, "k": 2}')) == ["k", "j"]  # a repeated key keeps its first place


@pytest.mark.parametrize("text", ['{"a": 1 /* open', '{"a": NaN}', '{"a": 1,, }', "{\n  \"a\": tru\n}"])
def test_jsonc_refuses_what_opencode_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        jsonc.loads(text)
