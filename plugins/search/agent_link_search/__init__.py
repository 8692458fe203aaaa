"""agent-link search plugin: full-text search over the mail (SQLite FTS5), by MCP tool
(``search_agent_link_messages``) and CLI (``agent-link search``); see :mod:`agent_link_search.index`."""
