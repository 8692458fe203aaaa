"""agent-link projects plugin (distribution ``agent-link-projects``).

Project orchestrators, worker threads, dependency handoffs and coordination obligations, on
top of the core and the codex plugin (and the roles plugin when it is installed):

* :mod:`agent_link_projects.binding`: the binding file ``<root>/.codex/project-orchestrator.json``;
* :mod:`agent_link_projects.resolve`: the five-step orchestrator resolution;
* :mod:`agent_link_projects.prompt`: the worker prompt;
* :mod:`agent_link_projects.obligations`: the obligation classifier and handoff matching;
* :mod:`agent_link_projects.tools`: the six MCP tools; :mod:`agent_link_projects.plugin`: hooks.
"""

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_projects.plugin": (
    "agent_link_health",
    "agent_link_register_tools",
)}
