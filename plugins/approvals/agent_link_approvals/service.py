"""Checking and applying, shared by the CLI and the health section.

Each function takes the tools (from :mod:`agent_link_approvals.toollist`) and the plugin read
from the manifests, and returns a report dict (the ``--json`` form) plus what the caller needs.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_link_approvals import claude, codex, opencode, opencode_layers
from agent_link_approvals.files import ConfigFileError, Update, read_bytes, unified_diff, update_file
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

    The change is planned on the file's content at the moment of writing: an edit another
    process makes meanwhile is kept and the tables are planned again on top of it (see
    :func:`agent_link_approvals.files.update_file`).

    ``report`` gains ``appended`` (the TOML added), ``byHand`` (entries that need a hand
    edit), ``diff``, ``written``, ``backup``; ``complete`` is the verdict after the change.

    :raises ConfigFileError: unreadable or malformed file.
    :raises CannotCheck: see :func:`codex_keys`.
    :raises ChangedWhileApplying: the file kept changing under us (our change not written).
    :raises OSError: the file could not be written (the original is untouched).
    """
    pid, servers = codex_keys(plugin, plugin_id)
    planned: dict[str, Any] = {}

    def plan(raw: bytes | None) -> bytes | None:
        data = codex.parse_config(path, raw) if raw is not None else {}
        before = codex.check(data, pid, servers, tools, all_tools)
        old_text = raw.decode("utf-8") if raw is not None else ""
        step = codex.plan_append(old_text, data, before.additions)
        planned.update(data=data, plan=step)
        return step.new_text.encode("utf-8") if step.changed and not dry_run else None

    if dry_run:
        plan(_read_or_none(path))
        done = Update(None, False, None, 1)
    else:
        done = update_file(path, plan)
    data, step = planned["data"], planned["plan"]
    after = codex.check(codex.merge(data, step.appended), pid, servers, tools, all_tools)
    report = {"config": str(path), "manifests": plugin.to_dict(), **after.to_dict()}
    report.update(
        complete=after.complete and not plugin.problems and not step.by_hand,
        appended=_toml(step.appended), byHand=[{"table": t, "add": line} for t, line in step.by_hand],
        diff=unified_diff(path, step.old_text, step.new_text) if step.changed else "",
        dryRun=dry_run, written=done.written, backup=str(done.backup) if done.backup else None,
        keptBeside=[str(k) for k in done.kept],
    )
    return CodexOutcome(report, report["complete"], after, step)


def _read_or_none(path: Path) -> bytes | None:
    try:
        return read_bytes(path)
    except ConfigFileError as exc:
        if exc.kind != "missing":
            raise
        return None


def _toml(tables: dict[str, Any]) -> str:
    import tomli_w

    return tomli_w.dumps(tables) if tables else ""


def check_claude(files: list[claude.SettingsFile], tools: list[ToolInfo], plugin: HostPlugin, *,
                 all_tools: bool = False, env: Mapping[str, str] | None = None) -> ClaudeOutcome:
    """Check Claude Code settings files (their rules add up); not complete while Claude Code
    (its config dir in ``env``, default the process's) does not have the plugin installed.

    :raises CannotCheck: the manifests give no plugin name or server.
    """
    if not plugin.plugin or not plugin.servers:
        raise CannotCheck("the Claude Code plugin's name or MCP server is unknown ("
                          + "; ".join(plugin.problems or ["no manifests"]) + "); pass --plugin-root")
    result = claude.check(files, plugin.plugin, plugin.servers, tools, all_tools, plugin.plugin_id)
    result.installed = claude.plugin_installed(os.environ if env is None else env, plugin.plugin_id)
    report = {"manifests": plugin.to_dict(), **result.to_dict()}
    report["complete"] = result.complete and not plugin.problems
    return ClaudeOutcome(report, report["complete"], result)


def apply_claude(path: Path, tools: list[ToolInfo], plugin: HostPlugin, *, all_tools: bool = False,
                 dry_run: bool = False) -> ClaudeOutcome:
    """Add the missing exact allow rules to the Claude Code settings file at ``path`` (created
    when absent). Deny and ask rules are reported, never removed. Every other value keeps its
    text (numbers as written). The change is planned on the file's content at the moment of
    writing, as for :func:`apply_codex`.

    :raises ConfigFileError: unreadable or malformed file (or a ``permissions`` of the wrong shape).
    :raises CannotCheck: the manifests give no plugin name or server.
    :raises ChangedWhileApplying: the file kept changing under us (our change not written).
    :raises OSError: the file could not be written (the original is untouched).
    """
    planned: dict[str, Any] = {}

    def plan(raw: bytes | None) -> bytes | None:
        settings = claude.parse_settings("file", path, raw)
        rules = check_claude([settings], tools, plugin, all_tools=all_tools).result.missing
        old_text, new_text, intended = claude.plan_rules(settings, rules) if rules else ("", "", {})
        if rules:
            settings = claude.SettingsFile("file", path, new_text.encode("utf-8"), intended)
        planned.update(rules=rules, old=old_text, new=new_text, settings=settings)
        return new_text.encode("utf-8") if rules and not dry_run else None

    if dry_run:
        plan(_read_or_none(path))
        done = Update(None, False, None, 1)
    else:
        done = update_file(path, plan)
    rules = planned["rules"]
    outcome = check_claude([planned["settings"]], tools, plugin, all_tools=all_tools)
    outcome.report.update(added=list(rules), diff=unified_diff(path, planned["old"], planned["new"]) if rules else "",
                          dryRun=dry_run, written=done.written, backup=str(done.backup) if done.backup else None,
                          keptBeside=[str(k) for k in done.kept])
    return outcome


@dataclass
class OpencodeOutcome:
    """An opencode check or apply: ``report`` is the JSON form, ``complete`` the verdict."""

    report: dict[str, Any]
    complete: bool
    result: opencode.OpencodeCheck


def opencode_file(path: Path, env: Mapping[str, str], *, must_exist: bool = True) -> list[opencode_layers.Layer]:
    """``--opencode-config PATH``: that one file (layer 0) and the markdown agents of its folder.

    :raises ConfigFileError: missing (when ``must_exist``), unreadable or malformed (JSONC is read).
    """
    layer = opencode_layers.read_layer(path, "file", env)
    if layer.data is None and must_exist:
        raise ConfigFileError("missing", f"{path} does not exist")
    return [layer, *opencode_layers.markdown_layers(path.parent)]


def opencode_target(layers: list[opencode_layers.Layer], path: Path) -> int | None:
    """The index of the config file ``path`` among ``layers`` (None: opencode does not read it)."""
    want = os.path.realpath(path)
    return next((i for i, layer in enumerate(layers)
                 if layer.scope != "agent" and layer.path is not None and os.path.realpath(layer.path) == want), None)


def check_opencode(layers: list[opencode_layers.Layer], target: int, tools: list[ToolInfo], *, all_tools: bool = False,
                   env: Mapping[str, str] | None = None) -> OpencodeOutcome:
    """Check the opencode config merged from ``layers`` (``apply`` would write ``layers[target]``;
    ``env`` gives ``OPENCODE_PERMISSION``; see :mod:`agent_link_approvals.opencode`)."""
    result = opencode.check(layers, tools, all_tools, target=target, env=env)
    return OpencodeOutcome(result.to_dict(), result.complete, result)


def apply_opencode(layers: list[opencode_layers.Layer], target: int, tools: list[ToolInfo], *, all_tools: bool = False,
                   dry_run: bool = False, env: Mapping[str, str] | None = None) -> OpencodeOutcome:
    """Add ``"<server>_<tool>": "allow"`` at the end of ``permission`` (or of an agent's
    ``agent.<name>.permission``) of the one file ``layers[target]`` (created when absent) for
    each tool a wildcard key makes ask or deny, where that key then decides (a later layer's
    matching key would still win: that tool is reported, held back, naming the layer); keys
    the user set for a tool itself are reported, never changed. Planned on the file's content
    at the moment of writing, as for :func:`apply_codex`.

    :raises ConfigFileError: unreadable or malformed file (JSONC is never rewritten), or
        ``permission`` of another shape.
    :raises ChangedWhileApplying: the file kept changing under us (our change not written).
    :raises OSError: the file could not be written (the original is untouched).
    """
    path = layers[target].path
    assert path is not None
    env = env or {}
    planned: dict[str, Any] = {}

    def with_bytes(raw: bytes | None) -> list[opencode_layers.Layer]:
        new = opencode_layers.layer_of(layers[target], raw, os.environ)
        return [dataclasses.replace(layer, data=new.data, raw=new.raw) if layer.source == new.source and layer.scope != "agent"
                else layer for layer in layers]

    def plan(raw: bytes | None) -> bytes | None:
        opencode.parse(path, raw)  # plain JSON only: a JSONC file is refused, never rewritten
        checked = opencode.check(with_bytes(raw), tools, all_tools, target=target, env=env)
        keys, agent_keys = checked.missing, checked.agent_missing()
        change = bool(keys or agent_keys)
        old_text, new_text = opencode.plan(path, raw, keys, agent_keys) if change else ("", "")
        planned.update(keys=keys, agent_keys=agent_keys, change=change, old=old_text, new=new_text,
                       raw=new_text.encode("utf-8") if change else raw)
        return new_text.encode("utf-8") if change and not dry_run else None

    if dry_run:
        plan(_read_or_none(path))
        done = Update(None, False, None, 1)
    else:
        done = update_file(path, plan)
    result = opencode.check(with_bytes(planned["raw"]), tools, all_tools, target=target, env=env)
    report = result.to_dict()
    report.update(added=list(planned["keys"]), addedToAgents=planned["agent_keys"],
                  diff=unified_diff(path, planned["old"], planned["new"]) if planned["change"] else "",
                  dryRun=dry_run, written=done.written, backup=str(done.backup) if done.backup else None,
                  keptBeside=[str(k) for k in done.kept])
    return OpencodeOutcome(report, result.complete, result)
