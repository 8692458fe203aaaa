"""Checking and applying, shared by the CLI and the health section.

Each function takes the tools (from :mod:`agent_link_approvals.toollist`) and the plugin read
from the manifests, and returns a report dict (the ``--json`` form) plus what the caller needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_link_approvals import claude, codex
from agent_link_approvals.files import ConfigFileError, replace_atomically, unified_diff
from agent_link_approvals.manifests import HostPlugin
from agent_link_approvals.toollist import ToolInfo


class CannotCheck(Exception):
    """The manifests do not say what the approvals are keyed by (no plugin id or server)."""


@dataclass
class CodexOutcome:
    """A Codex check or apply: ``report`` is the JSON form, ``complete`` the verdict."""

    report: dict[str, Any]
    complete: bool
    result: codex.CodexCheck
    plan: codex.AppendPlan | None = None


@dataclass
class ClaudeOutcome:
    """A Claude Code check or apply: ``report`` is the JSON form, ``complete`` the verdict."""

    report: dict[str, Any]
    complete: bool
    result: claude.ClaudeCheck


def codex_keys(plugin: HostPlugin, plugin_id: str | None) -> tuple[str, list[str]]:
    """The plugin id (``plugin_id`` if given, else the manifests') and server keys.

    :raises CannotCheck: neither gives a plugin id, or the manifests name no server.
    """
    pid = plugin_id or plugin.plugin_id
    if not pid:
        raise CannotCheck("the Codex plugin id is unknown (" + "; ".join(plugin.problems or ["no manifests"])
                          + "); pass --plugin-id or --plugin-root")
    if not plugin.servers:
        raise CannotCheck("the Codex plugin's MCP server key is unknown (" + "; ".join(plugin.problems) + "); pass --plugin-root")
    return pid, plugin.servers


def check_codex(path: Path, tools: list[ToolInfo], plugin: HostPlugin, *, all_tools: bool = False,
                plugin_id: str | None = None, missing_ok: bool = False) -> CodexOutcome:
    """Check the Codex config at ``path``.

    :param missing_ok: a missing file counts as empty (``apply`` creates it).
    :raises ConfigFileError: the file is missing (unless ``missing_ok``), unreadable or malformed.
    :raises CannotCheck: see :func:`codex_keys`.
    """
    pid, servers = codex_keys(plugin, plugin_id)
    try:
        _, data = codex.load_config(path)
    except ConfigFileError as exc:
        if not (missing_ok and exc.kind == "missing"):
            raise
        data = {}
    result = codex.check(data, pid, servers, tools, all_tools)
    report = {"config": str(path), "manifests": plugin.to_dict(), **result.to_dict()}
    report["complete"] = result.complete and not plugin.problems
    return CodexOutcome(report, report["complete"], result)


def apply_codex(path: Path, tools: list[ToolInfo], plugin: HostPlugin, *, all_tools: bool = False,
                plugin_id: str | None = None, dry_run: bool = False) -> CodexOutcome:
    """Append the missing approval tables to the Codex config at ``path`` (created when absent).

    ``report`` gains ``appended`` (the TOML added), ``byHand`` (entries that need a hand
    edit), ``diff``, ``written``, ``backup``; ``complete`` is the verdict after the change.

    :raises ConfigFileError: unreadable or malformed file.
    :raises CannotCheck: see :func:`codex_keys`.
    :raises ChangedWhileApplying: the file changed under us (nothing written).
    :raises OSError: the file could not be written (the original is untouched).
    """
    pid, servers = codex_keys(plugin, plugin_id)
    try:
        raw: bytes | None
        raw, data = codex.load_config(path)
    except ConfigFileError as exc:
        if exc.kind != "missing":
            raise
        raw, data = None, {}
    before = codex.check(data, pid, servers, tools, all_tools)
    old_text = raw.decode("utf-8") if raw is not None else ""
    plan = codex.plan_append(old_text, data, before.additions)
    backup = None
    if plan.changed and not dry_run:
        backup = replace_atomically(path, plan.new_text.encode("utf-8"), raw)
    after = codex.check(codex.merge(data, plan.appended), pid, servers, tools, all_tools)
    report = {"config": str(path), "manifests": plugin.to_dict(), **after.to_dict()}
    report.update(
        complete=after.complete and not plugin.problems and not plan.by_hand,
        appended=_toml(plan.appended), byHand=[{"table": t, "add": line} for t, line in plan.by_hand],
        diff=unified_diff(path, old_text, plan.new_text) if plan.changed else "",
        dryRun=dry_run, written=plan.changed and not dry_run, backup=str(backup) if backup else None,
    )
    return CodexOutcome(report, report["complete"], after, plan)


def _toml(tables: dict[str, Any]) -> str:
    import tomli_w

    return tomli_w.dumps(tables) if tables else ""


def check_claude(files: list[claude.SettingsFile], tools: list[ToolInfo], plugin: HostPlugin, *,
                 all_tools: bool = False) -> ClaudeOutcome:
    """Check Claude Code settings files (their rules add up).

    :raises CannotCheck: the manifests give no plugin name or server.
    """
    if not plugin.plugin or not plugin.servers:
        raise CannotCheck("the Claude Code plugin's name or MCP server is unknown ("
                          + "; ".join(plugin.problems or ["no manifests"]) + "); pass --plugin-root")
    result = claude.check(files, plugin.plugin, plugin.servers, tools, all_tools, plugin.plugin_id)
    report = {"manifests": plugin.to_dict(), **result.to_dict()}
    report["complete"] = result.complete and not plugin.problems
    return ClaudeOutcome(report, report["complete"], result)


def apply_claude(path: Path, tools: list[ToolInfo], plugin: HostPlugin, *, all_tools: bool = False,
                 dry_run: bool = False) -> ClaudeOutcome:
    """Add the missing exact allow rules to the Claude Code settings file at ``path`` (created
    when absent). Deny and ask rules are reported, never removed.

    :raises ConfigFileError: unreadable or malformed file (or a ``permissions`` of the wrong shape).
    :raises CannotCheck: the manifests give no plugin name or server.
    :raises ChangedWhileApplying: the file changed under us (nothing written).
    """
    settings = claude.load_settings("file", path, must_exist=False)
    before = check_claude([settings], tools, plugin, all_tools=all_tools)
    rules = before.result.missing
    backup = None
    old_text, new_text, intended = claude.plan_rules(settings, rules) if rules else ("", "", {})
    if rules:
        import json

        if json.loads(new_text) != intended:  # never write what would not read back as intended
            raise ConfigFileError("malformed", f"{path}: the new settings did not read back as intended; nothing was written")
        if not dry_run:
            backup = replace_atomically(path, new_text.encode("utf-8"), settings.raw)
        settings = claude.SettingsFile("file", path, new_text.encode("utf-8"), intended)
    outcome = check_claude([settings], tools, plugin, all_tools=all_tools)
    outcome.report.update(added=list(rules), diff=unified_diff(path, old_text, new_text) if rules else "",
                          dryRun=dry_run, written=bool(rules) and not dry_run, backup=str(backup) if backup else None)
    return outcome
