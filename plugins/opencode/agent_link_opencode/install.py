"""``agent-link install opencode`` and ``agent-link uninstall opencode``: agent-link's MCP server
and its opencode plugin written into, and removed again from, the user's opencode config.

opencode has no command for adding either, so this edits its global config file:
``$OPENCODE_CONFIG`` when set, else ``$XDG_CONFIG_HOME/opencode/opencode.json`` (default
``~/.config/opencode``), or the file given with ``--config``. Install

* writes the JS plugin this package ships (``host_plugin/agent-link.js``: it names the calling
  session in each call of agent-link's tools, :mod:`agent_link_opencode.proof`; refuses edits of
  paths another session leased; adds the mail note) to
  ``~/.local/share/agent-link/host-plugins/opencode/`` (:func:`agent_link_hostkit.host_install.plugin_dir`),
  naming this installation's ``agent-link`` for the hooks it runs;
* sets ``mcp["agent-link"]`` to a local server running this installation's ``agent-link mcp``
  with ``AGENT_LINK_HOST=opencode``, and adds that file's URL to the ``plugin`` list (after
  removing earlier agent-link entries, so running it again changes nothing).

Uninstall removes exactly those two entries (and the ``mcp`` table or ``plugin`` list when they
held nothing else) and the copied folder; every other key of the file stays as it was. A config
that is not plain JSON (comments: ``opencode.jsonc``) is refused, never rewritten.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from agent_link_core.errors import AgentLinkError
from agent_link_hostkit import host_install
from agent_link_hostkit.host_install import Step

SOURCE = Path(__file__).with_name("host_plugin") / "agent-link.js"
#: the MCP server's name in opencode's config (opencode names its tools ``agent-link_<tool>``,
#: which the JS plugin recognises)
SERVER_NAME = "agent-link"
PLUGIN_FILE = "agent-link.js"


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """opencode's global config file: ``$OPENCODE_CONFIG``, else
    ``$XDG_CONFIG_HOME/opencode/opencode.json`` (default ``~/.config``)."""
    env = os.environ if env is None else env
    if env.get("OPENCODE_CONFIG"):
        return Path(env["OPENCODE_CONFIG"])
    base = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".config")
    return Path(base) / "opencode" / "opencode.json"


def read_config(path: Path) -> dict[str, Any]:
    """The config file as an object; ``{}`` when it does not exist.

    :raises AgentLinkError: ``invalid_arguments`` when it is not a JSON object (comments
        included: opencode's JSONC is not rewritten).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise AgentLinkError("invalid_arguments", f"cannot read {path}: {exc.strerror}", {"path": str(path)}) from None
    try:
        config = json.loads(text) if text.strip() else {}
    except ValueError:
        config = None
    if not isinstance(config, dict):
        raise AgentLinkError("invalid_arguments", f"{path} is not a plain JSON object (comments are not rewritten)",
                             {"path": str(path)}, hint="Add the entries by hand (see `agent-link install opencode --dry-run`), "
                             "or point --config at a plain JSON file.")
    return config


def write_config(path: Path, config: dict[str, Any]) -> None:
    """Replace ``path`` with ``config`` (2-space JSON) atomically, keeping the file's mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.agent-link-{os.getpid()}")
    tmp.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if path.exists():
        shutil.copymode(path, tmp)
    os.replace(tmp, path)


def _ours(entry: Any) -> bool:
    """A ``plugin`` list entry that is agent-link's (any installation's copy)."""
    return isinstance(entry, str) and entry.endswith(f"/agent-link/host-plugins/opencode/{PLUGIN_FILE}")


def with_agent_link(config: dict[str, Any], executable: Path, plugin_file: Path) -> dict[str, Any]:
    """``config`` with agent-link's MCP server and plugin entries (the others untouched)."""
    out = dict(config)
    mcp = dict(out.get("mcp") or {})
    mcp[SERVER_NAME] = {"type": "local", "command": [str(executable), "mcp"],
                        "environment": {"AGENT_LINK_HOST": "opencode"}, "enabled": True}
    out["mcp"] = mcp
    plugins = [p for p in out.get("plugin") or [] if not _ours(p)]
    out["plugin"] = [*plugins, plugin_file.as_uri()]
    return out


def without_agent_link(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` without agent-link's entries; an ``mcp`` table or ``plugin`` list left empty
    by that is dropped."""
    out = dict(config)
    if isinstance(out.get("mcp"), dict) and SERVER_NAME in out["mcp"]:
        mcp = {k: v for k, v in out["mcp"].items() if k != SERVER_NAME}
        if mcp:
            out["mcp"] = mcp
        else:
            del out["mcp"]
    if isinstance(out.get("plugin"), list) and any(_ours(p) for p in out["plugin"]):
        plugins = [p for p in out["plugin"] if not _ours(p)]
        if plugins:
            out["plugin"] = plugins
        else:
            del out["plugin"]
    return out


def _check_shapes(config: dict[str, Any], path: Path) -> None:
    if "mcp" in config and not isinstance(config["mcp"], dict) or "plugin" in config and not isinstance(config["plugin"], list):
        raise AgentLinkError("invalid_arguments", f"{path}: `mcp` is not an object or `plugin` is not a list",
                             {"path": str(path)}, hint="Fix the file by hand; opencode would refuse it too.")


#: the line of the JS plugin naming the agent-link command it runs (its hooks)
EXECUTABLE_LINE = 'const AGENT_LINK = "agent-link";'


def stage_plugin(plugin_file: Path, executable: Path) -> None:
    """Write the JS plugin to ``plugin_file`` running ``executable`` for its hooks (the file
    ships running ``agent-link`` from ``PATH``, which opencode's environment may not have).

    :raises OSError: as writing the file does.
    """
    text = SOURCE.read_text(encoding="utf-8")
    if EXECUTABLE_LINE not in text:  # the packaged file and this module disagree: a packaging bug
        raise RuntimeError(f"{SOURCE} lacks the line {EXECUTABLE_LINE!r}")
    text = text.replace(EXECUTABLE_LINE, f"const AGENT_LINK = {json.dumps(str(executable))};", 1)
    plugin_file.parent.mkdir(parents=True, exist_ok=True)
    plugin_file.write_text(text, encoding="utf-8")


def install_steps(path: Path, folder: Path, executable: Path) -> list[Step]:
    """What ``agent-link install opencode`` does, in order (module docstring)."""
    plugin_file = folder / PLUGIN_FILE

    def edit() -> None:
        config = read_config(path)
        _check_shapes(config, path)
        updated = with_agent_link(config, executable, plugin_file)
        if updated != config:
            write_config(path, updated)

    return [Step(f"write agent-link's opencode plugin (running {executable}) to {plugin_file}",
                 action=lambda: stage_plugin(plugin_file, executable)),
            Step(f"add the MCP server {SERVER_NAME!r} ({executable} mcp) and {plugin_file.as_uri()} to {path}", action=edit)]


def uninstall_steps(path: Path, folder: Path) -> list[Step]:
    """What ``agent-link uninstall opencode`` does, in order (module docstring)."""

    def edit() -> None:
        config = read_config(path)
        updated = without_agent_link(config)
        if updated != config:
            write_config(path, updated)

    return [Step(f"remove agent-link's MCP server and plugin from {path} (when there)", action=edit),
            Step(f"remove {folder}", action=lambda: host_install.remove_folder(folder))]


_config = click.option("--config", "config_file", metavar="PATH", type=click.Path(dir_okay=False, path_type=Path),
                       help="opencode's config file (default: $OPENCODE_CONFIG, else ~/.config/opencode/opencode.json)")
_dry_run = click.option("--dry-run", is_flag=True, help="print the steps, change nothing")


@click.command("opencode")
@_config
@_dry_run
def install_opencode(config_file: Path | None, dry_run: bool) -> None:
    """Install agent-link into opencode (its MCP tools, and the plugin that proves who calls them)."""
    host_install.carry_out(
        lambda: install_steps(config_file or config_path(), host_install.plugin_dir("opencode"), host_install.agent_link_executable()),
        dry_run=dry_run, done="Done. Restart opencode (its servers read the config when they start).")


@click.command("opencode")
@_config
@_dry_run
def uninstall_opencode(config_file: Path | None, dry_run: bool) -> None:
    """Remove agent-link from opencode's config (your messages stay in the state directory)."""
    host_install.carry_out(
        lambda: uninstall_steps(config_file or config_path(), host_install.plugin_dir("opencode")),
        dry_run=dry_run,
        done="Done. Restart opencode. The mailbox stays in agent-link's state directory (`agent-link health` names it).")
