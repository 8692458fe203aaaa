"""agent-link fork jobs (distribution ``agent-link-forks``, entry point ``forks``).

``fork_codex_thread`` forks a Codex thread through its latest completed turn, optionally
compacts the fork, runs a task turn on it with other settings (another model, effort, cwd),
and reports the outcome to the original thread as exactly one reconcile message. Jobs live
in the shared agent-link database; every MCP server runs a sweeper that finishes the jobs of
servers that died. See ``plugins/forks/README.md``.
"""

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_forks.plugin": (
    "agent_link_health",
    "agent_link_register_commands",
    "agent_link_register_legacy_importers",
    "agent_link_register_settings",
    "agent_link_register_tools",
    "agent_link_render_envelope",
    "agent_link_schema",
    "agent_link_server_tasks",
)}
