"""agent-link across machines through a NATS JetStream server (README.md)."""

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_machines.plugin": (
    "agent_link_health",
    "agent_link_on_event",
    "agent_link_record_event",
    "agent_link_register_commands",
    "agent_link_register_harnesses",
    "agent_link_register_settings",
    "agent_link_render_envelope",
    "agent_link_resolve_address",
    "agent_link_resolve_elsewhere",
    "agent_link_schema",
    "agent_link_server_tasks",
    "agent_link_session_roles",
)}
