"""read_json_object: one rule for "a JSON file that must hold an object, else no record"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agent_link_core.json_files import read_json_object


def test_an_object_is_returned(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text('{"pid": 7, "nested": {"a": [1, 2]}}', encoding="utf-8")
    assert read_json_object(path) == {"pid": 7, "nested": {"a": [1, 2]}}
    assert read_json_object(str(path)) == {"pid": 7, "nested": {"a": [1, 2]}}
    path.write_text("{}", encoding="utf-8")
    assert read_json_object(path) == {}


@pytest.mark.parametrize("content", [
    b"", b"   ", b"{", b"not json", b"\xff\xfe{}",  # empty, truncated, text, not UTF-8
    b"[1, 2]", b'"text"', b"3", b"null", b"true",  # JSON, but not an object
    b"[" * 100_000 + b"]" * 100_000,  # nested too deeply for the parser
    b'{"a": ' * 100_000 + b"1" + b"}" * 100_000,
])
def test_anything_but_an_object_is_none(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(content)
    assert read_json_object(path) is None


def test_missing_or_unreadable_is_none(tmp_path: Path) -> None:
    assert read_json_object(tmp_path / "absent.json") is None
    assert read_json_object(tmp_path) is None  # a directory where the file should be
    (tmp_path / "f").write_text("{}", encoding="utf-8")
    assert read_json_object(tmp_path / "f" / "below.json") is None  # a file where a folder should be


def test_imports_only_the_standard_library() -> None:
    """The hook fast path reads records with it, so it must stay light."""
    probe = "import sys; import agent_link_core.json_files; print(' '.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    loaded = {name.split(".")[0] for name in out.stdout.split()}
    assert loaded & {"pluggy", "mcp", "click", "pydantic", "anyio"} == set()
    assert {name for name in out.stdout.split() if name.startswith("agent_link_core.")} == {"agent_link_core.json_files"}


VALUES = [
    {}, [], "", 0, -1.5e300, 10**30, True, None, "é\u2028\U0001f600\x00\"\\",
    {"context": "3 peer messages", "nested": [1, 2.5, {"a": None, "b": [True, False]}], "ü": "ü"},
    [float("inf"), float("-inf")], {"1": 1, "": ""},
]


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_loads_and_dumps_agree_with_the_json_package(value: object) -> None:
    """The hook's JSON (json_files.loads/dumps, the C accelerator without the json package)
    reads and writes exactly what json.loads/json.dumps do."""
    import json

    from agent_link_core.json_files import dumps, loads

    assert dumps(value) == json.dumps(value)
    for text in (json.dumps(value), json.dumps(value, indent=2, ensure_ascii=False), f" \n\t{json.dumps(value)}\r\n "):
        assert loads(text) == json.loads(text)
    assert json.dumps(loads("[NaN]")) == "[NaN]"


@pytest.mark.parametrize("text", ["", " ", "[1,", "1 2", "{'a': 1}", "\ufeff{}", '"\\x"', '"\x01"', "nul", "{} x"])
def test_loads_refuses_what_json_refuses_with_its_words(text: str) -> None:
    import json

    from agent_link_core.json_files import loads

    with pytest.raises(json.JSONDecodeError) as ours:
        loads(text)
    with pytest.raises(json.JSONDecodeError) as theirs:
        json.loads(text)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("text", ["{not json", '{"a": tru}', '["\\x"]', '{"a" 1}', "[1,]"])
def test_loads_refuses_bad_json_in_a_process_that_never_imported_json(text: str) -> None:
    """The hook's process has not imported the json package: an error the C scanner finds
    inside a value must still come out as json's own JSONDecodeError."""
    probe = ("import sys\nfrom agent_link_core.json_files import loads\nassert 'json.decoder' not in sys.modules\n"
             "try:\n    loads(sys.argv[1])\nexcept ValueError as exc:\n    print(type(exc).__name__, exc)\n")
    out = subprocess.run([sys.executable, "-c", probe, text], capture_output=True, text=True, timeout=30)
    import json

    with pytest.raises(json.JSONDecodeError) as theirs:
        json.loads(text)
    assert out.stdout.strip() == f"JSONDecodeError {theirs.value}", out.stderr


def test_dumps_refuses_what_json_refuses() -> None:
    from agent_link_core.json_files import dumps

    circular: list[object] = []
    circular.append(circular)
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps({"a": object()})
    with pytest.raises(ValueError, match="Circular reference"):
        dumps(circular)
