"""agent-link leases plugin (distribution ``agent-link-leases``).

Agents claim the files they are about to edit (files, directories or globs under a project
root); a claim that overlaps another session's lease is refused whole, naming every holder.

* :mod:`agent_link_leases.patterns`: patterns and the exact overlap rule;
* :mod:`agent_link_leases.store`: the ``leases`` table, claims, releases, listings;
* :mod:`agent_link_leases.tools`: the MCP tools; :mod:`agent_link_leases.cli`: the commands;
* :mod:`agent_link_leases.plugin`: the hooks.
"""

#: the hooks this plugin specifies (docs/plugins.md, section 3), by the module specifying them; imported when one is first called
AGENT_LINK_HOOKSPECS = {"agent_link_leases.hookspecs": ("agent_link_claim_paths", "agent_link_release_claims")}

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_leases.plugin": (
    "agent_link_claim_paths",
    "agent_link_health",
    "agent_link_record_event",
    "agent_link_register_commands",
    "agent_link_register_panels",
    "agent_link_register_prompt_hooks",
    "agent_link_register_settings",
    "agent_link_register_tools",
    "agent_link_release_claims",
    "agent_link_schema",
)}

#: the settings each entry module registers, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_SETTINGS = {"agent_link_leases.plugin": (
    {"name": "AGENT_LINK_LEASE_TTL_MS", "kind": "int", "default": 3600000, "minimum": 1000, "maximum": 604800000,
     "doc": "a lease's time to live (ms) when the claim gives none"},
    {"name": "AGENT_LINK_LEASE_ADMIN", "kind": "flag", "default": False,
     "doc": "lets `agent-link release --holder` and the web page's Release buttons end another holder's (stale) leases"},
)}

#: the migrations (owner: versions) each entry module returns; their SQL is imported only
#: when a database lacks one of them
AGENT_LINK_SCHEMA = {"agent_link_leases.plugin": {"leases": (1, 2, 3)}}
