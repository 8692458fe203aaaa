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
from agent_link_approvals import opencode
from agent_link_approvals.toollist import ToolInfo
from click.testing import Result

Run = Callable[..., Result]
READ_ONLY_KEYS = ["agent-link_agent_link_health", "agent-link_list_agents", "agent-link_wait_for_agent"]


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
    result = opencode.check(tmp_path / "opencode.json", b"{}", data, tools)
    assert result.required == READ_ONLY_KEYS
    assert result.missing == ["agent-link_agent_link_health", "agent-link_list_agents"]
    assert result.held_back == [{"key": "agent-link_wait_for_agent", "decision": "deny", "by": "agent-link_wait_for_agent"}]
    assert result.role_admin_allowed == ["agent-link_set_agent_role"] and not result.complete
    # no permission at all: opencode runs MCP tools unasked, so nothing is missing, and it warns of the role-admin tools
    plain = opencode.check(tmp_path / "opencode.json", None, {}, tools, all_tools=True)
    assert plain.complete and plain.missing == [] and len(plain.role_admin_allowed) == 3
    # one action for every tool cannot be amended key by key
    single = opencode.check(tmp_path / "opencode.json", b"{}", {"permission": "ask"}, tools)
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


def test_apply_never_changes_the_users_own_key_and_stays_incomplete(run: Run, fake_tools: list[str],
                                                                   write: Callable[[str, str], Path]) -> None:
    config = write("opencode.json", json.dumps({"permission": {"agent-link_list_agents": "ask", "*": "ask"}}))
    applied = run("approvals", "apply", "--opencode-config", config, "--json")
    report = as_json(applied)["opencode"]
    assert applied.exit_code == 1 and not report["complete"]
    assert report["heldBack"] == [{"key": "agent-link_list_agents", "decision": "ask", "by": "*"}]
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
    assert section["fix"] == f"agent-link approvals apply --opencode-config {config}"
    config.write_text("{ // mine\n}")
    assert as_json(run("health", "--json"))["sections"]["approvals"]["opencode"]["status"] == "unreadable"


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
    result = opencode.check(tmp_path / "opencode.json", b"{}", json.loads(json.dumps(AGENTS_CONFIG)), tools)
    assert result.missing == [] and result.held_back == []  # the top level allows every tool
    agents = {a["agent"]: a for a in result.agents}
    assert sorted(agents) == ["build", "mine", "one", "opener", "review"]  # disabled and table-less agents left out
    assert agents["review"]["missing"] == READ_ONLY_KEYS and agents["review"]["heldBack"] == []
    assert agents["build"]["missing"] == [] and agents["build"]["heldBack"] == []
    assert agents["mine"]["missing"] == ["agent-link_agent_link_health", "agent-link_wait_for_agent"]
    assert agents["mine"]["heldBack"] == [{"key": "agent-link_list_agents", "decision": "deny",
                                           "by": "agent-link_list_agents", "file": None}]
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
    before = review.read_text()

    result = opencode.check(config, b"{}", json.loads(config.read_text()), tools)
    agents = {a["agent"]: a for a in result.agents}
    assert sorted(agents) == ["docs", "review", "team/lead"]
    # the file's "*" takes the config's place (before "*": allow's old spot) and decides: held back, naming the file
    assert agents["review"]["file"] == str(review) and agents["review"]["missing"] == []
    assert [(h["key"], h["by"], h["file"]) for h in agents["review"]["heldBack"]] == [(k, "*", str(review)) for k in READ_ONLY_KEYS]
    assert [h["decision"] for h in agents["team/lead"]["heldBack"]] == ["deny"] * 3
    assert agents["docs"]["missing"] == READ_ONLY_KEYS and agents["docs"]["file"] is None  # its file has no table

    applied = run("approvals", "apply", "--opencode-config", config, "--json")
    report = as_json(applied)["opencode"]
    assert applied.exit_code == 1 and report["addedToAgents"] == {"docs": READ_ONLY_KEYS}
    assert review.read_text() == before
    human = run("approvals", "check", "--opencode-config", config)
    assert f"is ask for agent review ({review})" in human.stdout and "add \"agent-link_list_agents: allow\"" in human.stdout


def test_merge_tables_keeps_the_configs_order_as_opencode_does() -> None:
    merged = opencode.merge_tables({"a": "allow", "*": "allow", "n": {"x": "ask"}}, {"*": "ask", "n": {"y": "deny"}, "b": "deny"})
    assert list(merged.items()) == [("a", "allow"), ("*", "ask"), ("n", {"x": "ask", "y": "deny"}), ("b", "deny")]
    assert opencode.merge_tables({"*": "allow"}, "ask") == "ask" and opencode.merge_tables("ask", {"a": "allow"}) == {"a": "allow"}
    assert opencode.front_matter("no front matter") is None and opencode.front_matter("---\n- a list\n---\n") is None


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
