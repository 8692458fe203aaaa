"""agent-link harness for opencode (https://opencode.ai): sessions of running ``opencode serve``
servers, found through their HTTP API (see :mod:`agent_link_opencode.harness`)."""

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_opencode.plugin": (
    "agent_link_register_commands",
    "agent_link_register_harnesses",
    "agent_link_register_prompt_hooks",
    "agent_link_register_settings",
    "agent_link_schema",
)}
