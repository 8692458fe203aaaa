"""``agent-link install codex`` and ``agent-link uninstall codex``: the Codex plugin registered,
and removed again, through ``codex plugin ...``.

Install copies the plugin folder this package ships (``host_plugin/``: manifests, hook
declaration, launcher; a few KB) to ``~/.local/share/agent-link/host-plugins/codex/``
(:func:`agent_link_hostkit.host_install.plugin_dir`), adds a marketplace manifest naming it
(``.agents/plugins/marketplace.json``), and runs ``codex plugin marketplace add`` and
``codex plugin add codex-agent-link@agent-link``; Codex copies the plugin into
``$CODEX_HOME/plugins/cache`` (again on every ``plugin add``, so running install again
reinstalls). A marketplace of the same name registered from another folder (a checkout's, an
older install's) is removed first; the plugin itself is never removed on install:
``codex plugin remove`` deletes the person's own tables for it from ``config.toml`` (e.g. the
``[plugins."codex-agent-link@agent-link".mcp_servers.codex-agent-link]`` table approving its
tools, with its comments; observed on 0.171.0), while ``plugin marketplace remove/add`` and
``plugin add`` leave them as they are, and a reinstall from the same folder leaves
``config.toml`` byte for byte. Copies of earlier plugin versions in Codex's cache are removed.

Uninstall runs ``codex plugin remove`` (which also removes Codex's cached copy, leaving its
empty marketplace folder, observed on 0.171.0) and ``codex plugin marketplace remove``, then
removes that empty folder and agent-link's. The mailbox is left alone.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from agent_link_core.errors import AgentLinkError
from agent_link_hostkit import host_install
from agent_link_hostkit.host_install import Step

from agent_link_codex.settings import codex_home

SOURCE = Path(__file__).with_name("host_plugin")
MARKETPLACE = "agent-link"  # the repository's marketplace name too, so config.toml keys carry over


def plugin_name() -> str:
    """The plugin's name, as its manifest (``host_plugin/.codex-plugin/plugin.json``) says."""
    return str(json.loads((SOURCE / ".codex-plugin" / "plugin.json").read_text(encoding="utf-8"))["name"])


def _marketplace_manifest() -> str:
    return json.dumps({"name": MARKETPLACE, "interface": {"displayName": "Agent Link"},
                       "plugins": [{"name": plugin_name(), "source": {"source": "local", "path": "./"},
                                    "policy": {"installation": "AVAILABLE", "authentication": "ON_INSTALL"},
                                    "category": "Developer Tools"}]}, indent=2) + "\n"


def _forget_steps(codex: str) -> list[Step]:
    plugin_id = f"{plugin_name()}@{MARKETPLACE}"
    return [Step(f"remove {plugin_id} from Codex (when installed)", [codex, "plugin", "remove", plugin_id],
                 nothing_to_do=("not installed", "not configured", "not found")),
            Step(f"remove the {MARKETPLACE} marketplace from Codex (when registered)",
                 [codex, "plugin", "marketplace", "remove", MARKETPLACE], nothing_to_do=("is not configured",))]


def plugin_version() -> str:
    """The plugin's version, as its manifest says (Codex's cache keeps a folder per version)."""
    return str(json.loads((SOURCE / ".codex-plugin" / "plugin.json").read_text(encoding="utf-8"))["version"])


def registered_source(config: Path) -> str | None:
    """Where ``config`` (Codex's config.toml) registers the marketplace :data:`MARKETPLACE` from
    (its ``source``), or None when it does not (or the file is missing or unreadable: the
    host's CLI then says what is wrong with it)."""
    parsed = _read_config(config)
    markets = parsed.get("marketplaces") if parsed is not None else None
    entry = markets.get(MARKETPLACE) if isinstance(markets, dict) else None
    if not isinstance(entry, dict):
        return None
    return str(entry.get("source", ""))


def plugin_id() -> str:
    """The plugin's id in Codex's config.toml: ``<plugin>@<marketplace>``."""
    return f"{plugin_name()}@{MARKETPLACE}"


def _read_config(config: Path) -> dict[str, Any] | None:
    import tomllib

    try:
        return tomllib.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None


def plugin_enabled(config: Path) -> bool | None:
    """Whether ``config`` enables the plugin (``[plugins."<id>"] enabled``, true when left
    out); False when it has no such table; None when the file is missing or unreadable."""
    parsed = _read_config(config)
    if parsed is None:
        return None
    plugins = parsed.get("plugins")
    entry = plugins.get(plugin_id()) if isinstance(plugins, dict) else None
    return isinstance(entry, dict) and entry.get("enabled", True) is not False


def shadowing_server(config: Path) -> dict[str, str] | None:
    """A server of the plugin's server's name configured in ``config`` (Codex's config.toml)
    itself, ``[mcp_servers.codex-agent-link]``, as the original Agent Link set it up: Codex then
    runs that one, not the plugin's (checked on 0.171.0: ``codex mcp list`` shows only it, and
    threads get no agent-link tools). agent-link never writes that table. ``{config, table,
    command}``, or None (also when the file is missing or unreadable)."""
    parsed = _read_config(config)
    servers = parsed.get("mcp_servers") if parsed is not None else None
    entry = servers.get(plugin_name()) if isinstance(servers, dict) else None
    if not isinstance(entry, dict):
        return None
    args: list[Any] = entry["args"] if isinstance(entry.get("args"), list) else []
    command = shlex.join([str(a) for a in [entry["command"], *args]]) if isinstance(entry.get("command"), str) else str(entry.get("url", "?"))
    return {"config": str(config), "table": f"[mcp_servers.{plugin_name()}]", "command": command}


def shadow_problem(found: Mapping[str, str], lead: str = "") -> AgentLinkError:
    """What to tell the person about :func:`shadowing_server`'s ``found``: one line (after
    ``lead``) and the fix."""
    return AgentLinkError(
        "codex_unavailable",
        f"{lead}{found['config']} has a {found['table']} table of its own (command: {found['command']}), as the "
        "original Agent Link set up: it shadows agent-link's Codex plugin server of the same name, so Codex threads "
        "get no agent-link tools.",
        hint=f"Remove that table from {found['config']}, then restart Codex. To keep the original's messages, first "
             "run `agent-link import-legacy` (it folds the original's mailbox into agent-link's).",
        details=dict(found))


def install_steps(codex: str, folder: Path, executable: Path, home: Path | None = None) -> list[Step]:
    """What ``agent-link install codex`` does, in order (see the module docstring)."""
    home = codex_home(os.environ) if home is None else home
    extra = {".agents/plugins/marketplace.json": _marketplace_manifest()}
    source = registered_source(home / "config.toml")
    elsewhere = [] if source is None or source == str(folder) else [
        Step(f"remove the {MARKETPLACE} marketplace Codex has from {source} (your settings for the plugin stay)",
             [codex, "plugin", "marketplace", "remove", MARKETPLACE], nothing_to_do=("is not configured",))]
    return [
        Step(f"copy the plugin folder to {folder} (its launcher runs {executable})",
             action=lambda: host_install.stage_folder(SOURCE, folder, executable, extra)),
        *elsewhere,
        Step(f"register {folder} as the {MARKETPLACE} marketplace (when not registered already)",
             [codex, "plugin", "marketplace", "add", str(folder)]),
        Step(f"install {plugin_name()}@{MARKETPLACE} (Codex copies it again)", [codex, "plugin", "add", f"{plugin_name()}@{MARKETPLACE}"]),
        Step("remove Codex's copies of earlier versions of the plugin", action=lambda: _drop_other_versions(home)),
        Step("start agent-link's MCP server once, so the launcher can answer the first thread's opening",
             action=lambda: _keep_opening(folder)),
    ]


def _drop_other_versions(home: Path) -> None:
    import shutil

    versions = home / "plugins" / "cache" / MARKETPLACE / plugin_name()
    for copy in versions.iterdir() if versions.is_dir() else ():
        if copy.is_dir() and copy.name != plugin_version():
            shutil.rmtree(copy, ignore_errors=True)


def _keep_opening(folder: Path) -> None:
    from agent_link_codex.opening import keep_opening_answers

    if not keep_opening_answers(folder):  # the first thread then starts the server the slow way
        click.echo("   (the server did not answer; `agent-link health` says why)", err=True)


def _remove_if_empty(path: Path) -> None:
    if path.is_dir() and not any(path.iterdir()):
        path.rmdir()


def uninstall_steps(codex: str, folder: Path, home: Path) -> list[Step]:
    """What ``agent-link uninstall codex`` does, in order (see the module docstring)."""
    cache = home / "plugins" / "cache" / MARKETPLACE
    return [*_forget_steps(codex),
            Step(f"remove the empty {cache} Codex leaves", action=lambda: _remove_if_empty(cache)),
            Step(f"remove {folder}", action=lambda: host_install.remove_folder(folder))]


_host_bin = click.option("--host-bin", metavar="PATH",
                         help="the codex executable (default: $AGENT_LINK_CODEX_BIN, else codex on PATH)")
_dry_run = click.option("--dry-run", is_flag=True, help="print the steps, change nothing")


def _codex(host_bin: str | None, dry_run: bool) -> str:
    return host_install.host_command("codex", "codex", host_bin or os.environ.get("AGENT_LINK_CODEX_BIN"), dry_run=dry_run)


@click.command("codex")
@_host_bin
@_dry_run
def install_codex(host_bin: str | None, dry_run: bool) -> None:
    """Install agent-link as a Codex plugin (MCP tools, the prompt hook and the lease guard hook)."""
    host_install.carry_out(
        lambda: install_steps(_codex(host_bin, dry_run), host_install.plugin_dir("codex"), host_install.agent_link_executable()),
        dry_run=dry_run,
        problem=_shadowed,
        done=f"Done. Restart Codex (new threads load it). Trust its hooks with /hooks (the prompt hook, and the lease guard when agent-link-leases is installed), and approve the tools: "
             f"{approve_hint()}")


def _shadowed() -> AgentLinkError | None:
    found = shadowing_server(codex_home(os.environ) / "config.toml")
    return None if found is None else shadow_problem(found, "the plugin is installed, but ")


def approve_hint() -> str:
    """How to approve agent-link's tools in Codex: the ``approvals apply`` command on the real
    config when that command is installed, else the config.toml lines and how to get it."""
    plugin_id = f"{plugin_name()}@{MARKETPLACE}"
    config = codex_home(os.environ) / "config.toml"
    by_hand = (f"[plugins.\"{plugin_id}\".mcp_servers.{plugin_name()}] default_tools_approval_mode = \"approve\" "
               f"in {config}")
    if host_install.has_command("approvals", "apply"):
        return f"`agent-link approvals apply --codex-config {shlex.quote(str(config))}` (or {by_hand})."
    return (f"{by_hand} (the approvals plugin, not installed here, does it for you: install agent-link with "
            f"every plugin, `{host_install.INSTALL_EVERYDAY}` in the checkout, then `agent-link approvals apply`).")


@click.command("codex")
@_host_bin
@_dry_run
def uninstall_codex(host_bin: str | None, dry_run: bool) -> None:
    """Remove the agent-link Codex plugin (your messages stay in the state directory)."""
    host_install.carry_out(
        lambda: uninstall_steps(_codex(host_bin, dry_run), host_install.plugin_dir("codex"), codex_home(os.environ)),
        dry_run=dry_run,
        done="Done. Restart Codex. The mailbox stays in agent-link's state directory (`agent-link health` "
             "names it); remove that folder yourself to delete your messages.")
