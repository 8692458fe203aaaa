"""agent-link legacy plugin: ``agent-link import-legacy`` folds the original Agent Link's files
into the database (:mod:`agent_link_legacy.engine`, docs/legacy.md), the importers' contract
(:mod:`agent_link_legacy.contract`) and health's ``legacyState`` (:mod:`agent_link_legacy.state`).
The hook plugins register importers with is the core's."""
