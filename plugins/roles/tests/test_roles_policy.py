"""Override policy decisions: launcher effort, policy entries, unreadable table, the workspace rule."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from agent_link_core.errors import AgentLinkError
from agent_link_core.app import App
from agent_link_core.model import Caller
from agent_link_roles.policy import evaluate_override, workspace_of
from agent_link_roles.table import table_path

TARGET = "codex:thread1"


def policy_file(state: Path, policy: dict[str, Any], roles: dict[str, Any] | None = None) -> None:
    state.mkdir(parents=True, exist_ok=True)
    table_path(state).write_text(json.dumps({"version": 1, "roles": roles or {}, "overridePolicy": policy}))


def decide(state: Path, sender: str, setting: str, value: str = "x", **context: Any) -> dict[str, Any]:
    return evaluate_override(state, TARGET, sender, setting, value, context)


@pytest.mark.parametrize(("setting", "reason"), [("model", "model_switch_requires_fork_or_opt_in"), ("effort", "effort_not_permitted")])
def test_nothing_is_allowed_by_default(isolated_env: Path, setting: str, reason: str) -> None:
    decision = decide(isolated_env, "claude:s1", setting)
    assert decision["allowed"] is False and decision["reason"] == reason


def test_the_launcher_may_change_effort_only(isolated_env: Path) -> None:
    assert decide(isolated_env, "claude:s1", "effort", launchedBy="claude:s1") == {"allowed": True, "grantedBy": {"rule": "launcher"}}
    assert decide(isolated_env, "claude:s1", "model", launchedBy="claude:s1")["allowed"] is False
    assert decide(isolated_env, "claude:s2", "effort", launchedBy="claude:s1")["allowed"] is False


def test_policy_entries_match_senders(isolated_env: Path) -> None:
    policy_file(isolated_env,
                {TARGET: {"model": ["claude:s1"]}, "role:builder": {"effort": ["role:planner"], "model": ["*"]}},
                roles={"builder": {"address": TARGET}, "planner": {"address": "claude:p"}})
    assert decide(isolated_env, "claude:s1", "model")["grantedBy"] == {"rule": "policy", "policyKey": TARGET, "entry": "claude:s1"}
    assert decide(isolated_env, "codex:other", "model")["grantedBy"] == {"rule": "policy", "policyKey": "role:builder", "entry": "*"}
    assert decide(isolated_env, "external", "model")["allowed"] is False  # "*" needs an identity
    assert decide(isolated_env, "claude:p", "effort")["grantedBy"]["entry"] == "role:planner"
    assert decide(isolated_env, "claude:s1", "effort")["allowed"] is False


def test_role_keys_apply_only_while_the_target_holds_the_role(isolated_env: Path) -> None:
    policy_file(isolated_env, {"role:builder": {"model": ["*"]}}, roles={"builder": {"address": "codex:someone-else"}})
    assert decide(isolated_env, "claude:s1", "model")["allowed"] is False


def test_an_unreadable_table_allows_nothing_but_the_launcher(isolated_env: Path) -> None:
    isolated_env.mkdir(parents=True, exist_ok=True)
    table_path(isolated_env).write_text("{ not json")
    decision = decide(isolated_env, "claude:s1", "model")
    assert decision["allowed"] is False and "cannot be read" in decision["message"]
    assert decide(isolated_env, "claude:s1", "effort", launchedBy="claude:s1")["allowed"] is True


def make_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "src" / "pkg").mkdir(parents=True)
    (repo / ".git").mkdir()
    return repo


def test_workspace_is_the_git_top_level_or_the_cwd(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    assert workspace_of(str(repo / "src" / "pkg")) == os.path.realpath(repo)
    plain = tmp_path / "plain"
    plain.mkdir()
    assert workspace_of(str(plain)) == os.path.realpath(plain)


def test_cwd_inside_the_workspace_is_allowed_by_policy(isolated_env: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    policy_file(isolated_env, {TARGET: {"cwd": ["*"]}})
    ok = decide(isolated_env, "claude:s1", "cwd", str(repo / "src"), currentCwd=str(repo / "src" / "pkg"))
    assert ok["allowed"] is True
    anyone = decide(isolated_env, "claude:s9", "cwd", str(repo), currentCwd=str(repo / "src"))
    assert anyone["allowed"] is True  # "*": anyone with an identity
    policy_file(isolated_env, {})
    assert decide(isolated_env, "claude:s1", "cwd", str(repo / "src"), currentCwd=str(repo))["reason"] == "cwd_change_not_permitted"


def test_cwd_outside_the_workspace_is_refused_even_when_allowed(isolated_env: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, repo / "src" / "escape")  # looks inside, resolves outside
    policy_file(isolated_env, {TARGET: {"cwd": ["*"]}})
    for value in (str(outside), str(repo / "src" / "escape"), str(tmp_path)):
        decision = decide(isolated_env, "claude:s1", "cwd", value, currentCwd=str(repo))
        assert decision["allowed"] is False and decision["reason"] == "cwd_outside_workspace", value
        assert decision["workspace"] == os.path.realpath(repo)
    assert decide(isolated_env, "claude:s1", "cwd", str(repo))["reason"] == "cwd_outside_workspace"  # current cwd unknown


def test_bad_requests_are_invalid_arguments(isolated_env: Path) -> None:
    with pytest.raises(AgentLinkError) as e:
        decide(isolated_env, "claude:s1", "cwd", "relative/dir", currentCwd="/tmp")
    assert e.value.code == "invalid_arguments"
    with pytest.raises(AgentLinkError):
        decide(isolated_env, "claude:s1", "temperature")


class CodexHooks:
    """The codex plugin's specification of the hook (the codex harness calls it), without its harness."""

    AGENT_LINK_HOOKSPECS = {"agent_link_codex.hookspecs": ("agent_link_check_override",)}


def test_harnesses_ask_through_the_hook(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("agent_link_codex.hookspecs")
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "codex claude")
    app = App.create(extra_plugins=(("codex-hooks", CodexHooks()),))
    try:
        policy_file(isolated_env, {TARGET: {"model": ["claude:s1"]}})
        allowed = app.hooks.call("agent_link_check_override", target=TARGET, sender=Caller("claude:s1", "runtime_context", "claude"),
                                 setting="model", value="gpt-x", context={})
        assert allowed == {"allowed": True, "grantedBy": {"rule": "policy", "policyKey": TARGET, "entry": "claude:s1"}}
        refused = app.hooks.call("agent_link_check_override", target=TARGET, sender=Caller(), setting="model", value="gpt-x", context={})
        assert refused["allowed"] is False and refused["reason"] == "model_switch_requires_fork_or_opt_in"
    finally:
        app.close()
