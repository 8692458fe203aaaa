"""The hook implementations of the opencode plugin (entry point ``opencode``).

Imports stay light: this module is imported by every ``agent-link`` command and MCP server,
so the harness module loads only when a command talks to opencode (:data:`HARNESS`).
"""

from __future__ import annotations

from collections.abc import Callable

from agent_link_core import hookimpl
from agent_link_core.config import Setting
from agent_link_core.contribute import migrations, registers
from agent_link_core.harness_decl import HarnessDeclaration

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any
    import click

#: The plugin's name: its entry point's name and its address scheme.
NAME = "opencode"
#: opencode's own default server port (``opencode serve``, and the TUI started with ``--port``, take it when free).
DEFAULT_SERVERS = "http://127.0.0.1:4096"

SERVERS_SETTING = Setting(
    "AGENT_LINK_OPENCODE_SERVERS", "str", DEFAULT_SERVERS,
    doc="comma-separated base URLs of the opencode servers whose sessions are listed (default http://127.0.0.1:4096)",
)
PASSWORD_SETTING = Setting(
    "AGENT_LINK_OPENCODE_PASSWORD", "str", None, secret=True,
    doc="the OPENCODE_SERVER_PASSWORD of servers whose process cannot be read (default: OPENCODE_SERVER_PASSWORD), HTTP basic auth",
)

DISCOVER_SETTING = Setting(
    "AGENT_LINK_OPENCODE_DISCOVER", "flag", True,
    doc="also list the opencode servers running as this user with this HOME, on any port, with the password from their environment",
)

agent_link_register_settings = registers([SERVERS_SETTING, PASSWORD_SETTING, DISCOVER_SETTING])
agent_link_schema = migrations("agent_link_opencode.schema:MIGRATIONS")


@hookimpl
def agent_link_extend_tools() -> dict[str, dict[str, Any]]:
    """``message_agent``'s result field of a push into an opencode session (``Delivery.fields``)."""
    return {"message_agent": {"output": {"opencodeUserMessageId": {
        "type": "string", "description": "opencode's id of the user message that holds the pushed envelope"}}}}


# `agent-link hook opencode MessagesTransform`: the mail note agent-link's opencode plugin adds
# to a turn's model request (agent_link_opencode.hook)
@hookimpl
def agent_link_register_prompt_hooks(register: Callable[[Any], None]) -> None:
    """``agent-link hook opencode MessagesTransform`` runs :mod:`agent_link_opencode.hook`."""
    from agent_link_core.records import PromptHook

    register(PromptHook(NAME, "agent_link_opencode.hook"))


@hookimpl
def agent_link_register_commands(cli: click.Group) -> None:
    """``agent-link install opencode`` / ``uninstall opencode`` (:mod:`agent_link_opencode.install`)."""
    from agent_link_core.contribute import command
    from agent_link_hostkit.host_install import install_group, uninstall_group

    install_group(cli).add_command(command(
        "opencode", "agent_link_opencode.install:install_opencode",
        "Install agent-link into opencode (its MCP tools, and the plugin that proves who calls them)."))
    uninstall_group(cli).add_command(command(
        "opencode", "agent_link_opencode.install:uninstall_opencode",
        "Remove agent-link from opencode's config (your messages stay in the state directory)."))


#: the ``opencode`` harness as the core reads it without its code: built when a command lists,
#: resolves or delivers to opencode sessions, or a tool call carries the caller argument that
#: agent-link's opencode plugin adds (:mod:`agent_link_opencode.proof`)
HARNESS = HarnessDeclaration(NAME, "agent_link_opencode.harness:OpencodeHarness", session_kind="opencode_session",
                             caller_arguments=("_agentLinkCaller",))


@hookimpl
def agent_link_register_harnesses(register: Callable[[HarnessDeclaration], None]) -> None:
    """The ``opencode`` harness (declared: :data:`HARNESS`)."""
    register(HARNESS)
