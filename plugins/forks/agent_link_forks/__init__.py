"""agent-link fork jobs (distribution ``agent-link-forks``, entry point ``forks``).

``fork_codex_thread`` forks a Codex thread through its latest completed turn, optionally
compacts the fork, runs a task turn on it with other settings (another model, effort, cwd),
and reports the outcome to the original thread as exactly one reconcile message. Jobs live
in the shared agent-link database; every MCP server runs a sweeper that finishes the jobs of
servers that died. See ``plugins/forks/README.md``.
"""
