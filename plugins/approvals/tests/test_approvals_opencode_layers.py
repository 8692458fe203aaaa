"""opencode's config layers (``agent_link_approvals.opencode_layers``): where each layer is found
and in which order it wins, and ``agent-link approvals check|apply --real-opencode``. The real opencode's own view of the same kind of setup is
``test_approvals_opencode_realhost.py::test_opencode_merged_layers_match_opencode_debug_config``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agent_link_approvals import opencode, opencode_layers
from agent_link_hostkit import jsonc
from agent_link_approvals.files import ConfigFileError
from agent_link_approvals.toollist import ToolInfo
from click.testing import Result

Run = Callable[..., Result]
LIST = "agent-link_list_agents"
READ_ONLY_KEYS = ["agent-link_agent_link_health", "agent-link_list_agents", "agent-link_wait_for_agent"]


def test_a_malformed_layer_is_named_with_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "opencode.jsonc"
    bad.write_text('{\n  // fine\n  "permission": {"*": "ask" "x": "allow"}\n}')
    with pytest.raises(ConfigFileError) as caught:
        opencode_layers.read_layer(bad, "project", {})
    assert caught.value.kind == "malformed" and str(bad) in caught.value.message and "line 3" in caught.value.message


def test_env_and_file_references_are_substituted_as_opencode_does(tmp_path: Path) -> None:
    (tmp_path / "rules.txt").write_text('  say "hi"\n')
    text = '{"a": "{env:MODE}", "b": "{file:rules.txt}", "c": "{env:UNSET}"\n// "{file:nowhere}"\n}'
    assert jsonc.loads(opencode_layers.substitute(text, {"MODE": "ask"}, tmp_path, "x")) == {"a": "ask", "b": 'say "hi"', "c": ""}
    with pytest.raises(ConfigFileError, match="bad file reference"):
        opencode_layers.substitute('{"a": "{file:nowhere}"}', {}, tmp_path, "x")


def write_json(path: Path, data: Any, comment: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(("// mine\n" if comment else "") + json.dumps(data, indent=2) + ("\n" if not comment else ",\n"[1:]))
    return path


@pytest.fixture
def project(tmp_path: Path, no_real_opencode_layers: Path) -> dict[str, Path]:
    """A git repository ``repo`` with a sub folder ``repo/sub`` (the session's folder), and the
    global, home and managed folders of the scratch environment."""
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "sub").mkdir()
    root = no_real_opencode_layers
    return {"repo": tmp_path / "repo", "sub": tmp_path / "repo" / "sub", "global": root / "xdg" / "opencode",
            "home": root / "home", "managed": root / "managed"}


def layer_sources(env: dict[str, str], folder: Path) -> list[tuple[str, str]]:
    return [(layer.scope, layer.source) for layer in opencode_layers.real_layers(env, folder) if layer.data is not None]


def test_the_layers_are_found_in_opencodes_order(project: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    g, repo, sub = project["global"], project["repo"], project["sub"]
    files = [write_json(g / "config.json", {}), write_json(g / "opencode.json", {}), write_json(g / "opencode.jsonc", {}, True),
             write_json(tmp_path / "custom.json", {}),
             write_json(tmp_path / "opencode.json", {}),  # above the worktree: not read
             write_json(repo / "opencode.json", {}), write_json(repo / "opencode.jsonc", {}), write_json(sub / "opencode.json", {}),
             write_json(sub / ".opencode" / "opencode.json", {}), write_json(repo / ".opencode" / "opencode.jsonc", {}),
             write_json(project["home"] / ".opencode" / "opencode.json", {}), write_json(tmp_path / "dir" / "opencode.json", {}),
             write_json(project["managed"] / "opencode.json", {})]
    (g / "agent").mkdir()
    (g / "agent" / "a.md").write_text("---\npermission:\n  '*': ask\n---\n")
    env = {**os.environ, "OPENCODE_CONFIG": str(files[3]), "OPENCODE_CONFIG_DIR": str(tmp_path / "dir"),
           "OPENCODE_CONFIG_CONTENT": '{"permission": {}}'}
    assert layer_sources(env, sub) == [
        ("global", str(files[0])), ("global", str(files[1])), ("global", str(files[2])), ("custom", str(files[3])),
        ("project", str(files[5])), ("project", str(files[6])), ("project", str(files[7])),
        ("agent", str(g / "agent" / "a.md")),
        ("folder", str(files[8])), ("folder", str(files[9])),  # the nearest .opencode first
        ("folder", str(files[10])), ("folder", str(files[11])),
        ("content", "OPENCODE_CONFIG_CONTENT"), ("managed", str(files[12]))]
    no_project = layer_sources({**env, "OPENCODE_DISABLE_PROJECT_CONFIG": "true"}, sub)
    assert not [s for s in no_project if s[0] == "project" or s[1] in (str(files[8]), str(files[9]))]


@pytest.mark.parametrize(("layers", "decision", "source"), [
    # a later file's wildcard: its new key comes after the earlier layer's exact key, and decides
    ({"g": {LIST: "allow"}, "p": {"*": "ask"}}, "ask", "p"),
    # an earlier wildcard whose value a later file changes keeps its earlier place: the exact key still decides
    ({"g": {"*": "ask", LIST: "allow"}, "p": {"*": "deny"}}, "allow", "g"),
    ({"g": {"*": "allow"}, "p": {"*": "ask"}}, "ask", "p"),
    ({"g": {"*": "ask"}, "c": {LIST: "allow"}}, "allow", "c"),  # OPENCODE_CONFIG_CONTENT comes after the project
    ({"p": {"*": "ask"}, "m": {LIST: "allow"}}, "allow", "m"),  # the managed folder comes last
])
def test_precedence_decides_which_key_is_last(project: dict[str, Path], layers: dict[str, dict[str, str]], decision: str,
                                             source: str, tools: list[ToolInfo]) -> None:
    paths = {"g": project["global"] / "opencode.json", "p": project["repo"] / "opencode.jsonc", "m": project["managed"] / "opencode.json"}
    env: dict[str, str] = {"XDG_CONFIG_HOME": str(project["global"].parent), "HOME": str(project["home"])}
    for name, table in layers.items():
        if name == "c":
            env["OPENCODE_CONFIG_CONTENT"] = json.dumps({"permission": table})
        else:
            write_json(paths[name], {"permission": table}, comment=True)
    found = opencode_layers.real_layers(env, project["sub"])
    result = opencode.check(found, tools, target=1, env=env)  # layer 1: the global opencode.json
    row = next(t for t in result.tools if t["key"] == LIST)
    assert row["decision"] == decision
    assert row["from"] == ("OPENCODE_CONFIG_CONTENT" if source == "c" else str(paths[source]))


def test_real_opencode_check_names_the_later_layer_apply_cannot_outrank(
        run: Run, fake_tools: list[str], project: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project["sub"])
    write_json(project["global"] / "opencode.json", {"permission": {"edit": "allow"}})
    jsonc_file = write_json(project["repo"] / "opencode.jsonc", {"permission": {"*": "ask"}}, comment=True)
    checked = run("approvals", "check", "--real-opencode", "--json")
    report = as_json(checked)["opencode"]
    assert checked.exit_code == 1 and report["missing"] == [] and report["project"] == str(project["sub"])
    assert [(h["key"], h["from"], h["why"]) for h in report["heldBack"]] == [(k, str(jsonc_file), "layer") for k in READ_ONLY_KEYS]
    assert report["config"] == str(project["global"] / "opencode.json")
    # --opencode-config alone still means that file alone
    assert run("approvals", "check", "--opencode-config", project["global"] / "opencode.json").exit_code == 0

    applied = run("approvals", "apply", "--real-opencode", "--json")
    out = as_json(applied)["opencode"]
    assert applied.exit_code == 1 and not out["written"] and out["added"] == []  # never "fixed" while the project file asks
    human = run("approvals", "apply", "--real-opencode")
    assert f"in {jsonc_file} by hand" in human.stdout and "INCOMPLETE" in human.stdout
    # naming the project layer: a JSONC file is read but never rewritten
    refused = run("approvals", "apply", "--real-opencode", "--opencode-config", jsonc_file, "--json")
    assert refused.exit_code == 2 and as_json(refused)["error"]["kind"] == "malformed"


def test_real_opencode_apply_writes_the_global_file_and_the_merge_then_allows(
        run: Run, fake_tools: list[str], project: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project["sub"])
    write_json(project["repo"] / "opencode.jsonc", {"permission": {"edit": "ask"}}, comment=True)
    target = write_json(project["global"] / "opencode.json", {"permission": {"*": "ask"}})
    assert run("approvals", "check", "--real-opencode").exit_code == 1
    applied = run("approvals", "apply", "--real-opencode", "--json")
    out = as_json(applied)["opencode"]
    assert applied.exit_code == 0 and out["written"] and out["added"] == READ_ONLY_KEYS and out["config"] == str(target)
    assert json.loads(target.read_text())["permission"][LIST] == "allow"
    human = run("approvals", "check", "--real-opencode", "--project", project["repo"])
    assert human.exit_code == 0 and str(target) in human.stdout and "COMPLETE" in human.stdout


def test_real_opencode_bad_input(run: Run, fake_tools: list[str], project: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project["sub"])
    bad = project["repo"] / ".opencode" / "opencode.json"
    bad.parent.mkdir()
    bad.write_text('{"permission": {')
    result = run("approvals", "check", "--real-opencode")
    assert result.exit_code == 2 and result.stderr.startswith(f"agent-link: {bad} is not valid JSON") and result.stderr.count("\n") == 1
    assert fake_tools == []  # refused before the tools are listed
    bad.write_text("{}")
    elsewhere = run("approvals", "apply", "--real-opencode", "--opencode-config", project["repo"] / "nowhere.json")
    assert elsewhere.exit_code == 2 and "is not a config file opencode reads" in elsewhere.stderr
    both = run("approvals", "check", "--real-opencode", "--opencode-config", bad)
    assert both.exit_code == 2 and "name one opencode source" in both.stderr


def as_json(result: Result) -> dict[str, Any]:
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


def test_opencode_config_naming_the_global_file_is_one_file_read_twice(
        run: Run, fake_tools: list[str], project: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project["sub"])
    target = write_json(project["global"] / "opencode.json", {"permission": {"*": "ask"}})
    monkeypatch.setenv("OPENCODE_CONFIG", str(target))
    checked = run("approvals", "check", "--real-opencode")
    assert checked.exit_code == 1 and f"asked or denied by a wildcard key ('*' in {target})" in checked.stdout
    applied = run("approvals", "apply", "--real-opencode", "--json")
    out = as_json(applied)["opencode"]
    assert applied.exit_code == 0 and out["complete"] and out["added"] == READ_ONLY_KEYS
    assert [layer["scope"] for layer in out["layers"] if layer["source"] == str(target)] == ["global", "custom"]
