"""agent-link harness for opencode (https://opencode.ai): sessions of running ``opencode serve``
servers, found through their HTTP API (see :mod:`agent_link_opencode.harness`)."""

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_opencode.plugin": (
    "agent_link_extend_tools",
    "agent_link_register_commands",
    "agent_link_register_harnesses",
    "agent_link_register_prompt_hooks",
    "agent_link_register_settings",
    "agent_link_schema",
)}

#: the settings each entry module registers, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_SETTINGS = {"agent_link_opencode.plugin": (
    {"name": "AGENT_LINK_OPENCODE_SERVERS", "kind": "str", "default": "http://127.0.0.1:4096",
     "doc": "comma-separated base URLs of the opencode servers whose sessions are listed (default http://127.0.0.1:4096)"},
    {"name": "AGENT_LINK_OPENCODE_PASSWORD", "kind": "str", "secret": True,
     "doc": "the OPENCODE_SERVER_PASSWORD of servers whose process cannot be read (default: OPENCODE_SERVER_PASSWORD), HTTP basic auth"},
    {"name": "AGENT_LINK_OPENCODE_DISCOVER", "kind": "flag", "default": True,
     "doc": "also list the opencode servers running as this user with this HOME, on any port, with the password from their environment"},
)}

#: the migrations (owner: versions) each entry module returns; their SQL is imported only
#: when a database lacks one of them
AGENT_LINK_SCHEMA = {"agent_link_opencode.plugin": {"opencode": (1,)}}

#: the harnesses each entry module registers, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HARNESSES = {"agent_link_opencode.plugin": (
    {"name": "opencode", "target": "agent_link_opencode.harness:OpencodeHarness", "session_kind": "opencode_session",
     "caller_arguments": ("_agentLinkCaller",)},
)}
