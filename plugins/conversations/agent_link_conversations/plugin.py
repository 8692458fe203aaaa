"""Entry point of the agent-link conversations plugin: the ``get_agent_link_conversation``
and ``agent_link_mailbox_inspect`` tools (declared, imported when tools are listed) and ``--thread`` on the core's ``show``
(imported when click's path looks a command up, never by the fast path)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_link_core import hookimpl
from agent_link_core.contribute import registers

if TYPE_CHECKING:  # pragma: no cover
    import click

agent_link_register_tools = registers("agent_link_conversations.tools:TOOLS")


@hookimpl
def agent_link_register_commands(cli: click.Group) -> None:
    from agent_link_conversations.thread_option import add_thread_option

    add_thread_option(cli)
