"""Entry point of the agent-link settings plugin, registered under the ``agent_link`` group.

Hooks: the ``config`` command (``get``, ``set``, ``unset``, ``list``), declared here and
imported when run (docs/plugins.md, "Declare now, import when used").
"""

from __future__ import annotations

from agent_link_core.contribute import commands

agent_link_register_commands = commands(
    ("config", "agent_link_settings.cli:config",
     "Read and edit the settings file every agent-link process reads (the environment overrides it)."),
)
