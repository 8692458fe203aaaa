"""Entry point of the agent-link claude plugin, registered under the ``agent_link`` group.

Contributes the ``claude`` harness, its prompt-hook adapter, the watch of the MCP connection its channel needs, the ``claude-peers`` command, the Claude session tools, the plugin's settings, and one
``before_send`` rule (mailbox-only delivery asked through message_claude_session is stored
with the message, so the recipient's channel bridge leaves it alone).
"""

from __future__ import annotations

from collections.abc import Callable


from agent_link_core import hookimpl
from agent_link_core.contribute import registers
from agent_link_core.config import Setting
from agent_link_core.harness_decl import HarnessDeclaration

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any
    import click

    from agent_link_core.records import PromptHook
    from agent_link_core.records import OutgoingMessage, SendContext
    from agent_link_core.store import Migration

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


#: the ``claude`` harness as the core reads it without its code (transcripts, the inbox
#: socket, channels): built when a command talks to Claude Code or runs inside a session
#: (``identify_caller`` needs a session variable: ``agent_link_claude.harness._env_session_id``)
HARNESS = HarnessDeclaration(
    "claude", "agent_link_claude.harness:ClaudeHarness", session_kind="claude_session",
    host_variables=("CLAUDE_PROJECT_DIR", "CLAUDE_PLUGIN_ROOT", "CLAUDE_SESSION_ID", "CLAUDE_CODE_SESSION_ID"),
    host_priority=10, caller_variables=("CLAUDE_CODE_SESSION_ID", "CLAUDE_SESSION_ID"),
)


@hookimpl
def agent_link_register_harnesses(register: Callable[[HarnessDeclaration], None]) -> None:
    """The ``claude`` harness (declared: :data:`HARNESS`)."""
    register(HARNESS)


@hookimpl
def agent_link_mcp_connection(write: Any, app: Any) -> Any:
    """Watch every MCP connection (health's ``mcp``; the channel's gate reads it). While the ``claude`` harness declares its
    channel (:meth:`~agent_link_claude.harness.ClaudeHarness.declare_channel`), add ``claude/channel`` to the ``initialize``
    answer and refuse ``server/discover`` (:mod:`agent_link_claude.connection`)."""
    from agent_link_claude.connection import McpPeer

    harness = app.harnesses.get("claude")
    capabilities = harness.declare_channel(app) if harness is not None else {}
    return McpPeer(write, refuse_discover=bool(capabilities), capabilities=capabilities)


@hookimpl
def agent_link_register_commands(cli: click.Group) -> None:
    """``agent-link claude-peers`` (:mod:`agent_link_claude.cli`); ``agent-link install claude``
    and ``agent-link uninstall claude`` (:mod:`agent_link_claude.install`)."""
    from agent_link_core.contribute import command
    from agent_link_hostkit.host_install import install_group, uninstall_group

    cli.add_command(command(
        "claude-peers", "agent_link_claude.cli:claude_peers",
        "Publish agents so Claude Code sessions (2.1.224+) list them in ListAgents and reach them"
        " with SendMessage; each such message becomes an agent-link message from the sending session"
        " (identified by the kernel's peer credentials). Runs until interrupted; prints one JSON line"
        " per forwarded message. Records are removed when this command ends."))
    install_group(cli).add_command(command(
        "claude", "agent_link_claude.install:install_claude",
        "Install agent-link as a Claude Code plugin (MCP tools, hooks, live delivery)."))
    uninstall_group(cli).add_command(command(
        "claude", "agent_link_claude.install:uninstall_claude",
        "Remove the agent-link Claude Code plugin (your messages stay in the state directory)."))


@hookimpl
def agent_link_schema() -> list[Migration]:
    """``nudge_blocks``: the Stop hook's one block per interval (:mod:`agent_link_claude.stop`)."""
    from agent_link_claude.stop import NUDGE_BLOCKS_SQL
    from agent_link_core.store import Migration

    return [Migration("claude", 1, NUDGE_BLOCKS_SQL)]


@hookimpl
def agent_link_register_prompt_hooks(register: Callable[[PromptHook], None]) -> None:
    """``agent-link hook claude <SessionStart|UserPromptSubmit|Stop>`` runs :mod:`agent_link_claude.hook`."""
    from agent_link_core.records import PromptHook

    register(PromptHook("claude", "agent_link_claude.hook"))


agent_link_register_tools = registers("agent_link_claude.tools:CLAUDE_TOOLS")
agent_link_register_settings = registers(SETTINGS)


@hookimpl
def agent_link_before_send(message: OutgoingMessage, context: SendContext) -> list[dict[str, Any]] | None:
    if context.tool == "message_claude_session" and context.arguments.get("deliveryPreference") == "mailbox":
        message.metadata["claude"] = {"push": False}
    return None


@hookimpl(optionalhook=True)  # the legacy plugin's hook
def agent_link_register_legacy_importers(register: Callable[[Any], None]) -> None:
    """The original's Claude-side mailbox paths and session ids (``agent-link import-legacy``)."""
    from agent_link_claude.legacy import ClaudeMailboxImporter

    register(ClaudeMailboxImporter())
