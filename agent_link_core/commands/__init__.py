"""The core's ``agent-link`` commands, one module per command or small family, each imported
only when its command runs or a help lists it (:data:`agent_link_core.cli.CORE_COMMANDS`).
What several commands share lives in :mod:`agent_link_core.cli` (the frame) and
:mod:`agent_link_core.commands.mail` (printing and waiting for messages).
"""
