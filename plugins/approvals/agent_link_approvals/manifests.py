"""What the repository's host plugin manifests declare: the plugin id and the MCP server keys
that approvals are keyed by, and whether those servers really start agent-link.

Nothing here is hard-coded from the manifests' current content; it is read from:

* Codex: ``.codex-plugin/plugin.json`` (``name``; ``mcpServers``, a path relative to the plugin
  root, ``./.mcp.json`` when absent) and ``.agents/plugins/marketplace.json`` (``name``, and the
  plugin listed in ``plugins``). The plugin id is ``<plugin>@<marketplace>``, the MCP server
  keys are the keys of the server file's ``mcpServers``.
* Claude Code: ``.claude-plugin/plugin.json`` (``name``; ``mcpServers`` inline, or a path) and
  ``.claude-plugin/marketplace.json``. Claude Code names a plugin's server
  ``plugin:<plugin>:<server>`` and its tools ``mcp__<that name, each character outside
  [A-Za-z0-9_-] replaced by _>__<tool>`` (observed with Claude Code 2.1.197).

A server "starts agent-link" when its command runs ``agent-link mcp``: the ``agent-link``
program, ``python -m agent_link_core``, or a launcher script inside the plugin root named
``agent-link.sh``, with ``mcp`` as the last argument.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import agent_link_core

CODEX_MANIFEST = ".codex-plugin/plugin.json"
CODEX_MARKETPLACE = ".agents/plugins/marketplace.json"
CLAUDE_MANIFEST = ".claude-plugin/plugin.json"
CLAUDE_MARKETPLACE = ".claude-plugin/marketplace.json"
_ROOT_VARIABLES = ("${PLUGIN_ROOT}", "${CLAUDE_PLUGIN_ROOT}")


@dataclass
class HostPlugin:
    """The plugin one host installs from the repository.

    :param host: ``codex`` or ``claude``.
    :param root: the plugin root the manifests were read from.
    :param plugin: the manifest's ``name`` (None when unreadable).
    :param marketplace: the marketplace ``name`` listing the plugin (None when not listed).
    :param servers: MCP server keys that start agent-link.
    :param problems: what is wrong with the manifests, one sentence each (empty = fine).
    :param files: the manifest files read, relative to ``root``.
    """

    host: str
    root: Path
    plugin: str | None = None
    marketplace: str | None = None
    servers: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    @property
    def plugin_id(self) -> str | None:
        """``<plugin>@<marketplace>`` (how both hosts name an installed plugin)."""
        return f"{self.plugin}@{self.marketplace}" if self.plugin and self.marketplace else None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form used by ``--json`` and health."""
        return {"root": str(self.root), "plugin": self.plugin, "marketplace": self.marketplace,
                "pluginId": self.plugin_id, "servers": list(self.servers), "files": list(self.files),
                "ok": not self.problems, "problems": list(self.problems)}


def default_plugin_root() -> Path:
    """The checkout agent-link runs from (the directory above the ``agent_link_core`` package),
    which is the plugin root of both hosts' marketplaces."""
    return Path(agent_link_core.__file__).resolve().parents[1]


def claude_rule_server(plugin: str, server: str) -> str:
    """The permission-rule name of a plugin's MCP server: ``mcp__plugin_<plugin>_<server>``
    with every character outside ``[A-Za-z0-9_-]`` replaced by ``_``."""
    return "mcp__" + re.sub(r"[^A-Za-z0-9_-]", "_", f"plugin:{plugin}:{server}")


def claude_rule(plugin: str, server: str, tool: str) -> str:
    """The permission rule naming one tool: ``<server rule>__<tool>`` (tool normalised alike)."""
    return f"{claude_rule_server(plugin, server)}__{re.sub(r'[^A-Za-z0-9_-]', '_', tool)}"


def _load_json(root: Path, rel: str, out: HostPlugin) -> Any:
    path = root / rel
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        out.problems.append(f"{rel} does not exist in {root}")
        return None
    except (OSError, UnicodeDecodeError) as exc:
        out.problems.append(f"{rel} cannot be read: {exc}")
        return None
    except json.JSONDecodeError as exc:
        out.problems.append(f"{rel} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})")
        return None
    out.files.append(rel)
    return data


def _inside(root: Path, rel: str) -> Path | None:
    target = (root / rel).resolve()
    return target if target == root.resolve() or root.resolve() in target.parents else None


def _starts_agent_link(root: Path, entry: Any) -> bool:
    if not isinstance(entry, dict):
        return False
    command = entry.get("command")
    args = entry.get("args") or []
    if not isinstance(command, str) or not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        return False
    if not args or args[-1] != "mcp":
        return False
    if os.path.basename(command) == "agent-link":
        return True
    if "agent_link_core" in args and "-m" in args:
        return True
    base = root / entry["cwd"] if isinstance(entry.get("cwd"), str) else root
    for arg in args[:-1]:
        for var in _ROOT_VARIABLES:
            arg = arg.replace(var, str(root))
        candidate = Path(arg) if os.path.isabs(arg) else base / arg
        if candidate.name == "agent-link.sh" and candidate.is_file() and _inside(root, str(candidate)) is not None:
            return True
    return False


def _servers(root: Path, declared: Any, default_rel: str, host: str, out: HostPlugin, manifest: str) -> None:
    """Fill ``out.servers`` from a manifest's ``mcpServers`` (inline map or relative path)."""
    if declared is None:
        declared = default_rel
    if isinstance(declared, str):
        where = _inside(root, declared)
        if where is None:
            out.problems.append(f"{manifest} names an MCP server file outside the plugin root: {declared}")
            return
        data = _load_json(root, os.path.relpath(where, root.resolve()), out)
        if data is None:
            return
        servers = data.get("mcpServers", data) if isinstance(data, dict) else None
        source = declared
    else:
        servers, source = declared, manifest
    if not isinstance(servers, dict) or not servers:
        out.problems.append(f"{source} declares no MCP servers")
        return
    for key, entry in servers.items():
        if not _starts_agent_link(root, entry):
            continue
        out.servers.append(key)
        env = entry.get("env") if isinstance(entry.get("env"), dict) else {}
        if env.get("AGENT_LINK_HOST") != host:
            out.problems.append(f"MCP server {key!r} in {source} does not set AGENT_LINK_HOST={host}")
    if not out.servers:
        out.problems.append(f"no MCP server in {source} starts `agent-link mcp`")


def _marketplace(root: Path, rel: str, out: HostPlugin) -> None:
    market = _load_json(root, rel, out)
    if not isinstance(market, dict):
        return
    plugins = market.get("plugins")
    names = [p.get("name") for p in plugins if isinstance(p, dict)] if isinstance(plugins, list) else []
    if not isinstance(market.get("name"), str):
        out.problems.append(f"{rel} has no marketplace name")
    elif out.plugin not in names:
        out.problems.append(f"{rel} does not list the plugin {out.plugin!r}")
    else:
        out.marketplace = market["name"]


def read_codex_plugin(root: Path | None = None) -> HostPlugin:
    """The Codex plugin declared under ``root`` (default :func:`default_plugin_root`)."""
    root = root or default_plugin_root()
    out = HostPlugin("codex", root)
    manifest = _load_json(root, CODEX_MANIFEST, out)
    if not isinstance(manifest, dict):
        if manifest is not None:
            out.problems.append(f"{CODEX_MANIFEST} is not a JSON object")
        return out
    if not isinstance(manifest.get("name"), str) or not manifest["name"]:
        out.problems.append(f"{CODEX_MANIFEST} has no plugin name")
        return out
    out.plugin = manifest["name"]
    declared = manifest.get("mcpServers")
    if declared is not None and not isinstance(declared, str):
        out.problems.append(f"{CODEX_MANIFEST}: mcpServers must be a path relative to the plugin root")
    else:
        _servers(root, declared, "./.mcp.json", "codex", out, CODEX_MANIFEST)
    _marketplace(root, CODEX_MARKETPLACE, out)
    return out


def read_claude_plugin(root: Path | None = None) -> HostPlugin:
    """The Claude Code plugin declared under ``root`` (default :func:`default_plugin_root`)."""
    root = root or default_plugin_root()
    out = HostPlugin("claude", root)
    manifest = _load_json(root, CLAUDE_MANIFEST, out)
    if not isinstance(manifest, dict):
        if manifest is not None:
            out.problems.append(f"{CLAUDE_MANIFEST} is not a JSON object")
        return out
    if not isinstance(manifest.get("name"), str) or not manifest["name"]:
        out.problems.append(f"{CLAUDE_MANIFEST} has no plugin name")
        return out
    out.plugin = manifest["name"]
    _servers(root, manifest.get("mcpServers"), "./.mcp.json", "claude", out, CLAUDE_MANIFEST)
    _marketplace(root, CLAUDE_MARKETPLACE, out)
    return out
