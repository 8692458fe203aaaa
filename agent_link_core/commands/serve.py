"""``agent-link mcp`` and ``agent-link hook``: what hosts start. The console script starts
both before click loads (:mod:`agent_link_core.entry`); these commands serve their
``--help`` and a call through click (``build_cli()``, options after ``mcp``)."""

from __future__ import annotations

import sys

import click

from agent_link_core.cli import EXIT_HELP, fail
from agent_link_core.errors import AgentLinkError


@click.command(epilog=EXIT_HELP)
def mcp() -> None:
    """Serve the agent-link MCP tools over stdio (hosts start this)."""
    from agent_link_core.server import main as serve_main

    try:
        serve_main()
    except AgentLinkError as exc:
        fail(exc)

@click.command(context_settings={"ignore_unknown_options": True}, epilog=EXIT_HELP)
@click.argument("host")
@click.argument("event")
def hook(host: str, event: str) -> None:
    """Run a host hook: reads the host's hook JSON on stdin, prints the host's hook JSON.

    Always exits 0, so a failing hook never blocks a prompt.
    """
    from agent_link_core.hook import main as hook_main

    sys.exit(hook_main([host, event]))
