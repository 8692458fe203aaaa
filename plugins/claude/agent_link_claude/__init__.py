"""agent-link claude plugin (distribution `agent-link-claude`)."""

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_claude.plugin": (
    "agent_link_before_send",
    "agent_link_mcp_connection",
    "agent_link_register_commands",
    "agent_link_register_harnesses",
    "agent_link_register_legacy_importers",
    "agent_link_register_prompt_hooks",
    "agent_link_register_settings",
    "agent_link_register_tools",
    "agent_link_schema",
)}

#: the migrations (owner: versions) each entry module returns; their SQL is imported only
#: when a database lacks one of them
AGENT_LINK_SCHEMA = {"agent_link_claude.plugin": {"claude": (1,)}}

#: the settings each entry module registers, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_SETTINGS = {"agent_link_claude.plugin": (
    {"name": "AGENT_LINK_DISABLE_CHANNEL", "kind": "flag", "default": False,
     "doc": "do not declare the claude/channel capability: no live push into Claude Code sessions"},
    {"name": "AGENT_LINK_DISABLE_CLAUDE_INBOX", "kind": "flag", "default": False,
     "doc": "never push through a Claude Code session's own inbox socket (channels and hooks only)"},
    {"name": "AGENT_LINK_CLAUDE_INBOX_WAIT_MS", "kind": "int", "default": 20000, "minimum": 0, "maximum": 600000,
     "doc": "how long a sender waits (ms) for a Claude session's transcript to show a message pushed to its inbox"},
    {"name": "AGENT_LINK_BIN", "kind": "str",
     "doc": "agent-link executable the host plugins' launcher (hooks/agent-link.sh) runs, as an absolute path"},
)}

#: the harnesses each entry module registers, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HARNESSES = {"agent_link_claude.plugin": (
    {"name": "claude", "target": "agent_link_claude.harness:ClaudeHarness", "session_kind": "claude_session",
     "host_variables": ("CLAUDE_PROJECT_DIR", "CLAUDE_PLUGIN_ROOT", "CLAUDE_SESSION_ID", "CLAUDE_CODE_SESSION_ID"),
     "host_priority": 10, "caller_variables": ("CLAUDE_CODE_SESSION_ID", "CLAUDE_SESSION_ID")},
)}
