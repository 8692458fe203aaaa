"""agent-link listings plugin: the commands that show people the sessions and the mail as it
comes, beyond the core's messaging commands: ``sessions``, ``who``, ``find``, ``contacts``
(:mod:`agent_link_listings.cli`, over :mod:`agent_link_listings.listings`) and ``watch``
(:mod:`agent_link_listings.watch`); a contact's alias names its session wherever the CLI takes
a target (``agent_link_resolve_address``)."""

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_listings.plugin": (
    "agent_link_register_commands",
    "agent_link_resolve_address",
    "agent_link_schema",
)}

#: the migrations (owner: versions) each entry module returns; their SQL is imported only
#: when a database lacks one of them
AGENT_LINK_SCHEMA = {"agent_link_listings.plugin": {"listings": (1,)}}
