"""agent-link settings plugin: the ``agent-link config`` command, which reads and edits the
settings file (:mod:`agent_link_settings.cli`). The core reads the file in every process
(:mod:`agent_link_core.settings_file`); without this plugin it is edited by hand."""
