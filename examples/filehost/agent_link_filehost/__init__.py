"""agent-link-filehost: an example harness plugin (see README.md and docs/plugins.md)."""

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_filehost.plugin": (
    "agent_link_extend_tools",
    "agent_link_health",
    "agent_link_register_commands",
    "agent_link_register_harnesses",
    "agent_link_register_settings",
    "agent_link_register_tools",
    "agent_link_schema",
)}

#: the settings each entry module registers, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_SETTINGS = {"agent_link_filehost.plugin": (
    {"name": "AGENT_LINK_FILEHOST_DIR", "kind": "path",
     "doc": "where the filehost example keeps sessions.json and inbox files (default <state>/filehost)"},
)}

#: the migrations (owner: versions) each entry module returns; their SQL is imported only
#: when a database lacks one of them
AGENT_LINK_SCHEMA = {"agent_link_filehost.plugin": {"filehost": (1,)}}

#: the harnesses each entry module registers, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HARNESSES = {"agent_link_filehost.plugin": (
    {"name": "filehost", "target": "agent_link_filehost.harness:FileHostHarness", "caller_variables": ("FILEHOST_SESSION",)},
)}
