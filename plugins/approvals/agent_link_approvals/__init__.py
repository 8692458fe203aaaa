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

#: the settings each entry module registers, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_SETTINGS = {"agent_link_approvals.plugin": (
    {"name": "AGENT_LINK_CODEX_CONFIG", "kind": "str", "aliases": ("CODEX_CONFIG",),
     "doc": "the Codex config.toml `agent-link approvals check` reads when no file is named"},
    {"name": "AGENT_LINK_CHECK_REAL_CONFIG", "kind": "flag", "default": False,
     "doc": "`agent-link approvals check` with nothing named reads the real $CODEX_HOME/config.toml"},
    {"name": "AGENT_LINK_CODEX_PLUGIN_ID", "kind": "str", "aliases": ("CODEX_AGENT_LINK_PLUGIN_ID",),
     "doc": "the Codex plugin id approvals are keyed by (default: <plugin>@<marketplace> from the manifests)"},
)}
