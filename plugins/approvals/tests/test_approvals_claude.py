"""Claude Code settings: rule forms, deny/ask overriding allow across files, malformed JSON,
and adding allow rules without disturbing the rest of the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_link_approvals import claude
from agent_link_approvals.files import ConfigFileError
from agent_link_approvals.toollist import ToolInfo

SRV = "mcp__plugin_agent-link_codex-agent-link"
READ_ONLY = ["agent_link_health", "list_agents", "wait_for_agent"]


def rule(name: str) -> str:
    return f"{SRV}__{name}"


def settings(scope: str, perms: dict[str, list[str]], tmp_path: Path) -> claude.SettingsFile:
    return claude.SettingsFile(scope, tmp_path / f"{scope}.json", b"", {"permissions": perms})


def run_check(files: list[claude.SettingsFile], tools: list[ToolInfo], all_tools: bool = False) -> claude.ClaudeCheck:
    return claude.check(files, "agent-link", ["codex-agent-link"], tools, all_tools, "agent-link@agent-link")


def test_rule_names_follow_claude_codes_normalisation() -> None:
    from agent_link_approvals.manifests import claude_rule, claude_rule_server

    assert claude_rule_server("agent-link", "codex-agent-link") == SRV
    assert claude_rule("my.plugin", "srv x", "t") == "mcp__plugin_my_plugin_srv_x__t"


@pytest.mark.parametrize(("kind", "form", "matches"), [
    ("allow", rule("list_agents"), True),
    ("allow", SRV, True),
    ("allow", f"{SRV}__*", True),
    ("allow", f"{SRV}__list_*", False),  # unverified allow globs do not count
    ("allow", "mcp__*", False),
    ("allow", rule("list_agents_x"), False),
    ("deny", f"{SRV}__list_*", True),  # a deny glob that may match is assumed to
    ("deny", "mcp__*", True),
    ("ask", SRV, True),
    ("deny", "mcp__plugin_other_agent-link", False),
])
def test_rule_forms(kind: str, form: str, matches: bool) -> None:
    assert claude.rule_matches(form, kind, SRV, rule("list_agents")) is matches


def test_no_rules_every_read_only_tool_missing(tools: list[ToolInfo], tmp_path: Path) -> None:
    result = run_check([claude.SettingsFile("user", tmp_path / "s.json")], tools)
    assert not result.complete and result.missing == [rule(n) for n in READ_ONLY]


def test_exact_rules_complete_and_side_effecting_counted(tools: list[ToolInfo], tmp_path: Path) -> None:
    result = run_check([settings("user", {"allow": [rule(n) for n in READ_ONLY] + [rule("message_agent")]}, tmp_path)], tools)
    assert result.complete
    allowed, side = result.side_effecting()
    assert allowed == ["message_agent"] and len(side) == 6


def test_server_wide_allow_covers_all_and_flags_role_admin(tools: list[ToolInfo], tmp_path: Path) -> None:
    result = run_check([settings("user", {"allow": [SRV]}, tmp_path)], tools, all_tools=True)
    assert result.complete
    assert result.role_admin_allowed() == ["clear_agent_role", "set_agent_override_policy", "set_agent_role"]


def test_deny_in_another_file_overrides_an_allow(tools: list[ToolInfo], tmp_path: Path) -> None:
    user = settings("user", {"allow": [f"{SRV}__*"]}, tmp_path)
    local = settings("local", {"deny": [rule("list_agents")], "ask": [rule("wait_for_agent")]}, tmp_path)
    result = run_check([user, local], tools)
    assert not result.complete and result.missing == []
    over = {p.tool.name: (p.decision, p.by[0]["scope"]) for p in result.overridden}
    assert over == {"list_agents": ("deny", "local"), "wait_for_agent": ("ask", "local")}
    assert result.to_dict()["overridden"][0]["by"][0]["rule"] == rule("list_agents")


def test_enabled_plugins_reported(tools: list[ToolInfo], tmp_path: Path) -> None:
    f = claude.SettingsFile("user", tmp_path / "s.json", b"", {"enabledPlugins": {"agent-link@agent-link": True}})
    assert run_check([f], tools).plugin_enabled is True


def test_non_string_and_odd_entries_are_ignored(tools: list[ToolInfo], tmp_path: Path) -> None:
    f = claude.SettingsFile("user", tmp_path / "s.json", b"", {"permissions": {"allow": [1, None, SRV], "deny": "x"}})
    assert run_check([f], tools).complete


# -- files ------------------------------------------------------------------------------------

def test_malformed_json_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{\n  "permissions": {\n    "allow": [,]\n  }\n}\n')
    with pytest.raises(ConfigFileError) as err:
        claude.load_settings("file", path)
    assert err.value.kind == "malformed" and "line 3" in err.value.message
    path.write_text("[1, 2]")
    with pytest.raises(ConfigFileError, match="not a JSON object"):
        claude.load_settings("file", path)


def test_real_settings_are_user_project_local(tmp_path: Path) -> None:
    config_dir = tmp_path / "cfg"
    config_dir.mkdir()
    (config_dir / "settings.json").write_text('{"permissions": {"allow": []}}')
    project = tmp_path / "proj"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "settings.local.json").write_text("{}")
    files = claude.real_settings({"CLAUDE_CONFIG_DIR": str(config_dir)}, project)
    assert [(f.scope, f.data is not None) for f in files] == [("user", True), ("project", False), ("local", True)]
    assert claude.user_settings_path({"HOME": "/h"}) == Path("/h/.claude/settings.json")


def test_plan_rules_keeps_keys_order_and_indent(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{\n    "model": "x",\n    "permissions": {"deny": ["Bash"], "allow": ["Read"]},\n    "z": 1\n}\n')
    old, new, data = claude.plan_rules(claude.load_settings("file", path), [rule("list_agents"), "Read"])
    assert json.loads(new) == data and list(data) == ["model", "permissions", "z"]
    assert data["permissions"] == {"deny": ["Bash"], "allow": ["Read", rule("list_agents")]}
    assert new.startswith('{\n    "model"') and old == path.read_text()


def test_plan_rules_refuses_a_permissions_of_the_wrong_shape(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{"permissions": {"allow": "Read"}}')
    with pytest.raises(ConfigFileError, match="permissions.allow"):
        claude.plan_rules(claude.load_settings("file", path), [rule("x")])
    path.write_text('{"permissions": []}')
    with pytest.raises(ConfigFileError, match="not a JSON object"):
        claude.plan_rules(claude.load_settings("file", path), [rule("x")])
