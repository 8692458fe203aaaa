"""Entry point of the agent-link waits plugin, registered under the ``agent_link`` group.

Hooks: the ``active_waits`` table (schema) and the wait settings; the ``wait_for_agent`` tool, the
``agent-link wait`` command and ``send``'s ``--wait``; ``agent_link_wait_for_reply`` (``message_agent``'s ``waitForReply``,
``agent-link send --wait``), whose wait ``agent_link_before_send`` notes before the question is stored; ``message_agent``'s
``waitForReply``, ``timeoutMs``, ``pollIntervalMs`` and ``wait`` (``agent_link_extend_tools``), its send carried out by
``agent_link_tool_send``; ``agent_link_held_messages``, asked
by every push and inbox read (answers before reading any message when nobody waits).
"""

from __future__ import annotations

from agent_link_core import hookimpl

#: ``agent-link wait``'s help, as its command's docstring says it (tests/test_lazy_plugins.py compares them)
WAIT_HELP = ("Wait up to --timeout-ms for the resolution of MESSAGE_ID (exit 6 without an answer: timed out, expired or "
             "unresolved; Ctrl-C: 130).")

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    import click

    from collections.abc import Awaitable, Callable
    from typing import Any

    from agent_link_core.app import App
    from agent_link_core.config import Setting
    from agent_link_core.model import Caller
    from agent_link_core.records import OutgoingMessage, SendContext
    from agent_link_core.store import Migration
    from agent_link_core.tools.registry import Progress, ToolCall, ToolSpec


# Hand-written hooks, not agent_link_core.contribute's one-liners: every inbox read loads this module
# (agent_link_held_messages) and must not import contribute (tests/test_lazy_plugins.py, INBOX_PLUGIN_MODULES).
@hookimpl
def agent_link_schema() -> list[Migration]:
    from agent_link_waits.waits import MIGRATIONS

    return list(MIGRATIONS)


@hookimpl
def agent_link_register_settings(register: Callable[[Setting], None]) -> None:
    from agent_link_waits.waits import SETTINGS

    for setting in SETTINGS:
        register(setting)


@hookimpl
def agent_link_register_commands(cli: click.Group) -> None:
    from agent_link_core.contribute import command

    from agent_link_waits.cli import add_wait_option

    cli.add_command(command("wait", "agent_link_waits.cli:wait_command", WAIT_HELP, sender=True, reader=True))
    add_wait_option(cli)


@hookimpl
def agent_link_register_tools(register: Callable[[ToolSpec], None], app: App | None) -> None:
    from agent_link_waits.tools import tools

    for spec in tools(app):
        register(spec)


@hookimpl
def agent_link_held_messages(address: str, rows: list[Any] | None, app: App) -> set[str]:
    from agent_link_waits.waits import held

    return held(app, address, rows)


@hookimpl
def agent_link_before_send(message: OutgoingMessage, context: SendContext, app: App) -> None:
    if context.arguments.get("waitForReply") and message.sender.known:
        from agent_link_waits.waits import waits_of

        waits_of(app).hold(message.sender.address, message.id)


@hookimpl
def agent_link_wait_for_reply(caller: Caller, message_id: str, timeout_ms: int, poll_ms: int, progress: Progress | None,
                              mark: bool, app: App) -> Awaitable[dict[str, Any]]:
    from agent_link_waits.waits import waits_of

    return waits_of(app).wait(caller=caller, agent=message_id, reply_to=message_id, timeout_ms=timeout_ms, poll_ms=poll_ms,
                              progress=progress, mark=mark)


@hookimpl
def agent_link_extend_tools(app: App | None) -> dict[str, dict[str, Any]]:
    from agent_link_waits.tools import MESSAGE_AGENT_WAIT

    return {"message_agent": MESSAGE_AGENT_WAIT}


@hookimpl
def agent_link_tool_send(arguments: dict[str, Any], recipient: str, send: Callable[..., Any], call: ToolCall,
                         app: App) -> Awaitable[dict[str, Any]] | None:
    if not arguments.get("waitForReply"):
        return None
    from agent_link_waits.tools import send_and_wait

    return send_and_wait(app, arguments, recipient, send, call)
