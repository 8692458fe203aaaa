"""What the repository's host plugin manifests declare: the plugin id and the MCP server keys
that approvals are keyed by, and whether those servers really start agent-link.

Nothing here is hard-coded from the manifests' current content. Each host's marketplace file
at the repository root names the plugins and the folder each comes from (``source``: a
relative path, or ``{"path": ...}``); in that plugin folder:

* Codex (marketplace ``.agents/plugins/marketplace.json``): ``.codex-plugin/plugin.json``
  (``name``; ``mcpServers``, a path relative to the plugin folder, ``./.mcp.json`` when
  absent). The plugin id is ``<plugin>@<marketplace>``, the MCP server keys are the keys of
  the server file's ``mcpServers``.
* Claude Code (marketplace ``.claude-plugin/marketplace.json``): ``.claude-plugin/plugin.json``
  (``name``; ``mcpServers`` inline, or a path). Claude Code names a plugin's server
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
from agent_link_hostkit import host_install

CODEX_MANIFEST = ".codex-plugin/plugin.json"
CODEX_MARKETPLACE = ".agents/plugins/marketplace.json"
CLAUDE_MANIFEST = ".claude-plugin/plugin.json"
CLAUDE_MARKETPLACE = ".claude-plugin/marketplace.json"
_ROOT_VARIABLES = ("${PLUGIN_ROOT}", "${CLAUDE_PLUGIN_ROOT}")


@dataclass
class HostPlugin:
    """The plugin one host installs from the repository.

    :param host: ``codex`` or ``claude``.
    :param root: the marketplace root the manifests were read from (the checkout).
    :param plugin_root: the plugin's folder, as the marketplace names it.
    :param plugin: the manifest's ``name`` (None when unreadable).
    :param marketplace: the marketplace ``name`` listing the plugin (None when not listed).
    :param servers: MCP server keys that start agent-link.
    :param problems: what is wrong with the manifests, one sentence each (empty = fine).
    :param files: the files read (manifests, server file, launcher), relative to ``root``.
    """

    host: str
    root: Path
    plugin_root: Path
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
        return {"root": str(self.root), "pluginRoot": str(self.plugin_root), "plugin": self.plugin,
                "marketplace": self.marketplace, "pluginId": self.plugin_id, "servers": list(self.servers),
                "files": list(self.files), "ok": not self.problems, "problems": list(self.problems)}


def default_plugin_root() -> Path:
    """The checkout agent-link runs from (the directory above the ``agent_link_core`` package),
    which holds both hosts' marketplace files."""
    return Path(agent_link_core.__file__).resolve().parents[1]


def _default_root(host: str, marketplace: str) -> Path:
    """The checkout when it has ``host``'s marketplace file; else, for an installation without
    a checkout (pipx, ``uv tool``), the marketplace ``agent-link install <host>`` made
    (:func:`agent_link_hostkit.host_install.plugin_dir`) when it exists; else the checkout
    (whose missing file is then reported)."""
    checkout = default_plugin_root()
    if (checkout / marketplace).is_file():
        return checkout
    installed = host_install.plugin_dir(host)
    return installed if (installed / marketplace).is_file() else checkout


def claude_rule_server(plugin: str, server: str) -> str:
    """The permission-rule name of a plugin's MCP server: ``mcp__plugin_<plugin>_<server>``
    with every character outside ``[A-Za-z0-9_-]`` replaced by ``_``."""
    return "mcp__" + re.sub(r"[^A-Za-z0-9_-]", "_", f"plugin:{plugin}:{server}")


def claude_rule(plugin: str, server: str, tool: str) -> str:
    """The permission rule naming one tool: ``<server rule>__<tool>`` (tool normalised alike)."""
    return f"{claude_rule_server(plugin, server)}__{re.sub(r'[^A-Za-z0-9_-]', '_', tool)}"


def _rel(out: HostPlugin, path: Path) -> str:
    return os.path.relpath(path, out.root)


def _load_json(path: Path, out: HostPlugin) -> Any:
    rel = _rel(out, path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        out.problems.append(f"{rel} does not exist in {out.root}")
        return None
    except (OSError, UnicodeDecodeError) as exc:
        out.problems.append(f"{rel} cannot be read: {exc}")
        return None
    except json.JSONDecodeError as exc:
        out.problems.append(f"{rel} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})")
        return None
    except RecursionError:
        out.problems.append(f"{rel} is not valid JSON (nested too deeply)")
        return None
    out.files.append(rel)
    return data


def _inside(root: Path, target: Path) -> Path | None:
    """``target`` resolved, when it lies in ``root`` (or is it)."""
    resolved = target.resolve()
    base = root.resolve()
    return resolved if resolved == base or base in resolved.parents else None


def _launcher(root: Path, entry: Any) -> Path | None | bool:
    """How a server entry starts agent-link: the launcher script it runs (a path inside
    ``root``), True for a direct ``agent-link``/``python -m agent_link_core`` command, or
    None when it does not run ``agent-link mcp``."""
    if not isinstance(entry, dict):
        return None
    command = entry.get("command")
    args = entry.get("args") or []
    if not isinstance(command, str) or not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        return None
    if not args or args[-1] != "mcp":
        return None
    if os.path.basename(command) == "agent-link" or ("agent_link_core" in args and "-m" in args):
        return True
    base = root / entry["cwd"] if isinstance(entry.get("cwd"), str) else root
    for arg in args[:-1]:
        for var in _ROOT_VARIABLES:
            arg = arg.replace(var, str(root))
        candidate = Path(arg) if os.path.isabs(arg) else base / arg
        if candidate.name == "agent-link.sh" and candidate.is_file():
            return _inside(root, candidate)
    return None


def _servers(declared: Any, default_rel: str, host: str, out: HostPlugin, manifest: str) -> None:
    """Fill ``out.servers`` from a manifest's ``mcpServers`` (inline map or relative path)."""
    if declared is None:
        declared = default_rel
    if isinstance(declared, str):
        where = _inside(out.plugin_root, out.plugin_root / declared)
        if where is None:
            out.problems.append(f"{manifest} names an MCP server file outside the plugin folder: {declared}")
            return
        data = _load_json(where, out)
        if data is None:
            return
        servers = data.get("mcpServers", data) if isinstance(data, dict) else None
        source = _rel(out, where)
    else:
        servers, source = declared, manifest
    if not isinstance(servers, dict) or not servers:
        out.problems.append(f"{source} declares no MCP servers")
        return
    for key, entry in servers.items():
        launcher = _launcher(out.plugin_root, entry)
        if launcher is None:
            continue
        out.servers.append(key)
        if isinstance(launcher, Path) and _rel(out, launcher) not in out.files:
            out.files.append(_rel(out, launcher))
        env = entry.get("env") if isinstance(entry.get("env"), dict) else {}
        if env.get("AGENT_LINK_HOST") != host:
            out.problems.append(f"MCP server {key!r} in {source} does not set AGENT_LINK_HOST={host}")
    if not out.servers:
        out.problems.append(f"no MCP server in {source} starts `agent-link mcp`")


def _source_path(entry: dict[str, Any]) -> str | None:
    source = entry.get("source")
    if isinstance(source, str):
        return source
    if isinstance(source, dict) and isinstance(source.get("path"), str):
        return str(source["path"])
    return None


def _read(host: str, root: Path, market_rel: str, manifest_rel: str, read_servers: Any) -> HostPlugin:
    """Read the marketplace, then the manifest of the first listed plugin that has one and
    whose MCP server starts agent-link (else the first listed plugin that has one)."""
    first: HostPlugin | None = None
    probe = HostPlugin(host, root, root)
    market = _load_json(root / market_rel, probe)
    plugins = market.get("plugins") if isinstance(market, dict) else None
    if isinstance(market, dict) and not isinstance(market.get("name"), str):
        probe.problems.append(f"{market_rel} has no marketplace name")
    for entry in plugins if isinstance(plugins, list) else []:
        path = _source_path(entry) if isinstance(entry, dict) else None
        folder = _inside(root, root / path) if path is not None else None
        if folder is None or not (folder / manifest_rel).is_file():
            continue
        out = HostPlugin(host, root, folder, files=list(probe.files), problems=list(probe.problems))
        read_servers(out, folder / manifest_rel)
        if out.plugin is not None and out.plugin != entry.get("name"):
            out.problems.append(f"{market_rel} lists {entry.get('name')!r} from {path}, whose manifest names {out.plugin!r}")
        elif out.plugin is not None and isinstance(market.get("name"), str):
            out.marketplace = market["name"]
        if out.servers:
            return out
        first = first or out
    if first is not None:
        return first
    if market is not None:
        probe.problems.append(f"{market_rel} lists no plugin with a {manifest_rel} inside this folder")
    return probe


def _named_manifest(out: HostPlugin, path: Path) -> tuple[dict[str, Any], str] | None:
    """The manifest at ``path`` and its path as shown, once it names its plugin (recorded in
    ``out.plugin``); None, with the problem noted, when it does not."""
    manifest = _load_json(path, out)
    rel = _rel(out, path)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("name"), str) or not manifest["name"]:
        if manifest is not None:
            out.problems.append(f"{rel} has no plugin name")
        return None
    out.plugin = manifest["name"]
    return manifest, rel


def _read_codex_manifest(out: HostPlugin, path: Path) -> None:
    named = _named_manifest(out, path)
    if named is None:
        return
    manifest, rel = named
    declared = manifest.get("mcpServers")
    if declared is not None and not isinstance(declared, str):
        out.problems.append(f"{rel}: mcpServers must be a path relative to the plugin folder")
    else:
        _servers(declared, "./.mcp.json", "codex", out, rel)


def _read_claude_manifest(out: HostPlugin, path: Path) -> None:
    named = _named_manifest(out, path)
    if named is not None:
        manifest, rel = named
        _servers(manifest.get("mcpServers"), "./.mcp.json", "claude", out, rel)


def read_codex_plugin(root: Path | None = None) -> HostPlugin:
    """The Codex plugin offered by the marketplace under ``root`` (default: the checkout's, or
    the one ``agent-link install codex`` made)."""
    return _read("codex", root or _default_root("codex", CODEX_MARKETPLACE), CODEX_MARKETPLACE, CODEX_MANIFEST, _read_codex_manifest)


def read_claude_plugin(root: Path | None = None) -> HostPlugin:
    """The Claude Code plugin offered by the marketplace under ``root`` (default: the
    checkout's, or the one ``agent-link install claude`` made)."""
    return _read("claude", root or _default_root("claude", CLAUDE_MARKETPLACE), CLAUDE_MARKETPLACE, CLAUDE_MANIFEST, _read_claude_manifest)
