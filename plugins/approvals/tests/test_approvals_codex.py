"""Codex config.toml: every key form, the approval decision per mode, and the byte-preserving
append (comments, odd formatting, CRLF, tables that already exist)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from agent_link_approvals import codex
from agent_link_approvals.files import ConfigFileError
from agent_link_approvals.toollist import ToolInfo

PID = "codex-agent-link@agent-link"
SRV = "codex-agent-link"
ENABLED = f'[plugins."{PID}"]\nenabled = true\n'
READ_ONLY = ["agent_link_health", "list_agents", "wait_for_agent"]


def server(mode: str) -> str:
    return f'[plugins."{PID}".mcp_servers.{SRV}]\ndefault_tools_approval_mode = "{mode}"\n'


def tool(name: str, mode: str = "approve") -> str:
    return f'[plugins."{PID}".mcp_servers.{SRV}.tools.{name}]\napproval_mode = "{mode}"\n'


def run_check(text: str, tools: list[ToolInfo], all_tools: bool = False) -> codex.CodexCheck:
    return codex.check(tomllib.loads(text), PID, [SRV], tools, all_tools)


def approved(result: codex.CodexCheck) -> set[str]:
    return {a.tool.name for a in result.approvals if a.approved}


# -- the decision (what the real Codex 0.169.0 did, see test_approvals_realhost.py) ----------

RO = ToolInfo("r", True, False, False)
SIDE = ToolInfo("s", False, False, False)
DESTRUCTIVE = ToolInfo("d", False, True, False)
BARE = ToolInfo("b", None, None, None)
OPEN = ToolInfo("o", False, False, True)


@pytest.mark.parametrize(("mode", "asks"), [
    ("approve", {"r": False, "s": False, "d": False, "b": False, "o": False}),
    ("prompt", {"r": True, "s": True, "d": True, "b": True, "o": True}),
    ("writes", {"r": False, "s": True, "d": True, "b": True, "o": True}),
    ("auto", {"r": False, "s": False, "d": True, "b": True, "o": True}),
    ("bogus", {"r": True, "s": True, "d": True, "b": True, "o": True}),
])
def test_needs_approval_per_mode(mode: str, asks: dict[str, bool]) -> None:
    assert {t.name: codex.needs_approval(mode, t) for t in (RO, SIDE, DESTRUCTIVE, BARE, OPEN)} == asks


def test_read_only_and_destructive_wins_in_auto() -> None:
    assert codex.needs_approval("auto", ToolInfo("x", True, True, False)) is True


# -- configs: missing, partial, complete ------------------------------------------------------

def test_empty_config_lacks_only_the_enabled_plugin(tools: list[ToolInfo]) -> None:
    result = run_check("", tools)
    assert result.enabled is None and not result.complete
    assert result.missing == []  # auto mode already runs read-only tools
    assert result.additions == {"plugins": {PID: {"enabled": True}}}
    assert result.required == sorted(READ_ONLY)


def test_installed_plugin_with_defaults_is_complete_and_reports_auto_approved_writes(tools: list[ToolInfo]) -> None:
    result = run_check(ENABLED, tools)
    assert result.complete and result.additions == {}
    auto, side = result.side_effecting()
    assert auto == ["message_agent", "reply_agent_link_message"]
    assert len(side) == 6 and result.role_admin_approved() == []


def test_server_prompt_makes_every_read_only_tool_missing(tools: list[ToolInfo]) -> None:
    result = run_check(ENABLED + server("prompt"), tools)
    assert not result.complete
    assert sorted(t for _, t in result.missing) == sorted(READ_ONLY)
    assert result.snippet() == "\n".join(tool(name) for name in sorted(READ_ONLY))


def test_partial_tool_tables_leave_only_the_rest_missing(tools: list[ToolInfo]) -> None:
    result = run_check(ENABLED + server("prompt") + tool("list_agents"), tools)
    assert [t for _, t in result.missing] == ["agent_link_health", "wait_for_agent"]
    assert "list_agents" in approved(result)


def test_complete_with_explicit_tool_tables(tools: list[ToolInfo]) -> None:
    text = ENABLED + server("prompt") + "".join(tool(name) for name in READ_ONLY)
    result = run_check(text, tools)
    assert result.complete and approved(result) == set(READ_ONLY)
    assert result.approved_required() == 3


def test_server_writes_approves_read_only_only(tools: list[ToolInfo]) -> None:
    result = run_check(ENABLED + server("writes"), tools)
    assert result.complete and approved(result) == set(READ_ONLY)


def test_server_approve_approves_role_admin_too_and_is_reported(tools: list[ToolInfo]) -> None:
    result = run_check(ENABLED + server("approve"), tools, all_tools=True)
    assert result.complete
    assert result.role_admin_approved() == ["clear_agent_role", "set_agent_override_policy", "set_agent_role"]
    assert result.to_dict()["roleAdmin"]["autoApproved"] == result.role_admin_approved()


def test_tool_table_beats_the_server_default_both_ways(tools: list[ToolInfo]) -> None:
    result = run_check(ENABLED + server("approve") + tool("list_agents", "prompt"), tools)
    assert "list_agents" not in approved(result) and "message_agent" in approved(result)
    assert result.kept == [(SRV, "list_agents", "prompt")]  # the user's choice: not added, not complete
    assert not result.complete and result.additions == {}


def test_all_requires_every_tool_but_role_admin(tools: list[ToolInfo]) -> None:
    result = run_check(ENABLED, tools, all_tools=True)
    assert "set_agent_role" not in result.required and "message_agent" in result.required
    assert [t for _, t in result.missing] == ["archive_codex_thread"]  # destructive: auto asks
    tables = result.additions["plugins"][PID]["mcp_servers"][SRV]["tools"]
    assert set(tables) == {"archive_codex_thread"}


def test_disabled_plugin_is_incomplete_and_not_flipped(tools: list[ToolInfo]) -> None:
    result = run_check(f'[plugins."{PID}"]\nenabled = false\n', tools)
    assert result.enabled is False and not result.complete and result.additions == {}


def test_invalid_modes_are_reported(tools: list[ToolInfo]) -> None:
    result = run_check(ENABLED + server("sometimes") + tool("message_agent", "yes"), tools)
    assert not result.complete and len(result.invalid) == 2
    assert "'sometimes'" in result.invalid[0]


def test_another_plugin_id_and_several_servers(tools: list[ToolInfo]) -> None:
    text = '[plugins."x@y"]\nenabled = true\n[plugins."x@y".mcp_servers.a]\ndefault_tools_approval_mode = "prompt"\n'
    result = codex.check(tomllib.loads(text), "x@y", ["a", "b"], tools)
    assert {s for s, _ in result.missing} == {"a"}  # server b keeps the default auto mode


# -- reading ----------------------------------------------------------------------------------

def test_malformed_toml_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('model = "x"\n[plugins\nenabled = true\n')
    with pytest.raises(ConfigFileError) as err:
        codex.load_config(path)
    assert err.value.kind == "malformed" and "line 2" in err.value.message


def test_non_utf8_and_missing_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b'a = "x"\nb = "\xff"\n')
    with pytest.raises(ConfigFileError) as err:
        codex.load_config(bad)
    assert err.value.kind == "malformed" and "line 2" in err.value.message
    with pytest.raises(ConfigFileError) as err:
        codex.load_config(tmp_path / "nope.toml")
    assert err.value.kind == "missing"
    with pytest.raises(ConfigFileError) as err:
        codex.load_config(tmp_path)
    assert err.value.kind == "unreadable"


# -- appending --------------------------------------------------------------------------------

ODD = (
    "# my Codex config, with comments\n"
    'model   =   "gpt-x"     # odd spacing stays\n'
    "approval_policy='on-request'\n\n\n"
    "[ plugins . \"codex-agent-link@agent-link\" ]   # spaced header\n"
    "enabled=true\n"
    f'[plugins."{PID}".mcp_servers."codex-agent-link"]\n'
    'default_tools_approval_mode = "prompt"  # ask me\n'
    "[tui]\nnotifications = [ 'a',\n  'b', ]  # no trailing newline after this"
)


def test_append_keeps_every_byte_and_reparses_to_the_merge(tools: list[ToolInfo]) -> None:
    data = tomllib.loads(ODD)
    result = codex.check(data, PID, [SRV], tools)
    plan = codex.plan_append(ODD, data, result.additions)
    assert plan.changed and plan.by_hand == []
    assert plan.new_text.startswith(ODD + "\n")
    assert tomllib.loads(plan.new_text) == codex.merge(data, result.additions)
    assert codex.check(tomllib.loads(plan.new_text), PID, [SRV], tools).complete
    assert "[tui]" in plan.new_text and plan.new_text.count("approval_mode") == 3 + 1


def test_append_to_crlf_and_empty_files(tools: list[ToolInfo]) -> None:
    text = 'model = "x"\r\n' + ENABLED.replace("\n", "\r\n") + server("prompt").replace("\n", "\r\n")
    data = tomllib.loads(text)
    plan = codex.plan_append(text, data, codex.check(data, PID, [SRV], tools).additions)
    assert plan.new_text.startswith(text) and "\n" not in plan.new_text.replace("\r\n", "")
    empty = codex.plan_append("", {}, codex.check({}, PID, [SRV], tools).additions)
    assert tomllib.loads(empty.new_text) == {"plugins": {PID: {"enabled": True}}}


def test_existing_table_cannot_be_appended_to_and_becomes_a_hand_edit(tools: list[ToolInfo]) -> None:
    # the plugin's table exists without `enabled`, and list_agents's table exists without a mode
    text = f'[plugins."{PID}"]\nnote = "mine"\n' + server("prompt") + \
        f'[plugins."{PID}".mcp_servers.{SRV}.tools.list_agents]\nenabled = true\n'
    data = tomllib.loads(text)
    result = codex.check(data, PID, [SRV], tools)
    plan = codex.plan_append(text, data, result.additions)
    assert {h for h, _ in plan.by_hand} == {
        f'[plugins."{PID}"]', f'[plugins."{PID}".mcp_servers.{SRV}.tools.list_agents]'}
    assert ('[plugins."codex-agent-link@agent-link"]', "enabled = true") in plan.by_hand
    assert plan.new_text.startswith(text)
    assert set(plan.appended["plugins"][PID]["mcp_servers"][SRV]["tools"]) == {"agent_link_health", "wait_for_agent"}
    assert tomllib.loads(plan.new_text) == codex.merge(data, plan.appended)


def test_inline_table_cannot_be_extended(tools: list[ToolInfo]) -> None:
    text = f'plugins = {{ "{PID}" = {{ enabled = true, mcp_servers = {{ {SRV} = {{ default_tools_approval_mode = "prompt" }} }} }} }}\n'
    data = tomllib.loads(text)
    result = codex.check(data, PID, [SRV], tools)
    plan = codex.plan_append(text, data, result.additions)
    assert not plan.changed and len(plan.by_hand) == 3


def test_nothing_missing_appends_nothing(tools: list[ToolInfo]) -> None:
    data = tomllib.loads(ENABLED)
    plan = codex.plan_append(ENABLED, data, codex.check(data, PID, [SRV], tools).additions)
    assert not plan.changed and plan.new_text == ENABLED


def test_a_top_level_server_of_the_same_name_shadows_the_plugins(tools: list[ToolInfo]) -> None:
    """The original Agent Link's ``[mcp_servers.codex-agent-link]``: Codex runs it instead of the
    plugin's server, so no approval makes agent-link's tools reach a thread."""
    text = ENABLED + server("approve") + f'\n[mcp_servers.{SRV}]\ncommand = "/usr/bin/true"\n'
    result = run_check(text, tools)
    assert result.shadowed == [SRV] and not result.complete
    assert result.to_dict()["shadowedBy"] == [f"[mcp_servers.{SRV}]"]
    assert run_check(ENABLED + server("approve"), tools).shadowed == []
