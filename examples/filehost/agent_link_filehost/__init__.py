"""agent-link-filehost: an example harness plugin (see README.md and docs/plugins.md)."""

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_filehost.plugin": (
    "agent_link_health",
    "agent_link_register_commands",
    "agent_link_register_harnesses",
    "agent_link_register_settings",
    "agent_link_register_tools",
    "agent_link_schema",
)}
