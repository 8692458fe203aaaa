"""agent-link claude plugin (distribution `agent-link-claude`)."""

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_claude.plugin": (
    "agent_link_before_send",
    "agent_link_register_commands",
    "agent_link_register_harnesses",
    "agent_link_register_legacy_importers",
    "agent_link_register_prompt_hooks",
    "agent_link_register_settings",
    "agent_link_register_tools",
)}
