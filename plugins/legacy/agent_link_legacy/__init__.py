"""agent-link legacy plugin: ``agent-link import-legacy`` folds the original Agent Link's files
into the database (:mod:`agent_link_legacy.engine`, docs/legacy.md), the importers' contract
(:mod:`agent_link_legacy.contract`) and health's ``legacyState`` (:mod:`agent_link_legacy.state`).
Plugins register importers with this plugin's hook (:mod:`agent_link_legacy.hookspecs`)."""

#: the hooks this plugin calls and others implement (docs/plugins.md, section 3), by the module specifying them;
#: imported when one of them is first called
AGENT_LINK_HOOKSPECS = {"agent_link_legacy.hookspecs": ("agent_link_register_legacy_importers",)}

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_legacy.plugin": (
    "agent_link_health",
    "agent_link_register_commands",
    "agent_link_register_legacy_importers",
    "agent_link_schema",
)}

#: the migrations (owner: versions) each entry module returns; their SQL is imported only
#: when a database lacks one of them
AGENT_LINK_SCHEMA = {"agent_link_legacy.plugin": {"legacy": (1,)}}
