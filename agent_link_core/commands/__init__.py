"""The core's ``agent-link`` commands, each imported when it runs (:data:`agent_link_core.cli.CORE_COMMANDS`)."""
