"""Entry point of the agent-link approvals plugin, registered under the ``agent_link`` group.

Hooks:

* ``agent_link_register_settings``: the checker's settings (:mod:`agent_link_approvals.settings`);
* ``agent_link_register_commands``: the ``approvals`` CLI group;
* ``agent_link_health``: the ``approvals`` section: for each host whose config is found (the
  real ``$CODEX_HOME/config.toml``; the Claude Code user settings plus the current folder's
  project and local settings; opencode's config layers for the current folder,
  :mod:`agent_link_approvals.opencode_layers`), whether the read-only tools run without asking and the
  command that fixes it. The tools come from this process's registry (no server is started).
"""

from __future__ import annotations

import os
from collections.abc import Callable


from agent_link_core import hookimpl
from agent_link_core.config import Setting

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any
    import click
    from agent_link_core.app import App


@hookimpl
def agent_link_register_settings(register: Callable[[Setting], None]) -> None:
    from agent_link_approvals.settings import SETTINGS

    for setting in SETTINGS:
        register(setting)


@hookimpl
def agent_link_register_commands(cli: click.Group) -> None:
    from agent_link_core.contribute import command

    cli.add_command(command("approvals", "agent_link_approvals.cli:command_group",
                            "Check or apply the tool approvals Codex, Claude Code and opencode keep for agent-link's tools."))


def _section(check: Callable[[], Any], fix: str) -> dict[str, Any]:
    from agent_link_approvals.files import ConfigFileError
    from agent_link_approvals.service import CannotCheck

    try:
        outcome = check()
    except ConfigFileError as exc:
        return {"status": "unreadable", "message": exc.message, "fix": None}
    except CannotCheck as exc:
        return {"status": "unknown", "message": str(exc), "fix": None}
    report = outcome.report
    # Codex reports (server, tool) pairs, Claude Code the rules to add, opencode its tool keys
    missing = sorted({m["tool"] if isinstance(m, dict) else m.rsplit("__", 1)[-1] for m in report["missing"]})
    held = sorted({o["tool"] for o in report.get("overridden", [])} | {k["tool"] for k in report.get("keptByYou", [])}
                  | {h["key"] for h in report.get("heldBack", [])})
    for agent in report.get("agents", []):  # opencode's agents with a permission table of their own
        missing += [f"{key} (agent {agent['agent']})" for key in agent["missing"]]
        held += [f"{h['key']} (agent {agent['agent']})" for h in agent["heldBack"]]
    return {"status": "complete" if outcome.complete else "incomplete", "missing": missing, "heldBack": held,
            "fix": None if outcome.complete else fix}


@hookimpl
def agent_link_health(app: App) -> tuple[str, dict[str, Any]]:
    import shlex
    from pathlib import Path  # here, not at import: every command loads this plugin

    from agent_link_approvals import claude, opencode_layers, service
    from agent_link_approvals.manifests import read_claude_plugin, read_codex_plugin
    from agent_link_approvals.settings import CODEX_PLUGIN_ID, codex_config_path
    from agent_link_approvals.toollist import tools_of_app

    env = os.environ
    out: dict[str, Any] = {"toolSource": "this process's tools"}
    codex_path = codex_config_path(env)
    if codex_path.exists():
        plugin = read_codex_plugin()
        out["codex"] = {"config": str(codex_path), **_section(
            lambda: service.check_codex(codex_path, tools_of_app(app, "codex"), plugin, plugin_id=app.config.get(CODEX_PLUGIN_ID)),
            f"agent-link approvals apply --codex-config {shlex.quote(str(codex_path))}")}
    user_settings = claude.user_settings_path(env)
    if user_settings.parent.is_dir():
        cplugin = read_claude_plugin()
        out["claude"] = {"settings": str(user_settings), **_section(
            lambda: service.check_claude(claude.real_settings(env, Path.cwd()), tools_of_app(app, "claude"), cplugin),
            f"agent-link approvals apply --claude-settings {shlex.quote(str(user_settings))}")}
    from agent_link_approvals.files import ConfigFileError

    opencode_path = str(opencode_layers.config_path(env))
    try:  # every layer opencode reads for a session in the current folder
        layers = opencode_layers.real_layers(env, Path.cwd())
    except ConfigFileError as exc:
        out["opencode"] = {"config": opencode_path, "status": "unreadable", "message": exc.message, "fix": None}
    else:
        if any(layer.data is not None for layer in layers):
            target = service.opencode_target(layers, opencode_layers.config_path(env)) or 0
            out["opencode"] = {"config": opencode_path, **_section(
                lambda: service.check_opencode(layers, target, tools_of_app(app, "opencode"), env=env),
                "agent-link approvals apply --real-opencode")}
    return "approvals", out
