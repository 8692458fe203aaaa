"""agent-link approvals: ``agent-link approvals check|apply`` for the tool approvals that Codex
(``config.toml``) and Claude Code (settings ``permissions``) keep for agent-link's MCP tools,
and the ``approvals`` section of ``agent-link health``."""
