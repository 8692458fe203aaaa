"""agent-link across machines through a NATS JetStream server (README.md)."""

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_machines.plugin": (
    "agent_link_before_send",
    "agent_link_health",
    "agent_link_on_event",
    "agent_link_record_event",
    "agent_link_register_commands",
    "agent_link_register_harnesses",
    "agent_link_register_settings",
    "agent_link_render_envelopes",
    "agent_link_resolve_address",
    "agent_link_resolve_elsewhere",
    "agent_link_schema",
    "agent_link_server_tasks",
    "agent_link_session_roles",
)}

#: the settings each entry module registers, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_SETTINGS = {"agent_link_machines.plugin": (
    {"name": "AGENT_LINK_ENGINE_URL", "kind": "str",
     "doc": "the NATS JetStream server every machine shares, nats://[user:password@|token@]host:4222 (comma-separated for a cluster)"},
    {"name": "AGENT_LINK_ENGINE_CREDS", "kind": "path",
     "doc": "a NATS credentials file (.creds: JWT and NKey seed) for the engine"},
    {"name": "AGENT_LINK_MACHINE", "kind": "str",
     "doc": "this machine's name among the machines (default: the host name's first label)"},
    {"name": "AGENT_LINK_MACHINES_HEARTBEAT_MS", "kind": "int", "default": 5000, "minimum": 100, "maximum": 600000, "warning": "machines_heartbeat_ignored",
     "doc": "how often the relay publishes this machine's sessions, ms; a listing 3 beats old is stale"},
    {"name": "AGENT_LINK_MACHINES_AUTOSTART", "kind": "flag", "default": True,
     "doc": "MCP servers start this machine's relay when none runs (off: run `agent-link machines run` yourself)"},
)}

#: the migrations (owner: versions) each entry module returns; their SQL is imported only
#: when a database lacks one of them
AGENT_LINK_SCHEMA = {"agent_link_machines.plugin": {"machines": (1, 2)}}

#: the harnesses each entry module registers, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HARNESSES = {"agent_link_machines.plugin": (
    {"name": "machines", "target": "agent_link_machines.harness:MachinesHarness"},
)}
