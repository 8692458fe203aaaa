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
    "agent_link_render_envelopes",
    "agent_link_schema",
    "agent_link_server_tasks",
)}

#: the settings each entry module registers, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_SETTINGS = {"agent_link_forks.plugin": (
    {"name": "AGENT_LINK_FORKS_LEASE_MS", "kind": "int", "default": 60000, "minimum": 1000, "maximum": 3600000, "warning": "forks_lease_ignored",
     "doc": "how long a server's claim on a running fork job lasts without renewal, in ms"},
    {"name": "AGENT_LINK_FORKS_SWEEP_MS", "kind": "int", "default": 60000, "minimum": 1000, "maximum": 3600000, "warning": "forks_sweep_ignored",
     "doc": "how often each MCP server looks for fork jobs left by a server that stopped, in ms"},
    {"name": "AGENT_LINK_FORKS_START_TIMEOUT_MS", "kind": "int", "default": 900000, "minimum": 1000, "maximum": 86400000, "warning": "forks_start_timeout_ignored",
     "doc": "a fork job whose task never started is failed after this many ms"},
)}

#: the migrations (owner: versions) each entry module returns; their SQL is imported only
#: when a database lacks one of them
AGENT_LINK_SCHEMA = {"agent_link_forks.plugin": {"forks": (1,)}}
