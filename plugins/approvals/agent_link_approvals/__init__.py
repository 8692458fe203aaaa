"""agent-link approvals: ``agent-link approvals check|apply`` for the tool approvals that Codex
(``config.toml``) and Claude Code (settings ``permissions``) keep for agent-link's MCP tools,
and the ``approvals`` section of ``agent-link health``."""

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_approvals.plugin": (
    "agent_link_health",
    "agent_link_register_commands",
    "agent_link_register_settings",
)}
