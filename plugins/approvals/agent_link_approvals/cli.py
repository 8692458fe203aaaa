"""``agent-link approvals``: check and apply the tool approvals of Codex, Claude Code and opencode.

* ``agent-link approvals check (--codex-config PATH | --real-codex) [--claude-settings PATH |
  --real-claude] [--opencode-config PATH | --real-opencode] [--project DIR] [--all]
  [--plugin-id ID] [--plugin-root DIR] [--json]``
* ``agent-link approvals apply (--codex-config PATH | --claude-settings PATH | --opencode-config
  PATH | --real-opencode [--project DIR] [--opencode-config LAYER]) [--all] [--dry-run]
  [--plugin-id ID] [--plugin-root DIR] [--json]``

Nothing reads the user's real Codex config, Claude settings or opencode layers unless
``--real-codex`` / ``--real-claude`` / ``--real-opencode`` (or ``AGENT_LINK_CHECK_REAL_CONFIG=1``
for Codex) says so; ``--opencode-config PATH`` alone is that one file
(``plugins/approvals/README.md``, "Layers").
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click

from agent_link_approvals import claude, codex, opencode_layers, service
from agent_link_approvals.files import ChangedWhileApplying, ConfigFileError
from agent_link_approvals.manifests import read_claude_plugin, read_codex_plugin
from agent_link_approvals.settings import (
    CHECK_REAL_CONFIG,
    CODEX_CONFIG,
    CODEX_PLUGIN_ID,
    codex_config_path,
)
from agent_link_approvals.toollist import (
    ROLE_ADMIN_REASON,
    ROLE_ADMIN_TOOLS,
    ToolInfo,
    ToolListError,
    list_running_tools,
)

EXIT_HELP = """\b
Exit codes:
  0  complete: every required tool runs without asking
  1  incomplete (the output says what is missing and how to add it), or agent-link failed
  2  bad usage: nothing named, two sources for one host, a file that cannot be read or parsed"""

FilePath = click.Path(dir_okay=False, path_type=Path)


def _die(message: str, code: int, as_json: bool = False, kind: str = "failed") -> NoReturn:
    """One stderr line and exit ``code``; with ``as_json`` also the one JSON object on stdout
    (``{"version": 1, "complete": false, "error": {"kind", "message"}}``)."""
    if as_json:
        click.echo(json.dumps({"version": 1, "complete": False, "error": {"kind": kind, "message": message}},
                              ensure_ascii=False, indent=2))
    click.echo(f"agent-link: {message}", err=True)
    sys.exit(code)


def _tools(host: str, as_json: bool = False) -> list[ToolInfo]:
    try:
        return list_running_tools(host)
    except ToolListError as exc:
        _die(str(exc), 1, as_json, "tools")


def _run(step: Callable[[], Any], as_json: bool = False) -> Any:
    """Run a check/apply step; file and manifest problems become one stderr line and an exit
    (and, with ``as_json``, one JSON object on stdout)."""
    try:
        return step()
    except ConfigFileError as exc:
        _die(exc.message, 2, as_json, exc.kind)
    except service.CannotCheck as exc:
        _die(str(exc), 1, as_json, "manifests")
    except ChangedWhileApplying as exc:
        _die(str(exc), 1, as_json, "changed")
    except OSError as exc:
        _die(f"could not write: {exc.strerror or exc} ({exc.filename or ''}); the file was not changed", 1,
             as_json, "write")


def _readable_or_missing(path: Path) -> None:
    """Raise for an unreadable or malformed config; a missing one is fine (apply creates it)."""
    try:
        codex.load_config(path)
    except ConfigFileError as exc:
        if exc.kind != "missing":
            raise


def _cmd(*words: str) -> str:
    return " ".join(shlex.quote(w) for w in words)


def _names(names: list[str]) -> str:
    return ", ".join(names) if names else "none"


def _print_codex(r: dict[str, Any], apply: bool = False) -> None:
    m = r["manifests"]
    click.echo(f"Codex config {r['config']}")
    click.echo(f"  plugin {r['pluginId']}, MCP server {_names(r['servers'])} (from {_names(m['files'])} in {m['root']})")
    for problem in m["problems"]:
        click.echo(f"  MANIFEST PROBLEM: {problem}")
    enabled = r["pluginEnabled"]
    if enabled is False:
        click.echo(f"  PLUGIN OFF: [plugins.\"{r['pluginId']}\"] enabled = false (your choice; apply leaves it)")
    elif enabled is not True:
        click.echo("  plugin not enabled in this config (install it: agent-link install codex)")
    for table in r.get("shadowedBy", []):
        click.echo(f"  SHADOWED: this config has its own {table} table (as the original Agent Link set up), which shadows "
                   "the plugin's server of the same name: Codex threads get no agent-link tools. Remove that table "
                   "(`agent-link import-legacy` first folds the original's mailbox into agent-link's)")
    what = "tools (--all, role-admin tools excepted)" if r["all"] else "read-only tools"
    click.echo(f"  {what} that run without asking: {r['requiredApproved']} of {len(r['required'])}")
    if r["missing"]:
        click.echo(f"  missing: {_names(sorted({m['tool'] for m in r['missing']}))}")
    for kept in r["keptByYou"]:
        click.echo(f"  kept: {kept['tool']} has approval_mode = {kept['mode']!r} (your choice; apply leaves it)")
    for invalid in r["invalid"]:
        click.echo(f"  INVALID: {invalid}")
    side = r["sideEffecting"]
    click.echo(f"  side-effecting tools that run without asking: {side['approvedCount']} of {side['count']}"
               + (f": {_names(side['approved'])}" if side["approved"] else ""))
    by_auto = [t["tool"] for t in r["tools"] if not t["readOnly"] and t["approved"] and t["mode"] == "auto"]
    if by_auto:
        servers = ", ".join(f"[plugins.\"{r['pluginId']}\".mcp_servers.{s}]" for s in r["servers"])
        click.echo(f"    ({_names(sorted(set(by_auto)))} run unasked under Codex's mode 'auto', because they declare "
                   f"destructiveHint and openWorldHint false; to be asked first, set default_tools_approval_mode = "
                   f"\"writes\" under {servers})")
    admin = r["roleAdmin"]
    click.echo(f"  never auto-approved: {_names(list(ROLE_ADMIN_TOOLS))}: {ROLE_ADMIN_REASON}")
    if admin["autoApproved"]:
        click.echo(f"  WARNING: these role-admin tools run without asking: {_names(admin['autoApproved'])}; "
                   "give each its own approval_mode = \"prompt\"")
    if apply:
        _print_apply(r, "appended to")
    click.echo(f"  {'COMPLETE' if r['complete'] else 'INCOMPLETE'}")
    if not apply and r["snippet"]:
        click.echo(f"  Fix: {_cmd('agent-link', 'approvals', 'apply', '--codex-config', r['config'], *(['--all'] if r['all'] else []))}")
        click.echo(f"  or add to {r['config']}:\n")
        click.echo(r["snippet"])


def _print_apply(r: dict[str, Any], verb: str) -> None:
    if r.get("dryRun") and r.get("diff"):
        click.echo("  dry run, nothing written; the change would be:\n")
        click.echo(r["diff"])
    elif r.get("written"):
        click.echo(f"  {verb} {r.get('config') or r['files'][0]['path']} (backup: {r['backup'] or 'none, the file is new'})")
    elif not r.get("diff"):
        click.echo("  nothing to add")
    for edit in r.get("byHand", []):
        click.echo(f"  BY HAND: the file already has {edit['table']}; add `{edit['add']}` under it")
    for kept in r.get("keptBeside", []):  # another program's version, written in the moment agent-link swapped
        click.echo(f"  BY HAND: another program rewrote the file as agent-link wrote it; its version is kept as {kept}: merge it")


def _print_claude(r: dict[str, Any], apply: bool = False) -> None:
    m = r["manifests"]
    files = ", ".join(f"{f['scope']} {f['path']}{'' if f['exists'] else ' (absent)'}" for f in r["files"])
    click.echo(f"Claude Code settings: {files}")
    click.echo(f"  plugin {m['pluginId'] or r['plugin']}, MCP server {_names(r['servers'])} (from {_names(m['files'])} in {m['root']})")
    for problem in m["problems"]:
        click.echo(f"  MANIFEST PROBLEM: {problem}")
    if r.get("pluginInstalled") is False:
        click.echo("  plugin not installed in Claude Code (install it: agent-link install claude); until it is, "
                   "allow rules for its tools allow nothing")
    what = "tools (--all, role-admin tools excepted)" if r["all"] else "read-only tools"
    click.echo(f"  {what} allowed: {r['requiredAllowed']} of {len(r['required'])}")
    if r["missing"]:
        click.echo(f"  missing allow rules: {_names(r['missing'])}")
    for over in r["overridden"]:
        rules = "; ".join(f"{b['kind']} rule {b['rule']!r} in {b['scope']} {b['path']}" for b in over["by"])
        click.echo(f"  OVERRIDDEN: {over['tool']} is held back by {rules} (a {over['decision']} rule beats an allow rule; "
                   "apply never removes one)")
    side = r["sideEffecting"]
    click.echo(f"  side-effecting tools allowed: {side['allowedCount']} of {side['count']}"
               + (f": {_names(side['allowed'])}" if side["allowed"] else ""))
    click.echo(f"  never auto-approved: {_names(list(ROLE_ADMIN_TOOLS))}: {ROLE_ADMIN_REASON}")
    if r["roleAdmin"]["allowed"]:
        click.echo(f"  WARNING: these role-admin tools are allowed: {_names(r['roleAdmin']['allowed'])}; "
                   "add an ask rule for each, or narrow the server-wide allow rule")
    if apply:
        _print_apply(r, "added to")
        for rule in r.get("added", []):
            click.echo(f"    + {rule}")
    click.echo(f"  {'COMPLETE' if r['complete'] else 'INCOMPLETE'}")
    if not apply and r["missing"]:
        target = next((f["path"] for f in r["files"] if f["scope"] in ("file", "user")), r["files"][0]["path"])
        click.echo(f"  Fix: {_cmd('agent-link', 'approvals', 'apply', '--claude-settings', target, *(['--all'] if r['all'] else []))}")
        click.echo(f"  or add to permissions.allow in {target}:")
        click.echo(json.dumps(r["missing"], indent=2))


def _held_line(held: dict[str, Any], table: str, whose: str, target: str | None) -> str:
    """One HELD BACK line: why ``apply`` leaves that tool (see OpencodeCheck.held_back)."""
    where = f"the key {held['by']!r} of {table} in {held['from'] or 'an unknown layer'}"
    if held["why"] == "named":
        return (f"HELD BACK: {held['key']} is {held['decision']}{whose} (by {where}) and {table} already names it; "
                "apply never changes or moves your keys")
    if held["why"] == "action":
        return f"HELD BACK: {held['key']} is {held['decision']}{whose}: {table} in {held['from']} is one action for every tool"
    return (f"HELD BACK: {held['key']} is {held['decision']}{whose} by {where}, which a key added to {target} would not "
            f"outrank; add \"{held['key']}\": \"allow\" at the end of {table} in {held['from']} by hand")


def _print_opencode(r: dict[str, Any], apply: bool = False) -> None:
    if r.get("project"):
        read = [layer["source"] for layer in r["layers"] if layer["exists"]]
        click.echo(f"opencode config for {r['project']}, MCP server {r['server']}, merged from: {_names(read)}")
        click.echo(f"  apply writes {r['config']}{'' if r['exists'] else ' (absent)'}")
    else:
        click.echo(f"opencode config: {r['config']}{'' if r['exists'] else ' (absent)'}, MCP server {r['server']} "
                   "(this file alone; --real-opencode reads every layer opencode merges)")
    what = "tools (--all, role-admin tools excepted)" if len(r["required"]) and r.get("all") else "required tools"
    click.echo(f"  {what} running unasked: {len(r['required']) - len(r['missing']) - len(r['heldBack'])} of {len(r['required'])}")
    if r["missing"]:
        deciders = sorted({f"{t['by']!r} in {t['from']}" for t in r["tools"] if t["key"] in r["missing"]})
        click.echo(f"  asked or denied by a wildcard key ({'; '.join(deciders)}): {_names(r['missing'])}")
    for held in r["heldBack"]:
        click.echo("  " + _held_line(held, "permission", "", r["config"]))
    for agent in r["agents"]:
        table = f"agent.{agent['agent']}.permission"
        if agent["missing"]:
            click.echo(f"  agent {agent['agent']}: asked or denied by a wildcard key of {table}: {_names(agent['missing'])}")
        for held in agent["heldBack"]:
            click.echo("  " + _held_line(held, table, f" for agent {agent['agent']}", r["config"]))
    if r["roleAdmin"]["allowed"]:
        click.echo(f"  WARNING: these role-admin tools run unasked: {_names(r['roleAdmin']['allowed'])}; "
                   f"add \"<name>\": \"ask\" for each to permission ({r['roleAdmin']['why']})")
    if apply:
        _print_apply(r, "added to")
        for key in r.get("added", []):
            click.echo(f'    + "{key}": "allow"')
        for name, keys in r.get("addedToAgents", {}).items():
            for key in keys:
                click.echo(f'    + agent.{name}.permission "{key}": "allow"')
    click.echo(f"  {'COMPLETE' if r['complete'] else 'INCOMPLETE'}")
    if not apply and (r["missing"] or any(a["missing"] for a in r["agents"])):
        source = ["--real-opencode", "--project", r["project"]] if r.get("project") else ["--opencode-config", r["config"]]
        click.echo(f"  Fix: {_cmd('agent-link', 'approvals', 'apply', *source, *(['--all'] if r.get('all') else []))}")


def _opencode_layers(opencode_config: Path | None, real: bool, project: Path | None, apply: bool,
                     as_json: bool) -> tuple[list[opencode_layers.Layer], int, dict[str, Any]]:
    """``(layers, index of the file apply writes, report extras)``: with ``real``, every layer
    opencode reads for ``project`` (default: the current folder), the file written being
    ``opencode_config`` or :func:`opencode_layers.config_path`; else the one file."""
    env = os.environ
    if not real:
        assert opencode_config is not None
        layers = _run(lambda: service.opencode_file(opencode_config, env, must_exist=not apply), as_json)
        return layers, 0, {}
    folder = (project or Path.cwd()).resolve()
    layers = _run(lambda: opencode_layers.real_layers(env, folder), as_json)
    target = service.opencode_target(layers, opencode_config or opencode_layers.config_path(env))
    if target is None:
        files = [layer.source for layer in layers if layer.scope != "agent"]
        raise click.UsageError(f"{opencode_config} is not a config file opencode reads for {folder}; "
                               f"name one of: {_names(files)}")
    return layers, target, {"project": str(folder)}


def command_group() -> click.Group:
    """The ``agent-link approvals`` group (built when the command runs: the plugin declares it
    with :func:`agent_link_core.contribute.command`)."""
    from agent_link_core.cli import get_app

    @click.group("approvals", epilog=EXIT_HELP)
    def approvals() -> None:
        """Check or apply the tool approvals Codex, Claude Code and opencode keep for agent-link's tools.

        Read-only tools (readOnlyHint) are required; --all requires every tool except the
        role-admin ones, which are never auto-approved.
        """

    @approvals.command("check", epilog=EXIT_HELP)
    @click.option("--codex-config", type=FilePath, help="A Codex config.toml to check.")
    @click.option("--real-codex", is_flag=True, help="Check the real $CODEX_HOME/config.toml (default ~/.codex).")
    @click.option("--claude-settings", type=FilePath, help="One Claude Code settings.json to check.")
    @click.option("--real-claude", is_flag=True, help="Check the real user, project and local Claude Code settings.")
    @click.option("--opencode-config", type=FilePath, help="One opencode config file (JSON or JSONC) to check, alone.")
    @click.option("--real-opencode", is_flag=True, help="Check opencode's config as opencode merges it from all its layers.")
    @click.option("--project", type=click.Path(file_okay=False, path_type=Path),
                  help="The project whose settings --real-claude and --real-opencode read (default: the current folder).")
    @click.option("--all", "all_tools", is_flag=True, help="Require every tool, not only the read-only ones.")
    @click.option("--plugin-id", help="Codex plugin id (default: <plugin>@<marketplace> from the manifests).")
    @click.option("--plugin-root", type=click.Path(file_okay=False, exists=True, path_type=Path),
                  help="Where the plugin manifests are (default: this agent-link checkout).")
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
    @click.pass_context
    def check(ctx: click.Context, codex_config: Path | None, real_codex: bool, claude_settings: Path | None,
              real_claude: bool, opencode_config: Path | None, real_opencode: bool, project: Path | None, all_tools: bool,
              plugin_id: str | None, plugin_root: Path | None, as_json: bool) -> None:
        """Check that the tools agent-link needs run without asking."""
        if codex_config and real_codex:
            raise click.UsageError("name one Codex config: --codex-config PATH or --real-codex")
        if claude_settings and real_claude:
            raise click.UsageError("name one Claude Code source: --claude-settings PATH or --real-claude")
        if opencode_config and real_opencode:
            raise click.UsageError("name one opencode source: --opencode-config PATH or --real-opencode")
        config = get_app(ctx).config
        if (codex_config is None and not real_codex and claude_settings is None and not real_claude and opencode_config is None
                and not real_opencode):
            if config.get(CODEX_CONFIG):
                codex_config = Path(os.path.expanduser(config.get(CODEX_CONFIG)))
            elif config.get(CHECK_REAL_CONFIG):
                real_codex = True
            else:
                raise click.UsageError("name what to check: --codex-config PATH, --real-codex, --claude-settings PATH, "
                                       f"--real-claude, --opencode-config PATH or --real-opencode (or set {CODEX_CONFIG})")
        codex_path = codex_config_path(os.environ) if real_codex else codex_config
        out: dict[str, Any] = {"version": 1}
        complete = True
        if codex_path is not None:
            plugin = read_codex_plugin(plugin_root)
            _run(lambda: codex.load_config(codex_path), as_json)  # a bad file is reported before the tools are listed
            tools = _tools("codex", as_json)
            outcome = _run(lambda: service.check_codex(codex_path, tools, plugin, all_tools=all_tools,
                                                       plugin_id=plugin_id or config.get(CODEX_PLUGIN_ID)), as_json)
            out["codex"] = outcome.report
            complete = complete and outcome.complete
        if claude_settings is not None or real_claude:
            cplugin = read_claude_plugin(plugin_root)
            files = _run(lambda: [claude.load_settings("file", claude_settings)] if claude_settings is not None
                         else claude.real_settings(os.environ, (project or Path.cwd()).resolve()), as_json)
            ctools = _tools("claude", as_json)
            coutcome = _run(lambda: service.check_claude(files, ctools, cplugin, all_tools=all_tools), as_json)
            out["claude"] = coutcome.report
            complete = complete and coutcome.complete
        if opencode_config is not None or real_opencode:
            layers, target, extra = _opencode_layers(opencode_config, real_opencode, project, False, as_json)
            otools = _tools("opencode", as_json)
            env = os.environ if real_opencode else {}
            ooutcome = _run(lambda: service.check_opencode(layers, target, otools, all_tools=all_tools, env=env), as_json)
            out["opencode"] = {**ooutcome.report, **extra, "all": all_tools}
            complete = complete and ooutcome.complete
        out["complete"] = complete
        if as_json:
            click.echo(json.dumps(out, ensure_ascii=False, indent=2))
        else:
            if "codex" in out:
                _print_codex(out["codex"])
            if "claude" in out:
                _print_claude(out["claude"])
            if "opencode" in out:
                _print_opencode(out["opencode"])
        sys.exit(0 if complete else 1)

    @approvals.command("apply", epilog=EXIT_HELP)
    @click.option("--codex-config", type=FilePath, help="The Codex config.toml to add approvals to.")
    @click.option("--claude-settings", type=FilePath, help="The Claude Code settings.json to add allow rules to.")
    @click.option("--opencode-config", type=FilePath,
                  help="The opencode config (plain JSON) to add permission keys to (with --real-opencode: one of its layers).")
    @click.option("--real-opencode", is_flag=True,
                  help="Judge opencode's config from all its layers; write $OPENCODE_CONFIG or the global opencode.json "
                       "unless --opencode-config names the layer.")
    @click.option("--project", type=click.Path(file_okay=False, path_type=Path),
                  help="The project whose layers --real-opencode reads (default: the current folder).")
    @click.option("--all", "all_tools", is_flag=True, help="Approve every tool except the role-admin ones.")
    @click.option("--dry-run", is_flag=True, help="Print the change as a diff; write nothing.")
    @click.option("--plugin-id", help="Codex plugin id (default: <plugin>@<marketplace> from the manifests).")
    @click.option("--plugin-root", type=click.Path(file_okay=False, exists=True, path_type=Path),
                  help="Where the plugin manifests are (default: this agent-link checkout).")
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
    @click.pass_context
    def apply(ctx: click.Context, codex_config: Path | None, claude_settings: Path | None, opencode_config: Path | None,
              real_opencode: bool, project: Path | None, all_tools: bool, dry_run: bool, plugin_id: str | None,
              plugin_root: Path | None, as_json: bool) -> None:
        """Add exactly the missing approvals, keeping everything else in the file.

        Codex: new tables are appended to the unchanged file. Claude Code: exact allow rules
        are added to permissions.allow. opencode: exact "<server>_<tool>": "allow" keys are
        added at the end of permission. A backup of the old file is kept beside it.
        """
        if [codex_config, claude_settings, opencode_config or real_opencode or None].count(None) != 2:
            raise click.UsageError("name one file: --codex-config PATH, --claude-settings PATH, --opencode-config PATH "
                                   "or --real-opencode")
        config = get_app(ctx).config
        if codex_config is not None:
            plugin = read_codex_plugin(plugin_root)
            _run(lambda: _readable_or_missing(codex_config), as_json)
            tools = _tools("codex", as_json)
            outcome = _run(lambda: service.apply_codex(codex_config, tools, plugin, all_tools=all_tools,
                                                       plugin_id=plugin_id or config.get(CODEX_PLUGIN_ID), dry_run=dry_run),
                           as_json)
            report, complete, printer = outcome.report, outcome.complete, _print_codex
        elif opencode_config is not None or real_opencode:
            layers, target, extra = _opencode_layers(opencode_config, real_opencode, project, True, as_json)
            otools = _tools("opencode", as_json)
            env = os.environ if real_opencode else {}
            ooutcome = _run(lambda: service.apply_opencode(layers, target, otools, all_tools=all_tools, dry_run=dry_run,
                                                           env=env), as_json)
            report, complete, printer = {**ooutcome.report, **extra, "all": all_tools}, ooutcome.complete, _print_opencode
        else:
            assert claude_settings is not None
            cplugin = read_claude_plugin(plugin_root)
            _run(lambda: claude.load_settings("file", claude_settings, must_exist=False), as_json)
            ctools = _tools("claude", as_json)
            coutcome = _run(lambda: service.apply_claude(claude_settings, ctools, cplugin, all_tools=all_tools,
                                                         dry_run=dry_run), as_json)
            report, complete, printer = coutcome.report, coutcome.complete, _print_claude
        if as_json:
            key = "codex" if codex_config is not None else "opencode" if opencode_config or real_opencode else "claude"
            click.echo(json.dumps({"version": 1, key: report, "complete": complete}, ensure_ascii=False, indent=2))
        else:
            printer(report, apply=True)
        sys.exit(0 if complete else 1)

    return approvals
