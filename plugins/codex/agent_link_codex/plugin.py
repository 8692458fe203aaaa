"""Entry point of the agent-link codex plugin, registered under the `agent_link` group.

The plugin manager loads this module and registers it; hook implementations live here.
"""
