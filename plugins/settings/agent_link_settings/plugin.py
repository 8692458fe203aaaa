"""Entry point of the agent-link settings plugin, registered under the ``agent_link`` group.

Hooks: the ``config`` command (``get``, ``set``, ``unset``, ``list``), declared here and imported when run (docs/plugins.md,
"Declare now, import when used"), and health's ``--forget-state-dirs``; the record of the state dirs in use
(``agent_link_app_opened``) and health's warning about the others (``agent_link_health``):
:mod:`agent_link_settings.state_dirs`.
"""

from __future__ import annotations

from agent_link_core import hookimpl

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

    import click

    from agent_link_core.app import App

CONFIG_HELP = "Read and edit the settings file every agent-link process reads (the environment overrides it)."


# Hand-written hooks, not agent_link_core.contribute's one-liners: every App that opens (send, inbox) loads this module
# (agent_link_app_opened) and must not import contribute (tests/test_lazy_plugins.py, INBOX_PLUGIN_MODULES).
@hookimpl(trylast=True)  # after the core's health is loaded: it adds an option to it
def agent_link_register_commands(cli: click.Group) -> None:
    from agent_link_core.contribute import command
    from agent_link_settings.state_dirs import add_forget_option

    cli.add_command(command("config", "agent_link_settings.cli:config", CONFIG_HELP))
    add_forget_option(cli)


@hookimpl
def agent_link_app_opened(app: App) -> None:
    from agent_link_settings.state_dirs import record_state_dir

    record_state_dir(app.config.state_dir, app.env)


@hookimpl
def agent_link_health(app: App) -> tuple[str, dict[str, Any]]:
    """``settings``: the other state dirs used lately (:func:`agent_link_settings.state_dirs.health_section`)."""
    from agent_link_settings.state_dirs import health_section

    return "settings", health_section(app.config.state_dir, app.env)
