"""agent-link search plugin: full-text search over the mail (SQLite FTS5), by MCP tool
(``search_agent_link_messages``) and CLI (``agent-link search``); see :mod:`agent_link_search.index`."""

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_search.plugin": (
    "agent_link_register_commands",
    "agent_link_register_tools",
    "agent_link_schema",
    "agent_link_sessions_listed",
)}

#: the migrations (owner: versions) each entry module returns; their SQL is imported only
#: when a database lacks one of them
AGENT_LINK_SCHEMA = {"agent_link_search.plugin": {"search": (1,)}}
