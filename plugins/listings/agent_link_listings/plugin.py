"""Entry point of the agent-link listings plugin, registered under the ``agent_link`` group.

Hooks: the ``sessions``, ``who``, ``find``, ``contacts`` and ``watch`` commands, declared here
and imported when run (docs/plugins.md, "Declare now, import when used").
"""

from __future__ import annotations

from agent_link_core.contribute import commands

agent_link_register_commands = commands(
    ("sessions", "agent_link_listings.cli:sessions", "List every agent session on this machine, newest first.", "reader"),
    ("who", "agent_link_listings.cli:who", "Live sessions merged with your contacts.", "reader"),
    ("find", "agent_link_listings.cli:find", "Find an agent by alias, project, title or id: answers none, one or many.", "reader"),
    ("contacts", "agent_link_listings.cli:contacts",
     "Short aliases for sessions (trimmed, lower case, unique, one per session)."),
    ("watch", "agent_link_listings.watch:watch_command",
     "Follow new mail to and from an address, and status changes, until interrupted (Ctrl-C).", "reader"),
)
