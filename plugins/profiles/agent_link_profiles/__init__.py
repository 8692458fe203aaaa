"""agent-link profiles plugin: which MCP tools ``agent-link mcp`` lists (the ``AGENT_LINK_TOOLS``
setting, :mod:`agent_link_profiles.profiles`) and ``agent_link_tools``, the tool that reaches
the others (:mod:`agent_link_profiles.gateway`). Without it a server lists every tool."""

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_profiles.profiles": (
    "agent_link_health",
    "agent_link_listed_tools",
    "agent_link_register_settings",
    "agent_link_register_tools",
)}

#: the settings each entry module registers, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_SETTINGS = {"agent_link_profiles.profiles": (
    {"name": "AGENT_LINK_TOOLS", "kind": "str", "default": "all",
     "doc": "MCP tools the server lists: all, messaging, a plugin's name, tool names (comma separated); unset: "
            "messaging for a server a host started (AGENT_LINK_HOST), else all; agent_link_tools reaches the others"},
)}
