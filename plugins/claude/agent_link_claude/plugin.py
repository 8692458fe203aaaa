"""Entry point of the agent-link claude plugin, registered under the ``agent_link`` group.

Contributes the ``claude`` harness, its prompt-hook adapter, the ``claude-peers`` command, the Claude session tools, the plugin's settings, and one
``before_send`` rule (mailbox-only delivery asked through message_claude_session is stored
with the message, so the recipient's channel bridge leaves it alone).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from agent_link_core import hookimpl
from agent_link_core.contribute import registers
from agent_link_core.config import Setting
from agent_link_core.records import PromptHook

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.harness import Harness
    from agent_link_core.mailbox import OutgoingMessage, SendContext

SETTINGS = (
    Setting("AGENT_LINK_DISABLE_CHANNEL", "flag", False,
            doc="do not declare the claude/channel capability: no live push into Claude Code sessions"),
    Setting("AGENT_LINK_DISABLE_CLAUDE_INBOX", "flag", False,
            doc="never push through a Claude Code session's own inbox socket (channels and hooks only)"),
    Setting("AGENT_LINK_CLAUDE_INBOX_WAIT_MS", "int", 20000, minimum=0, maximum=600000,
            doc="how long a sender waits (ms) for a Claude session's transcript to show a message pushed to its inbox"),
    Setting("AGENT_LINK_BIN", "str", None,
            doc="agent-link executable the host plugins' launcher (hooks/agent-link.sh) runs, as an absolute path"),
)


@hookimpl
def agent_link_register_harnesses(register: Callable[[Harness], None]) -> None:
    from agent_link_claude.harness import ClaudeHarness

    register(ClaudeHarness())


@hookimpl
def agent_link_register_commands(cli: click.Group) -> None:
    """``agent-link claude-peers`` (:mod:`agent_link_claude.cli`); ``agent-link install claude``
    and ``agent-link uninstall claude`` (:mod:`agent_link_claude.install`)."""
    from agent_link_claude.cli import claude_peers
    from agent_link_claude.install import install_claude, uninstall_claude
    from agent_link_core.host_install import install_group, uninstall_group

    cli.add_command(claude_peers)
    install_group(cli).add_command(install_claude)
    uninstall_group(cli).add_command(uninstall_claude)


@hookimpl
def agent_link_register_prompt_hooks(register: Callable[[PromptHook], None]) -> None:
    """``agent-link hook claude <SessionStart|UserPromptSubmit|Stop>`` runs :mod:`agent_link_claude.hook`."""
    register(PromptHook("claude", "agent_link_claude.hook"))


agent_link_register_tools = registers("agent_link_claude.tools:CLAUDE_TOOLS")
agent_link_register_settings = registers(SETTINGS)


@hookimpl
def agent_link_before_send(message: OutgoingMessage, context: SendContext) -> list[dict[str, Any]] | None:
    if context.tool == "message_claude_session" and context.arguments.get("deliveryPreference") == "mailbox":
        message.metadata["claude"] = {"push": False}
    return None


@hookimpl
def agent_link_register_legacy_importers(register: Callable[[Any], None]) -> None:
    """The original's Claude-side mailbox paths and session ids (``agent-link import-legacy``)."""
    from agent_link_claude.legacy import ClaudeMailboxImporter

    register(ClaudeMailboxImporter())
