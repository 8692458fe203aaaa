"""agent-link settings plugin: the ``agent-link config`` command, which reads and edits the
settings file (:mod:`agent_link_settings.cli`), and the record of the state dirs processes use, which
health warns about (:mod:`agent_link_settings.state_dirs`). The core reads the file in every process
(:mod:`agent_link_core.settings_file`); without this plugin it is edited by hand."""

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_settings.plugin": (
    "agent_link_app_opened",
    "agent_link_health",
    "agent_link_register_commands",
)}
