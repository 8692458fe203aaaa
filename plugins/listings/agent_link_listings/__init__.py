"""agent-link listings plugin: the commands that show people the sessions and the mail as it
comes, beyond the core's messaging commands: ``sessions``, ``who``, ``find``, ``contacts``
(:mod:`agent_link_listings.cli`, over :mod:`agent_link_listings.listings`) and ``watch``
(:mod:`agent_link_listings.watch`)."""

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_listings.plugin": (
    "agent_link_register_commands",
)}
