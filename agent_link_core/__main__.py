"""``python -m agent_link_core`` behaves like the ``agent-link`` command."""

from agent_link_core.entry import main

main()
