"""agent-link legacy plugin: ``agent-link import-legacy`` folds the original Agent Link's files
into the database (:mod:`agent_link_legacy.engine`, docs/legacy.md). The importers' contract
and health's ``legacyState`` stay in the core (:mod:`agent_link_core.legacy`)."""
