"""agent-link codex plugin (distribution `agent-link-codex`)."""

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_codex.plugin": (
    "agent_link_before_send",
    "agent_link_on_event",
    "agent_link_push_reminders",
    "agent_link_record_event",
    "agent_link_register_commands",
    "agent_link_register_harnesses",
    "agent_link_register_prompt_hooks",
    "agent_link_register_settings",
    "agent_link_register_tools",
    "agent_link_resolve_address",
    "agent_link_schema",
)}
