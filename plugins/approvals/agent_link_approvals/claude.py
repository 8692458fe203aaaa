"""Permission rules for agent-link's tools in Claude Code settings.

Facts (observed with the real Claude Code 2.1.197 in ``claude -p``):

* a plugin's MCP tool is named ``mcp__plugin_<plugin>_<server>__<tool>``; without a rule that
  allows it, the call is refused ("Claude requested permissions to use ..., but you haven't
  granted it yet");
* ``permissions.allow`` rules allow one tool (the exact name), or every tool of the server
  (``mcp__plugin_<plugin>_<server>``, or ``..._<server>__*``);
* ``permissions.ask`` and ``permissions.deny`` rules override an allow rule (an ask rule makes
  ``-p`` refuse the call; a denied tool is not offered to the model at all), whichever
  settings file each rule is in;
* the settings files are the user's ``$CLAUDE_CONFIG_DIR/settings.json`` (default
  ``~/.claude/settings.json``), the project's ``.claude/settings.json`` and the personal
  ``.claude/settings.local.json``; their rules add up.

A deny or ask rule with a ``*`` anywhere is assumed to match when the tool name fits the
pattern (being asked once too often is harmless); an allow rule counts only in the three forms
above.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from agent_link_approvals.files import ConfigFileError, decode_utf8, read_bytes
from agent_link_approvals.manifests import claude_rule, claude_rule_server
from agent_link_approvals.toollist import ROLE_ADMIN_REASON, ToolInfo

KINDS = ("deny", "ask", "allow")  # the order Claude Code applies them in


@dataclass
class SettingsFile:
    """One settings file: ``scope`` (user, project, local, or file for one named file),
    ``path``, and ``data`` (None when the file does not exist)."""

    scope: str
    path: Path
    raw: bytes | None = None
    data: dict[str, Any] | None = None

    def rules(self, kind: str) -> list[str]:
        """The string rules of ``permissions.<kind>`` (other entries are ignored)."""
        perms = (self.data or {}).get("permissions")
        values = perms.get(kind) if isinstance(perms, dict) else None
        return [r for r in values if isinstance(r, str)] if isinstance(values, list) else []

    def to_dict(self) -> dict[str, Any]:
        """JSON form for ``--json``."""
        return {"scope": self.scope, "path": str(self.path), "exists": self.data is not None}


def load_settings(scope: str, path: Path, must_exist: bool = True) -> SettingsFile:
    """Read a settings file.

    :param must_exist: raise for a missing file (else it is returned with ``data`` None).
    :raises ConfigFileError: missing (when ``must_exist``), unreadable, or ``malformed`` (see
        :func:`parse_settings`).
    """
    try:
        raw = read_bytes(path)
    except ConfigFileError as exc:
        if exc.kind == "missing" and not must_exist:
            return SettingsFile(scope, path)
        raise
    return parse_settings(scope, path, raw)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def strict_json(text: str, **hooks: Any) -> Any:
    """``text`` parsed as JSON the way Node's ``JSON.parse`` (what Claude Code reads settings
    with) accepts it: ``NaN``, ``Infinity`` and ``-Infinity`` are refused.

    :param hooks: passed to :func:`json.loads` (``parse_float``, ``parse_int``).
    :raises ValueError: a :class:`json.JSONDecodeError`, or a ValueError naming the constant.
    :raises RecursionError: nested too deeply.
    """
    return json.loads(text, parse_constant=_refuse_constant, **hooks)


def parse_settings(scope: str, path: Path, raw: bytes | None) -> SettingsFile:
    """``raw`` (the bytes of the settings file at ``path``; None: no file) as a settings file.

    :raises ConfigFileError: ``malformed``: not UTF-8, not JSON as Claude Code reads it
        (with line and column; NaN and Infinity are refused), or not a JSON object.
    """
    if raw is None:
        return SettingsFile(scope, path)
    text = decode_utf8(path, raw)
    try:
        data = strict_json(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise ConfigFileError("malformed", f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except ValueError as exc:
        raise ConfigFileError("malformed", f"{path} is not valid JSON ({exc}; Claude Code would not read it)") from None
    except RecursionError:
        raise ConfigFileError("malformed", f"{path} is not valid JSON (nested too deeply)") from None
    if not isinstance(data, dict):
        raise ConfigFileError("malformed", f"{path} is not a JSON object")
    return SettingsFile(scope, path, raw, data)


def user_settings_path(env: Mapping[str, str]) -> Path:
    """``$CLAUDE_CONFIG_DIR/settings.json``, else ``$HOME/.claude/settings.json``."""
    config_dir = env.get("CLAUDE_CONFIG_DIR")
    if config_dir:
        return Path(os.path.expanduser(config_dir)) / "settings.json"
    return Path(env.get("HOME") or os.path.expanduser("~")) / ".claude" / "settings.json"


def installed_plugins_path(env: Mapping[str, str]) -> Path:
    """Claude Code's record of installed plugins: ``plugins/installed_plugins.json`` beside the
    user's settings (:func:`user_settings_path`)."""
    return user_settings_path(env).parent / "plugins" / "installed_plugins.json"


def plugin_installed(env: Mapping[str, str], plugin_key: str | None) -> bool | None:
    """Whether Claude Code has ``plugin_key`` (``<plugin>@<marketplace>``) installed, as its
    :func:`installed_plugins_path` says (``claude plugin install`` adds it, ``uninstall``
    removes it; checked on 2.1.332); None when that file is missing or unreadable."""
    import json

    if not plugin_key:
        return None
    try:
        data = json.loads(installed_plugins_path(env).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    plugins = data.get("plugins") if isinstance(data, dict) else None
    if not isinstance(plugins, dict):
        return None
    return bool(plugins.get(plugin_key))


def real_settings(env: Mapping[str, str], project: Path) -> list[SettingsFile]:
    """The user, project and local settings files for ``project`` (missing ones have no data).

    :raises ConfigFileError: one of them is unreadable or malformed.
    """
    return [
        load_settings("user", user_settings_path(env), must_exist=False),
        load_settings("project", project / ".claude" / "settings.json", must_exist=False),
        load_settings("local", project / ".claude" / "settings.local.json", must_exist=False),
    ]


def rule_matches(rule: str, kind: str, server_rule: str, tool_rule: str) -> bool:
    """Whether ``rule`` of ``kind`` (allow, ask, deny) covers the tool ``tool_rule`` of the
    server ``server_rule`` (see the module docstring for the forms)."""
    if rule in (tool_rule, server_rule, f"{server_rule}__*"):
        return True
    return kind != "allow" and "*" in rule and fnmatchcase(tool_rule, rule)


@dataclass
class ToolPermission:
    """Claude Code's decision for one tool: ``decision`` is deny, ask, allow or none (not
    allowed: refused in ``-p``, asked interactively); ``by`` names the deciding rules as
    ``{scope, path, kind, rule}``."""

    server: str
    tool: ToolInfo
    rule: str
    decision: str
    by: list[dict[str, str]]

    def to_dict(self) -> dict[str, Any]:
        """JSON form for ``--json``."""
        return {"server": self.server, "tool": self.tool.name, "rule": self.rule, "readOnly": self.tool.is_read_only,
                "decision": self.decision, "by": self.by}


@dataclass
class ClaudeCheck:
    """The result of checking settings files against the tools.

    :param missing: exact allow rules ``apply`` would add (required tools not allowed by any
        rule, and not denied or asked for).
    :param overridden: required tools a deny or ask rule keeps from running unasked (reported;
        ``apply`` never removes a rule).
    """

    plugin: str
    servers: list[str]
    files: list[SettingsFile]
    all_tools: bool
    permissions: list[ToolPermission]
    required: list[str]
    missing: list[str] = field(default_factory=list)
    overridden: list[ToolPermission] = field(default_factory=list)
    plugin_enabled: Any = None
    #: whether Claude Code has the plugin installed (:func:`plugin_installed`; None: cannot tell)
    installed: bool | None = None

    @property
    def complete(self) -> bool:
        """Every required tool is allowed and not overridden, and the plugin is not known to be
        uninstalled (allow rules for a plugin Claude Code does not have allow nothing)."""
        return not self.missing and not self.overridden and self.installed is not False

    def allowed(self, names: Iterable[str]) -> list[str]:
        """Those of ``names`` that run without asking (on every server)."""
        return sorted(n for n in set(names)
                      if all(p.decision == "allow" for p in self.permissions if p.tool.name == n))

    def side_effecting(self) -> tuple[list[str], list[str]]:
        """``(allowed, all)`` names of the tools without ``readOnlyHint: true``."""
        side = sorted({p.tool.name for p in self.permissions if not p.tool.is_read_only})
        return self.allowed(side), side

    def role_admin_allowed(self) -> list[str]:
        """Role-admin tools these settings let run without asking (should be none)."""
        return self.allowed(p.tool.name for p in self.permissions if p.tool.role_admin)

    def to_dict(self) -> dict[str, Any]:
        """JSON form for ``--json``."""
        allowed, side = self.side_effecting()
        return {
            "plugin": self.plugin, "servers": self.servers, "all": self.all_tools, "complete": self.complete,
            "files": [f.to_dict() for f in self.files], "pluginEnabled": self.plugin_enabled,
            "pluginInstalled": self.installed,
            "required": self.required, "requiredAllowed": len(self.allowed(self.required)),
            "missing": self.missing,
            "overridden": [p.to_dict() for p in self.overridden],
            "sideEffecting": {"allowed": allowed, "count": len(side), "allowedCount": len(allowed)},
            "roleAdmin": {"tools": sorted({p.tool.name for p in self.permissions if p.tool.role_admin}),
                          "allowed": self.role_admin_allowed(), "why": ROLE_ADMIN_REASON},
            "tools": [p.to_dict() for p in self.permissions],
        }


def check(files: list[SettingsFile], plugin: str, servers: Iterable[str], tools: Iterable[ToolInfo],
          all_tools: bool = False, plugin_key: str | None = None) -> ClaudeCheck:
    """Check settings files.

    :param files: the files whose rules add up (one named file, or user/project/local).
    :param plugin: the Claude Code plugin name; ``servers`` its MCP server keys running agent-link.
    :param all_tools: require every tool but the role-admin ones, not just the read-only ones.
    :param plugin_key: ``<plugin>@<marketplace>``, to report ``enabledPlugins`` from the files.
    """
    tools = list(tools)
    servers = list(servers)
    required = sorted(t.name for t in tools if not t.role_admin and (all_tools or t.is_read_only))
    result = ClaudeCheck(plugin, servers, files, all_tools, [], required)
    if plugin_key:
        for f in files:
            enabled = (f.data or {}).get("enabledPlugins")
            if isinstance(enabled, dict) and plugin_key in enabled:
                result.plugin_enabled = enabled[plugin_key]
    for server in servers:
        server_rule = claude_rule_server(plugin, server)
        for tool in tools:
            tool_rule = claude_rule(plugin, server, tool.name)
            decision, by = "none", []
            for kind in KINDS:
                by = [{"scope": f.scope, "path": str(f.path), "kind": kind, "rule": r}
                      for f in files for r in f.rules(kind) if rule_matches(r, kind, server_rule, tool_rule)]
                if by:
                    decision = kind
                    break
            perm = ToolPermission(server, tool, tool_rule, decision, by)
            result.permissions.append(perm)
            if tool.name in required and decision != "allow":
                if decision == "none":
                    result.missing.append(tool_rule)
                else:
                    result.overridden.append(perm)
    return result


def _indent(text: str) -> str | int:
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and stripped != line:
            return line[: len(line) - len(stripped)]
    return 2


def plan_rules(settings: SettingsFile, rules: list[str]) -> tuple[str, str, dict[str, Any]]:
    """The new text of ``settings`` with ``rules`` added to the end of ``permissions.allow``.

    Key order, the file's indentation and every number's text (``1e999`` stays ``1e999``,
    ``1.50`` stays ``1.50``) are kept; JSON has no comments to keep.

    :returns: ``(old text, new text, intended data)``.
    :raises ConfigFileError: ``malformed`` when ``permissions`` is not an object or
        ``permissions.allow`` not a list (nothing can be added safely), or when the new text
        would not read back as intended.
    """
    old_text = settings.raw.decode("utf-8") if settings.raw is not None else ""
    # Numbers are carried through as unique placeholder strings and put back as written:
    # json would turn 1e999 into Infinity, which JSON.parse refuses.
    marker = f"agent-link-number-{secrets.token_hex(8)}-"
    numbers: dict[str, str] = {}

    def keep(text: str) -> str:
        key = f"{marker}{len(numbers)}"
        numbers[key] = text
        return key

    data = strict_json(old_text, parse_float=keep, parse_int=keep) if old_text.strip() else {}
    perms = data.setdefault("permissions", {})
    if not isinstance(perms, dict):
        raise ConfigFileError("malformed", f"{settings.path}: permissions is not a JSON object")
    allow = perms.setdefault("allow", [])
    if not isinstance(allow, list):
        raise ConfigFileError("malformed", f"{settings.path}: permissions.allow is not a JSON array")
    allow.extend(r for r in rules if r not in allow)
    new_text = json.dumps(data, indent=_indent(old_text), ensure_ascii=False) + "\n"
    for key, text in numbers.items():
        new_text = new_text.replace(json.dumps(key), text, 1)
    intended = json.loads(json.dumps(settings.data or {}))
    intended_perms = intended.setdefault("permissions", {})
    intended_allow = intended_perms.setdefault("allow", [])
    intended_allow.extend(r for r in rules if r not in intended_allow)
    if marker in new_text or strict_json(new_text) != intended:  # never write what would not read back as intended
        raise ConfigFileError("malformed", f"{settings.path}: the new settings did not read back as intended; nothing was written")
    return old_text, new_text, intended
