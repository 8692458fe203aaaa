"""roles.json: validation on every read, refusal to guess, writers that keep what they do not own,
atomic replace under a lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_link_core.errors import AgentLinkError
from agent_link_roles.table import load_table, owned_object, table_path, update_table


def write(state: Path, content: object) -> Path:
    state.mkdir(parents=True, exist_ok=True)
    path = table_path(state)
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def test_missing_file_is_an_empty_table(isolated_env: Path) -> None:
    table = load_table(isolated_env)
    assert not table.exists and table.roles == {} and table.problems == []


def test_valid_entries_are_read(isolated_env: Path) -> None:
    write(isolated_env, {
        "version": 1, "enforcement": "warn",
        "roles": {"builder": {"address": "codex:t1", "assignedAt": "2026-01-01T00:00:00Z"},
                  "orchestrator": {"address": "claude:s1", "projects": {"/p/one": "codex:t2"}}},
        "overridePolicy": {"role:builder": {"model": ["*"], "effort": ["role:orchestrator", "claude:s9"]}},
    })
    table = load_table(isolated_env)
    assert table.problems == []
    assert table.enforcement == "warn"
    assert table.holder("builder") == "codex:t1"
    assert table.roles["orchestrator"].projects == {"/p/one": "codex:t2"}
    assert table.policy["role:builder"] == {"model": ("*",), "effort": ("role:orchestrator", "claude:s9")}
    assert table.roles_held_by("codex:t1") == ["builder"]
    assert table.projects_held_by("codex:t2") == [("orchestrator", "/p/one")]
    assert table.is_persistent("codex:t2") and not table.is_persistent("codex:nobody")


@pytest.mark.parametrize(
    ("content", "path", "rule"),
    [
        ({"version": 1, "roles": {"Bad Name": {"address": "codex:a"}}}, "roles.Bad Name", "pattern"),
        ({"version": 1, "roles": {"x": "codex:a"}}, "roles.x", "type"),
        ({"version": 1, "roles": {"x": {"address": "not an address"}}}, "roles.x.address", "address"),
        ({"version": 1, "roles": {"x": {"address": "role:y"}}}, "roles.x.address", "address"),
        ({"version": 1, "roles": {"x": {"address": "codex:a", "assignedAt": "yesterday"}}}, "roles.x.assignedAt", "format"),
        ({"version": 1, "roles": {"x": {"address": "codex:a", "projects": {"/p": "codex:b"}}}}, "roles.x.projects", "orchestrator_only"),
        ({"version": 1, "roles": {"orchestrator": {"projects": {"rel/p": "codex:b"}}}}, "roles.orchestrator.projects.rel/p", "absolute_path"),
        ({"version": 1, "enforcement": "strict"}, "enforcement", "enum"),
        ({"version": 1, "roles": []}, "roles", "type"),
        ({"version": 1, "overridePolicy": {"*": {"model": ["*"]}}}, "overridePolicy.*", "target"),
        ({"version": 1, "overridePolicy": {"codex:a": {"modle": ["*"]}}}, "overridePolicy.codex:a.modle", "unknown_setting"),
        ({"version": 1, "overridePolicy": {"codex:a": {"model": ["*", "nobody"]}}}, "overridePolicy.codex:a.model", "entry"),
        ({"version": 2, "roles": {}}, "version", "version"),
        ([1, 2], "", "type"),
    ],
)
def test_invalid_entries_are_ignored_and_listed(isolated_env: Path, content: object, path: str, rule: str) -> None:
    write(isolated_env, content)
    table = load_table(isolated_env)
    assert {"path": path, "rule": rule} in [{"path": p["path"], "rule": p["rule"]} for p in table.problems]
    assert all(p["message"] for p in table.problems)


def test_one_bad_entry_does_not_hide_the_others(isolated_env: Path) -> None:
    write(isolated_env, {"version": 1, "roles": {"good": {"address": "codex:a"}, "bad": {"address": 7}},
                         "overridePolicy": {"codex:a": {"model": ["*", 3]}}})
    table = load_table(isolated_env)
    assert table.holder("good") == "codex:a" and table.holder("bad") is None
    assert table.policy["codex:a"]["model"] == ("*",)


def test_a_list_of_holders_is_ambiguous_not_a_pick(isolated_env: Path) -> None:
    write(isolated_env, {"version": 1, "roles": {"x": {"address": ["codex:a", "codex:b"]}}})
    role = load_table(isolated_env).roles["x"]
    assert role.holders == ("codex:a", "codex:b") and role.address is None


def test_too_many_policy_entries_are_cut_to_fifty(isolated_env: Path) -> None:
    write(isolated_env, {"version": 1, "overridePolicy": {"codex:a": {"model": [f"codex:s{i}" for i in range(60)]}}})
    table = load_table(isolated_env)
    assert len(table.policy["codex:a"]["model"]) == 50
    assert any(p["rule"] == "maxItems" for p in table.problems)


@pytest.mark.parametrize("content", ['{"version": 1, "roles": {', "\xff\xfe not utf8", ""])
def test_unparsable_file_is_a_state_io_error(isolated_env: Path, content: str) -> None:
    path = write(isolated_env, "")
    path.write_bytes(content.encode("latin-1"))
    with pytest.raises(AgentLinkError) as e:
        load_table(isolated_env)
    assert e.value.code == "state_io_error"
    assert e.value.details["path"] == "roles.json"
    with pytest.raises(AgentLinkError):
        update_table(isolated_env, lambda raw: raw.update(x=1))
    assert path.read_bytes() == content.encode("latin-1")  # never "repaired" by a writer


def test_writers_keep_unknown_keys_and_refuse_other_versions(isolated_env: Path) -> None:
    path = write(isolated_env, {"version": 1, "comment": "mine", "roles": {"x": {"address": "codex:a", "note": "keep"},
                                                                           "broken": 42}})
    update_table(isolated_env, lambda raw: owned_object(raw, "roles", path, isolated_env)["x"].update(address="codex:b"))
    raw = json.loads(path.read_text())
    assert raw["comment"] == "mine" and raw["roles"]["broken"] == 42
    assert raw["roles"]["x"] == {"address": "codex:b", "note": "keep"}
    assert (path.stat().st_mode & 0o777) == 0o600
    write(isolated_env, {"version": 2, "roles": {}})
    with pytest.raises(AgentLinkError) as e:
        update_table(isolated_env, lambda raw: raw.update(version=1))
    assert e.value.code == "state_io_error" and e.value.details["errno"] == "unsupported_version"
    # the hint is about the file (it spoke of the state dir existing, being yours and having space)
    assert e.value.hint.startswith("Another agent-link version wrote it") and "space" not in e.value.hint
    assert json.loads(path.read_text())["version"] == 2


def test_a_non_object_section_is_not_overwritten(isolated_env: Path) -> None:
    path = write(isolated_env, {"version": 1, "roles": ["hand", "made"]})
    with pytest.raises(AgentLinkError) as e:
        update_table(isolated_env, lambda raw: owned_object(raw, "roles", path, isolated_env).update(x={}))
    assert e.value.code == "state_io_error"
    assert json.loads(path.read_text())["roles"] == ["hand", "made"]


def test_a_change_that_changes_nothing_writes_nothing(isolated_env: Path) -> None:
    path = write(isolated_env, '{"version":1,   "roles": {}}')
    update_table(isolated_env, lambda raw: None)
    assert path.read_text() == '{"version":1,   "roles": {}}'


def test_a_failing_change_writes_nothing(isolated_env: Path) -> None:
    path = write(isolated_env, {"version": 1})

    def boom(raw: dict) -> None:
        raw["roles"] = {"x": {}}
        raise AgentLinkError("invalid_arguments", "no")

    with pytest.raises(AgentLinkError):
        update_table(isolated_env, boom)
    assert json.loads(path.read_text()) == {"version": 1}
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


WRITER = """
import sys
from pathlib import Path
from agent_link_roles.table import owned_object, table_path, update_table
state, who, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
for i in range(count):
    update_table(state, lambda raw: owned_object(raw, "roles", table_path(state), state).__setitem__(f"r-{who}-{i}", {"address": f"test:{who}"}))
"""


def test_concurrent_writers_lose_nothing(isolated_env: Path) -> None:
    writers, each = 6, 15
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(isolated_env), f"w{n}", str(each)], env=dict(os.environ))
             for n in range(writers)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    table = load_table(isolated_env)
    assert table.problems == []
    assert len(table.roles) == writers * each
    assert not [p for p in isolated_env.iterdir() if p.name.endswith(".tmp")]
