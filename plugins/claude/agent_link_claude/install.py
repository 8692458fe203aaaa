"""``agent-link install claude`` and ``agent-link uninstall claude``: the Claude Code plugin
registered, and removed again, through ``claude plugin ...``.

Install copies the plugin folder this package ships (``host_plugin/``: manifest, hook
declarations, launcher; a few KB) to ``~/.local/share/agent-link/host-plugins/claude/``
(:func:`agent_link_hostkit.host_install.plugin_dir`), adds a marketplace manifest naming it, and
runs ``claude plugin marketplace add`` and ``claude plugin install agent-link@agent-link``
(user scope). Claude Code runs a directory marketplace's plugin from that folder, so the
folder stays until uninstall. An earlier registration under the same names (a checkout's
marketplace, an older install) is removed first, so running install again reinstalls.

Uninstall runs ``claude plugin uninstall`` and ``claude plugin marketplace remove``, then
removes what Claude Code leaves behind (its cache keeps an orphaned copy of the plugin,
observed on 2.1.332) and the folder. The mailbox (the state directory) is left alone.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import click

from agent_link_hostkit import host_install
from agent_link_hostkit.host_install import Step

from agent_link_claude import channel, sessions

SOURCE = Path(__file__).with_name("host_plugin")
MARKETPLACE = "agent-link"  # the repository's marketplace name too, so allow rules carry over
PLUGIN_ID = f"{channel.PLUGIN_NAME}@{MARKETPLACE}"
_ABSENT = ("not found",)  # claude's words for an uninstall/remove of something not there


def _marketplace_manifest() -> str:
    return json.dumps({"name": MARKETPLACE, "owner": {"name": "agent-link"},
                       "plugins": [{"name": channel.PLUGIN_NAME, "source": "./",
                                    "description": "agent-link: message other agent sessions on this machine."}]},
                      indent=2) + "\n"


def _forget_steps(claude: str) -> list[Step]:
    return [Step(f"uninstall {PLUGIN_ID} from Claude Code (when installed)",
                 [claude, "plugin", "uninstall", PLUGIN_ID], nothing_to_do=_ABSENT),
            Step(f"remove the {MARKETPLACE} marketplace from Claude Code (when registered)",
                 [claude, "plugin", "marketplace", "remove", MARKETPLACE], nothing_to_do=_ABSENT)]


def install_steps(claude: str, folder: Path, executable: Path) -> list[Step]:
    """What ``agent-link install claude`` does, in order (see the module docstring)."""
    extra = {".claude-plugin/marketplace.json": _marketplace_manifest()}
    return [
        Step(f"copy the plugin folder to {folder} (its launcher runs {executable})",
             action=lambda: host_install.stage_folder(SOURCE, folder, executable, extra)),
        *_forget_steps(claude),
        Step(f"register {folder} as the {MARKETPLACE} marketplace", [claude, "plugin", "marketplace", "add", str(folder)]),
        Step(f"install {PLUGIN_ID} (user scope)", [claude, "plugin", "install", PLUGIN_ID]),
    ]


def uninstall_steps(claude: str, folder: Path, config_dir: Path) -> list[Step]:
    """What ``agent-link uninstall claude`` does, in order (see the module docstring)."""
    cache = config_dir / "plugins" / "cache" / MARKETPLACE
    return [
        *_forget_steps(claude),
        Step(f"remove Claude Code's leftover copy in {cache}", action=lambda: shutil.rmtree(cache, ignore_errors=True)),
        Step(f"remove {folder}", action=lambda: host_install.remove_folder(folder)),
    ]


def _claude(host_bin: str | None, dry_run: bool) -> str:
    return host_install.host_command("claude", "claude", host_bin, dry_run=dry_run)


_host_bin = click.option("--host-bin", metavar="PATH", help="the claude executable (default: claude on PATH)")
_dry_run = click.option("--dry-run", is_flag=True, help="print the steps, change nothing")


@click.command("claude")
@_host_bin
@_dry_run
def install_claude(host_bin: str | None, dry_run: bool) -> None:
    """Install agent-link as a Claude Code plugin (MCP tools, hooks, live delivery)."""
    host_install.carry_out(
        lambda: install_steps(_claude(host_bin, dry_run), host_install.plugin_dir("claude"), host_install.agent_link_executable()),
        dry_run=dry_run,
        done=f"Done. Restart your Claude Code sessions to load it. In `claude -p`, allow the tools with "
             f"--allowedTools mcp__plugin_{channel.PLUGIN_NAME}_{channel.PLUGIN_SERVER_NAME}; for live delivery "
             f"start Claude Code with --channels plugin:{PLUGIN_ID}.")


@click.command("claude")
@_host_bin
@_dry_run
def uninstall_claude(host_bin: str | None, dry_run: bool) -> None:
    """Remove the agent-link Claude Code plugin (your messages stay in the state directory)."""
    host_install.carry_out(
        lambda: uninstall_steps(_claude(host_bin, dry_run), host_install.plugin_dir("claude"), Path(sessions.config_dir(os.environ))),
        dry_run=dry_run,
        done="Done. Restart your Claude Code sessions. The mailbox stays in agent-link's state directory "
             "(`agent-link health` names it); remove that folder yourself to delete your messages.")
