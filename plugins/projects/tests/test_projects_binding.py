"""The binding file: missing is none, every rule broken is an error naming the field."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from agent_link_projects.binding import FIELDS, read_binding

from agent_link_core.errors import AgentLinkError


def _error(root: Path) -> dict[str, Any]:
    with pytest.raises(AgentLinkError) as caught:
        read_binding(str(root))
    assert caught.value.code == "invalid_arguments"
    return caught.value.details


def test_missing_file_is_no_binding(tmp_path: Path) -> None:
    assert read_binding(str(tmp_path)) is None


def test_valid_binding_is_read(tmp_path: Path, h: Any) -> None:
    path = h.write_binding(tmp_path, h.ORCH)
    binding = read_binding(str(tmp_path) + "/")  # a trailing slash is the same root
    assert binding is not None and binding.thread_id == h.ORCH and binding.project_id == "shop"
    assert binding.policy_version == "v3" and binding.view()["path"] == str(path)


def test_codex_prefixed_thread_id_is_accepted(tmp_path: Path, h: Any) -> None:
    h.write_binding(tmp_path, f"codex:{h.ORCH}")
    binding = read_binding(str(tmp_path))
    assert binding is not None and binding.thread_id == h.ORCH


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("bad", [None, "", "   ", 7])
def test_each_required_field(tmp_path: Path, h: Any, field: str, bad: Any) -> None:
    h.write_binding(tmp_path, h.ORCH, **{field: bad})  # None leaves the field out
    details = _error(tmp_path)
    assert details["errors"][0]["path"] == f"binding.{field}" and details["errors"][0]["rule"] == "required"
    assert details["bindingPath"].endswith(".codex/project-orchestrator.json")


def test_role_must_be_project_orchestrator(tmp_path: Path, h: Any) -> None:
    h.write_binding(tmp_path, h.ORCH, role="orchestrator")
    assert _error(tmp_path)["errors"][0] == {"path": "binding.role", "rule": "enum", "expected": '"project_orchestrator"'}


@pytest.mark.parametrize("field", ["createdAt", "lastVerifiedAt"])
def test_dates_must_parse(tmp_path: Path, h: Any, field: str) -> None:
    h.write_binding(tmp_path, h.ORCH, **{field: "yesterday"})
    assert _error(tmp_path)["errors"][0]["path"] == f"binding.{field}"


@pytest.mark.parametrize("written", ["parent", "child", "other"])
def test_project_root_must_match_exactly(tmp_path: Path, h: Any, written: str) -> None:
    root = tmp_path / "shop"
    root.mkdir()
    value = {"parent": str(tmp_path), "child": str(root / "src"), "other": "/elsewhere"}[written]
    h.write_binding(root, h.ORCH, projectRoot=value)
    assert _error(root)["errors"][0]["path"] == "binding.projectRoot"


def test_project_root_is_matched_without_resolving_symlinks(tmp_path: Path, h: Any) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    os.symlink(real, link)
    h.write_binding(real, h.ORCH)  # names the real path
    assert read_binding(str(real)) is not None
    assert _error(link)["errors"][0]["rule"] == "mismatch"  # same file, reached through the link


def test_dotted_root_is_normalised(tmp_path: Path, h: Any) -> None:
    (tmp_path / "a").mkdir()
    h.write_binding(tmp_path, h.ORCH, projectRoot=str(tmp_path / "a" / ".."))
    assert read_binding(str(tmp_path)) is not None


@pytest.mark.parametrize("content,rule", [("{not json", "json"), ("[1, 2]", "type"), ('"text"', "type"), (b"\xff\xfe", "json")])
def test_unparsable_files(tmp_path: Path, content: Any, rule: str) -> None:
    path = tmp_path / ".codex" / "project-orchestrator.json"
    path.parent.mkdir()
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    assert _error(tmp_path)["errors"][0] == {"path": "binding", "rule": rule, "expected": _error(tmp_path)["errors"][0]["expected"]}


def test_a_directory_in_its_place_is_an_error(tmp_path: Path) -> None:
    (tmp_path / ".codex" / "project-orchestrator.json").mkdir(parents=True)
    assert _error(tmp_path)["errors"][0]["rule"] == "unreadable"
