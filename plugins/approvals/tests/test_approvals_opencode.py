"""opencode's ``permission`` config for agent-link's tools (``agent_link_approvals.opencode``):
the decision (the last matching key wins, wildcards, nested values, one action for all), what is
missing or held back, and ``agent-link approvals check|apply --opencode-config``. The real
opencode's behaviour is ``test_approvals_opencode_realhost.py``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agent_link_approvals import opencode, opencode_layers, service
from agent_link_approvals.opencode_layers import Layer
from agent_link_approvals.toollist import ToolInfo
from click.testing import Result

Run = Callable[..., Result]
READ_ONLY_KEYS = ["agent-link_agent_link_health", "agent-link_list_agents", "agent-link_wait_for_agent"]


def check_data(path: Path, data: dict[str, Any] | None, tools: list[ToolInfo], **kw: Any) -> opencode.OpencodeCheck:
    """``opencode.check`` of the one file ``path`` holding ``data`` (None: absent)."""
    return opencode.check([Layer(str(path), path, "file", data)], tools, target=0, **kw)


def as_json(result: Result) -> dict[str, Any]:
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize(("permission", "expected"), [
    (None, ("none", None)),
    ({"edit": "ask"}, ("none", None)),
    ({"*": "ask"}, ("ask", "*")),
    ({"*": "ask", "agent-link_list_agents": "allow"}, ("allow", "agent-link_list_agents")),
    ({"agent-link_list_agents": "allow", "*": "ask"}, ("ask", "*")),  # the last matching key decides
    ({"agent-link_*": "deny"}, ("deny", "agent-link_*")),
    ({"agent-link_list_agent?": "ask"}, ("ask", "agent-link_list_agent?")),
    ({"agent-link_*": {"*": "ask", "git *": "allow"}}, ("ask", "agent-link_*")),  # input patterns: an MCP tool's is *
    ({"agent-link_*": {"git *": "ask"}}, ("none", None)),
    ({"*": "sometimes"}, ("ask", "*")),  # unknown action: counted as asking
    ("ask", ("ask", "permission")),
])
def test_the_last_matching_key_decides(permission: Any, expected: tuple[str, str | None]) -> None:
    assert opencode.decide(permission, "agent-link_list_agents") == expected


def test_tool_names_follow_opencodes_mcp_naming() -> None:
    assert opencode.tool_key("agent-link", "list_agents") == "agent-link_list_agents"
    assert opencode.tool_key("my server", "a.b") == "my_server_a_b"


def test_missing_held_back_and_role_admin(tools: list[ToolInfo], tmp_path: Path) -> None:
    data = {"permission": {"*": "ask", "agent-link_wait_for_agent": "deny", "agent-link_set_agent_role": "allow"}}
    config = tmp_path / "opencode.json"
    result = check_data(config, data, tools)
    assert result.required == READ_ONLY_KEYS
    assert result.missing == ["agent-link_agent_link_health", "agent-link_list_agents"]
    assert result.held_back == [{"key": "agent-link_wait_for_agent", "decision": "deny", "by": "agent-link_wait_for_agent",
                                 "from": str(config), "why": "named"}]
    assert result.role_admin_allowed == ["agent-link_set_agent_role"] and not result.complete
    # no permission at all: opencode runs MCP tools unasked, so nothing is missing, and it warns of the role-admin tools
    plain = check_data(config, None, tools, all_tools=True)
    assert plain.complete and plain.missing == [] and len(plain.role_admin_allowed) == 3
    # one action for every tool cannot be amended key by key
    single = check_data(config, {"permission": "ask"}, tools)
    assert [h["key"] for h in single.held_back] == READ_ONLY_KEYS and single.missing == []


def test_check_says_what_is_missing_and_exits_1_then_apply_adds_exactly_that(
        run: Run, fake_tools: list[str], write: Callable[[str, str], Path]) -> None:
    config = write("opencode.json", json.dumps({"$schema": "https://opencode.ai/config.json", "model": "m/x",
                                                "permission": {"*": "ask", "edit": "allow"}}, indent=4) + "\n")
    before = config.read_text()
    checked = run("approvals", "check", "--opencode-config", config)
    assert checked.exit_code == 1 and "agent-link_list_agents" in checked.stdout and "--opencode-config" in checked.stdout
    assert fake_tools == ["opencode"]

    dry = run("approvals", "apply", "--opencode-config", config, "--dry-run", "--json")
    assert dry.exit_code == 0 and as_json(dry)["opencode"]["added"] == READ_ONLY_KEYS and config.read_text() == before

    applied = run("approvals", "apply", "--opencode-config", config, "--json")
    report = as_json(applied)["opencode"]
    assert applied.exit_code == 0 and report["written"] and report["complete"] and report["added"] == READ_ONLY_KEYS
    data = json.loads(config.read_text())
    assert list(data) == ["$schema", "model", "permission"] and data["model"] == "m/x"
    assert list(data["permission"].items()) == [("*", "ask"), ("edit", "allow"), *[(k, "allow") for k in READ_ONLY_KEYS]]
    assert config.read_text().startswith('{\n    "$schema"')  # the file's indentation is kept
    assert Path(report["backup"]).read_text() == before

    assert run("approvals", "check", "--opencode-config", config).exit_code == 0
    again = run("approvals", "apply", "--opencode-config", config, "--json")
    assert again.exit_code == 0 and as_json(again)["opencode"]["added"] == [] and not as_json(again)["opencode"]["written"]


def test_a_byte_order_mark_is_read_as_opencode_reads_it_and_kept_by_apply(
        run: Run, fake_tools: list[str], write: Callable[[str, str], Path]) -> None:
    """opencode drops one leading BOM (Bun's ``file.text()``); a file saved with one by a Windows
    editor is neither refused nor stripped of it by ``apply``."""
    config = write("opencode.json", '\ufeff{"permission": {"*": "ask", "edit": "allow"}}')
    assert run("approvals", "check", "--opencode-config", config).exit_code == 1
    applied = run("approvals", "apply", "--opencode-config", config, "--json")
    assert applied.exit_code == 0 and as_json(applied)["opencode"]["added"] == READ_ONLY_KEYS, applied.stdout
    text = config.read_text(encoding="utf-8")
    assert text.startswith('\ufeff{') and list(json.loads(text[1:])["permission"]) == ["*", "edit", *READ_ONLY_KEYS]
    assert run("approvals", "check", "--opencode-config", config).exit_code == 0


def test_apply_never_changes_the_users_own_key_and_stays_incomplete(run: Run, fake_tools: list[str],
                                                                   write: Callable[[str, str], Path]) -> None:
    config = write("opencode.json", json.dumps({"permission": {"agent-link_list_agents": "ask", "*": "ask"}}))
    applied = run("approvals", "apply", "--opencode-config", config, "--json")
    report = as_json(applied)["opencode"]
    assert applied.exit_code == 1 and not report["complete"]
    assert report["heldBack"] == [{"key": "agent-link_list_agents", "decision": "ask", "by": "*", "from": str(config),
                                   "why": "named"}]
    assert report["added"] == ["agent-link_agent_link_health", "agent-link_wait_for_agent"]
    assert json.loads(config.read_text())["permission"]["agent-link_list_agents"] == "ask"
    human = run("approvals", "check", "--opencode-config", config)
    assert human.exit_code == 1 and "HELD BACK" in human.stdout


def test_a_missing_config_is_created_only_when_something_is_needed(run: Run, fake_tools: list[str], tmp_path: Path) -> None:
    path = tmp_path / "new" / "opencode.json"
    assert run("approvals", "check", "--opencode-config", path).exit_code == 2  # check needs the file
    path.parent.mkdir()
    applied = run("approvals", "apply", "--opencode-config", path, "--json")
    assert applied.exit_code == 0 and as_json(applied)["opencode"]["added"] == [] and not path.exists()


@pytest.mark.parametrize("text", ['{"permission": {} // mine\n}', "[1]", '{"permission": ["ask"]}'])
def test_jsonc_and_wrong_shapes_are_refused_with_exit_2_and_nothing_written(
        text: str, run: Run, fake_tools: list[str], write: Callable[[str, str], Path]) -> None:
    config = write("opencode.json", text)
    result = run("approvals", "apply", "--opencode-config", config, "--all", "--json")
    if text.startswith('{"permission": ['):  # a list is no permission object: every tool still runs unasked
        assert result.exit_code == 0 and not as_json(result)["opencode"]["written"]
    else:
        assert result.exit_code == 2 and as_json(result)["error"]["kind"] == "malformed", result.stdout
    assert config.read_text() == text


def test_one_file_per_apply(run: Run, fake_tools: list[str], write: Callable[[str, str], Path]) -> None:
    a = write("opencode.json", "{}")
    result = run("approvals", "apply", "--opencode-config", a, "--claude-settings", a)
    assert result.exit_code == 2 and "--opencode-config" in result.stderr


def test_health_checks_opencodes_config_when_there_is_one(run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "oc" / "opencode.json"
    monkeypatch.setenv("OPENCODE_CONFIG", str(config))
    assert "opencode" not in as_json(run("health", "--json"))["sections"]["approvals"]
    config.parent.mkdir()
    config.write_text(json.dumps({"permission": {"*": "ask", "agent-link_wait_for_agent": "deny"}}))
    section = as_json(run("health", "--json"))["sections"]["approvals"]["opencode"]
    assert section["status"] == "incomplete" and "agent-link_list_agents" in section["missing"]
    assert section["heldBack"] == ["agent-link_wait_for_agent"]
    assert section["fix"] == "agent-link approvals apply --real-opencode"
    config.write_text("{ // mine\n \"permission\": {\"*\": \"ask\",},}")  # JSONC, as opencode reads it
    assert as_json(run("health", "--json"))["sections"]["approvals"]["opencode"]["status"] == "incomplete"
    config.write_text("{ /* mine\n}")
    section = as_json(run("health", "--json"))["sections"]["approvals"]["opencode"]
    assert section["status"] == "unreadable" and str(config) in section["message"]


# --- agents with a permission table of their own: their rules come after the top-level ones ---

AGENTS_CONFIG = {
    "permission": {"agent-link_*": "allow"},
    "agent": {
        "review": {"model": "m/x", "permission": {"*": "ask", "edit": "deny"}},  # its own wildcard decides
        "build": {"permission": {"edit": "deny"}},  # no key for our tools: follows the top level
        "off": {"disable": True, "permission": {"*": "deny"}},
        "mine": {"permission": {"*": "ask", "agent-link_list_agents": "deny"}},
        "one": {"permission": "ask"},
        "plain": {"model": "m/x"},
        "opener": {"permission": {"agent-link_*": "allow"}},
    },
}


def test_an_agents_own_wildcard_decides_for_it_whatever_the_top_level_says(tools: list[ToolInfo], tmp_path: Path) -> None:
    config = tmp_path / "opencode.json"
    result = check_data(config, json.loads(json.dumps(AGENTS_CONFIG)), tools)
    assert result.missing == [] and result.held_back == []  # the top level allows every tool
    agents = {a["agent"]: a for a in result.agents}
    assert sorted(agents) == ["build", "mine", "one", "opener", "review"]  # disabled and table-less agents left out
    assert agents["review"]["missing"] == READ_ONLY_KEYS and agents["review"]["heldBack"] == []
    assert agents["build"]["missing"] == [] and agents["build"]["heldBack"] == []
    assert agents["mine"]["missing"] == ["agent-link_agent_link_health", "agent-link_wait_for_agent"]
    assert agents["mine"]["heldBack"] == [{"key": "agent-link_list_agents", "decision": "deny",
                                           "by": "agent-link_list_agents", "from": str(config), "why": "named"}]
    assert [h["key"] for h in agents["one"]["heldBack"]] == READ_ONLY_KEYS and agents["one"]["missing"] == []
    assert not result.complete
    assert result.agent_missing() == {"review": READ_ONLY_KEYS, "mine": ["agent-link_agent_link_health", "agent-link_wait_for_agent"]}
    listed = next(t for t in result.tools if t["tool"] == "list_agents")
    assert listed["decision"] == "allow" and listed["agents"] == {"review": "ask", "mine": "deny", "one": "ask", "opener": "allow"}
    # the role-admin tools: the top level and the opener agent let them run unasked
    assert "agent-link_set_agent_role (agent opener)" in result.role_admin_allowed
    assert "agent-link_set_agent_role" in result.role_admin_allowed


def test_apply_extends_each_agents_own_table_and_never_its_keys(run: Run, fake_tools: list[str],
                                                                write: Callable[[str, str], Path]) -> None:
    config = write("opencode.json", json.dumps(AGENTS_CONFIG, indent=2) + "\n")
    checked = run("approvals", "check", "--opencode-config", config)
    assert checked.exit_code == 1
    assert "agent review: asked or denied by a wildcard key of agent.review.permission" in checked.stdout
    assert "HELD BACK: agent-link_list_agents is deny for agent mine" in checked.stdout

    applied = run("approvals", "apply", "--opencode-config", config, "--json")
    report = as_json(applied)["opencode"]
    assert applied.exit_code == 1 and report["written"] and not report["complete"]  # mine and one stay held back
    assert report["added"] == [] and report["addedToAgents"] == {
        "review": READ_ONLY_KEYS, "mine": ["agent-link_agent_link_health", "agent-link_wait_for_agent"]}
    data = json.loads(config.read_text())
    assert list(data["agent"]["review"]["permission"].items()) == [("*", "ask"), ("edit", "deny"), *[(k, "allow") for k in READ_ONLY_KEYS]]
    assert data["agent"]["review"]["model"] == "m/x"
    assert list(data["agent"]["mine"]["permission"]) == ["*", "agent-link_list_agents", "agent-link_agent_link_health",
                                                         "agent-link_wait_for_agent"]
    assert data["agent"]["mine"]["permission"]["agent-link_list_agents"] == "deny"
    assert data["agent"]["one"]["permission"] == "ask" and data["agent"]["off"] == AGENTS_CONFIG["agent"]["off"]
    assert data["agent"]["build"] == AGENTS_CONFIG["agent"]["build"] and data["permission"] == AGENTS_CONFIG["permission"]

    again = run("approvals", "apply", "--opencode-config", config, "--json")
    assert not as_json(again)["opencode"]["written"] and as_json(again)["opencode"]["addedToAgents"] == {}
    human = run("approvals", "apply", "--opencode-config", config, "--dry-run")
    assert "+ agent." not in human.stdout and "INCOMPLETE" in human.stdout


def test_a_markdown_agents_table_is_merged_over_the_configs_and_never_rewritten(
        tools: list[ToolInfo], run: Run, fake_tools: list[str], write: Callable[[str, str], Path]) -> None:
    config = write("opencode.json", json.dumps({"agent": {"review": {"permission": {"edit": "allow", "*": "allow"}},
                                                          "docs": {"permission": {"*": "ask"}}}}))
    folder = config.parent
    (folder / "agent" / "team").mkdir(parents=True)
    review = folder / "agent" / "review.md"
    review.write_text("---\ndescription: reviews\npermission:\n  \"*\": ask\n  bash: deny\n---\nYou review.\n")
    (folder / "agent" / "team" / "lead.md").write_text("---\npermission: deny\n---\nLead.\n")
    (folder / "modes").mkdir()
    (folder / "modes" / "quiet.md").write_text("---\ndisable: true\npermission:\n  \"*\": deny\n---\n")
    (folder / "agents").mkdir()
    (folder / "agents" / "broken.md").write_text("---\npermission: [unclosed\n---\n")  # opencode skips it too
    (folder / "agents" / "docs.md").write_text("---\ndescription: no permission here\n---\n")
    strict = folder / "agent" / "strict.md"
    strict.write_text("---\npermission:\n  \"*\": ask\n---\n")
    lead = folder / "agent" / "team" / "lead.md"
    before = review.read_text()

    result = opencode.check(service.opencode_file(config, {}), tools, target=0)
    agents = {a["agent"]: a for a in result.agents}
    assert sorted(agents) == ["docs", "review", "strict", "team/lead"]
    # the file's "*" takes the config's place (where "*": allow was), so a key added after it in the config decides
    assert agents["review"]["missing"] == READ_ONLY_KEYS and agents["review"]["heldBack"] == []
    assert [(h["decision"], h["from"], h["why"]) for h in agents["team/lead"]["heldBack"]] == [("deny", str(lead), "action")] * 3
    # a markdown agent the config has no table for: apply writes the config only, so the file decides
    assert [(h["key"], h["by"], h["from"], h["why"]) for h in agents["strict"]["heldBack"]] == [
        (k, "*", str(strict), "layer") for k in READ_ONLY_KEYS]
    assert agents["docs"]["missing"] == READ_ONLY_KEYS  # its file has no table: the config's decides

    applied = run("approvals", "apply", "--opencode-config", config, "--json")
    report = as_json(applied)["opencode"]
    assert applied.exit_code == 1 and report["addedToAgents"] == {"review": READ_ONLY_KEYS, "docs": READ_ONLY_KEYS}
    assert review.read_text() == before
    after = {a["agent"]: a for a in report["agents"]}
    assert after["review"] == {"agent": "review", "missing": [], "heldBack": []}
    human = run("approvals", "check", "--opencode-config", config)
    assert "agent-link_list_agents is deny for agent team/lead" in human.stdout and str(lead) in human.stdout
    assert (f'add "agent-link_list_agents": "allow" at the end of agent.strict.permission in {strict} by hand'
            in human.stdout), human.stdout


def test_layers_merge_as_remedas_merge_deep_and_name_each_values_layer(tmp_path: Path) -> None:
    a = Layer("a", None, "global", {"permission": {"a": "allow", "*": "allow", "n": {"x": "ask"}}, "agent": {"r": {"model": "m"}}})
    b = Layer("b", None, "project", {"permission": {"*": "ask", "n": {"y": "deny"}, "b": "deny"}, "mode": {"r": {"permission": "ask"}}})
    merged = opencode_layers.merge([a, Layer("absent", None, "global"), b], {"OPENCODE_PERMISSION": '{"a": "deny", "c": "ask"}'})
    assert list(merged.data["permission"].items()) == [("a", "deny"), ("*", "ask"), ("n", {"x": "ask", "y": "deny"}),
                                                        ("b", "deny"), ("c", "ask")]
    assert [merged.source("permission", k) for k in ("a", "*", "b", "c")] == ["OPENCODE_PERMISSION", "b", "b", "OPENCODE_PERMISSION"]
    assert merged.source("permission", "n", "x") == "a" and merged.source("permission", "n", "y") == "b"
    # the config's mode entries become primary agents, merged over agent.<name>
    assert merged.data["agent"]["r"] == {"model": "m", "permission": "ask", "mode": "primary"}
    assert merged.source("agent", "r", "permission") == "b" and merged.source("agent", "r", "model") == "a"
    # a non-object replaces an object, and the other way round
    flip = opencode_layers.merge([b, Layer("c", None, "content", {"permission": "ask"}), a], {"OPENCODE_PERMISSION": "not json"})
    assert flip.data["permission"] == a.data["permission"] and flip.source("permission", "b") is None  # type: ignore[index]
    assert opencode_layers.front_matter("no front matter") is None and opencode_layers.front_matter("---\n- a list\n---\n") is None


def test_an_edit_made_while_apply_writes_an_agents_keys_is_kept(run: Run, fake_tools: list[str], write: Callable[[str, str], Path],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_link_approvals import files

    config = write("opencode.json", json.dumps({"agent": {"review": {"permission": {"*": "ask"}}}}))
    real, done = files._current, []

    def current(target: Path) -> bytes | None:
        if not done:  # opencode's own UI saves a new agent just before our swap
            done.append(1)
            target.write_text(json.dumps({"agent": {"review": {"permission": {"*": "ask"}},
                                                    "new": {"permission": {"*": "deny"}}}}))
        return real(target)

    monkeypatch.setattr(files, "_current", current)
    applied = run("approvals", "apply", "--opencode-config", config, "--json")
    report = as_json(applied)["opencode"]
    assert applied.exit_code == 0 and report["complete"], applied.stdout
    data = json.loads(config.read_text())
    assert data["agent"]["new"]["permission"]["*"] == "deny"  # the other edit is kept, and planned on
    assert report["addedToAgents"] == {"review": READ_ONLY_KEYS, "new": READ_ONLY_KEYS}
    assert all(data["agent"][name]["permission"][k] == "allow" for name in ("review", "new") for k in READ_ONLY_KEYS)


def test_health_names_the_agent_a_missing_or_held_back_key_is_for(run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "oc" / "opencode.json"
    config.parent.mkdir()
    config.write_text(json.dumps({"agent": {"review": {"permission": {"*": "ask", "agent-link_list_agents": "deny"}}}}))
    monkeypatch.setenv("OPENCODE_CONFIG", str(config))
    section = as_json(run("health", "--json"))["sections"]["approvals"]["opencode"]
    assert section["status"] == "incomplete"
    assert "agent-link_wait_for_agent (agent review)" in section["missing"]
    assert section["heldBack"] == ["agent-link_list_agents (agent review)"]
