"""Entry point of the agent-link codex plugin (entry point ``codex`` in group ``agent_link``).

Contributes the ``codex`` harness (addresses ``codex:<threadId>``), its prompt-hook adapter and
reminder turns, the Codex thread tools,
the Codex settings, the plugin's tables, the ``agent-link endpoints`` commands and the
``ep_...:<thread>`` target form. Imports stay light: the heavy modules (the app-server client,
websockets) load when the harness, a tool or a command is first used.
"""

from __future__ import annotations

from collections.abc import Awaitable
from functools import partial

from agent_link_core import hookimpl
from agent_link_core.contribute import migrations, registers
from agent_link_core.harness_decl import HarnessDeclaration

from agent_link_codex.schema import MIGRATIONS
from agent_link_codex.settings import SENDER_OPTIONS, SETTINGS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable
    from collections.abc import Awaitable

    import click

    from agent_link_core.app import App


#: the ``codex`` harness as the core reads it without its code (websockets, the app-server
#: client): built when a command talks to Codex or runs inside a Codex thread
HARNESS = HarnessDeclaration(
    "codex", "agent_link_codex.harness:CodexHarness", session_kind="codex_thread", host_variables=("CODEX_THREAD_ID",),
    host_priority=20, sender_options=SENDER_OPTIONS, caller_variables=("CODEX_THREAD_ID",),
)


@hookimpl
def agent_link_health(app: App) -> tuple[str, dict[str, Any]]:
    """``codexPlugin``: whether Codex's config.toml enables agent-link's plugin, and a server
    of the plugin server's name configured there by hand, which shadows it (a ``problem``
    while the plugin is enabled: :func:`agent_link_codex.install.shadowing_server`)."""
    from agent_link_codex.install import plugin_id, plugin_enabled, shadow_problem, shadowing_server
    from agent_link_codex.settings import codex_home

    config = codex_home(app.env) / "config.toml"
    enabled = plugin_enabled(config)
    found = shadowing_server(config)
    out: dict[str, Any] = {"config": str(config), "pluginId": plugin_id(), "enabled": enabled, "shadowedBy": found}
    if found is not None and enabled:
        problem = shadow_problem(found)
        out["problem"] = {"message": problem.message, "hint": problem.hint}
    return "codexPlugin", out


@hookimpl
def agent_link_register_harnesses(register: Callable[[Any], None]) -> None:
    """The ``codex`` harness (declared: :data:`HARNESS`)."""
    register(HARNESS)


@hookimpl
def agent_link_register_prompt_hooks(register: Callable[[Any], None]) -> None:
    """``agent-link hook codex UserPromptSubmit`` runs :mod:`agent_link_codex.hook`."""
    from agent_link_core.records import PromptHook

    register(PromptHook("codex", "agent_link_codex.hook"))


@hookimpl
def agent_link_server_tasks(app: App) -> list[Callable[[], Awaitable[None]]] | None:
    """Reminder turns in idle Codex threads while the MCP server serves (:meth:`CodexHarness.remind_every`)."""
    harness = app.harnesses.get("codex")
    return None if harness is None else [partial(harness.remind_every, app)]  # type: ignore[attr-defined]


#: the nine Codex thread tools (their module is imported only when the tools are listed)
agent_link_register_tools = registers("agent_link_codex.tools:TOOLS")
#: every Codex setting with its legacy aliases
agent_link_register_settings = registers(SETTINGS)
#: the ``codex_endpoints``, ``codex_pushes`` and ``codex_launches`` tables
agent_link_schema = migrations(MIGRATIONS)


@hookimpl
def agent_link_before_send(message: Any, context: Any, app: App) -> list[dict[str, Any]] | None:
    """Turn overrides (model, effort, cwd) aimed at a Codex thread: checked against the
    override policy before anything is stored (:func:`agent_link_codex.overrides.check_send`);
    a send naming an envelope format (``--envelope``) must be intercom v2 from a Codex thread to a Codex thread."""
    from agent_link_codex.overrides import check_send

    if message.metadata.get("envelopeFormat") is not None:  # the intercom module only for a send that names a format
        from agent_link_codex.intercom import check_sendable

        check_sendable(message.sender.address, message.recipient, message.metadata["envelopeFormat"], context.is_reply)
    return check_send(message, context, app)


@hookimpl
def agent_link_extend_tools() -> dict[str, dict[str, Any]]:
    """``message_agent`` takes the Codex send options and answers their result fields, ``agent_link_health``
    takes ``startAppServer`` (:mod:`agent_link_codex.send_options`)."""
    from agent_link_codex.send_options import EXTENSIONS

    return EXTENSIONS


@hookimpl(tryfirst=True)  # before a plugin that takes the send (waitForReply) and would skip this check
def agent_link_tool_send(arguments: dict[str, Any], recipient: str, app: App) -> None:
    """Codex send options aimed at a session that is no Codex thread are refused before anything is stored, but for
    those its host's plugin adds too (:func:`agent_link_codex.send_options.check_target`); the send itself is left to others."""
    from agent_link_codex.send_options import check_target

    check_target(arguments, recipient, app)


SWITCH_NOTE = "codexSwitchEvents"


@hookimpl
def agent_link_record_event(event: Any, app: App) -> None:
    """A send that changes a thread's model, effort or cwd: one event per switch
    (:func:`agent_link_codex.overrides.switch_events`), recorded in the send's transaction
    like the send itself, so a crash never leaves a switch without its receipt."""
    from agent_link_codex.overrides import switch_events

    events = switch_events(event, app)
    event.notes[SWITCH_NOTE] = events
    for switch in events:
        app.hooks.record_event(switch)


@hookimpl
def agent_link_on_event(event: Any, app: App) -> None:
    """After the commit, the switch events reach the observers too (the receipt log's copy);
    a send no transaction recorded gets its switch events now."""
    from agent_link_codex.overrides import switch_events

    events = event.notes[SWITCH_NOTE] if SWITCH_NOTE in event.notes else switch_events(event, app)
    for switch in events:
        app.hooks.call("agent_link_on_event", event=switch)


@hookimpl(trylast=True)  # after the listings plugin adds `sessions`, which gets --socket
def agent_link_register_commands(cli: click.Group) -> None:
    """``agent-link endpoints add|list|remove``, ``--socket PATH`` on ``sessions`` and ``send``, ``--envelope`` on
    ``send`` and ``reply`` (:mod:`agent_link_codex.envelope_option`), and
    ``agent-link install codex`` / ``uninstall codex`` (:mod:`agent_link_codex.install`); ``--socket``
    is :mod:`agent_link_codex.socket_option`."""
    from agent_link_codex.envelope_option import add_envelope_option
    from agent_link_codex.socket_option import add_socket_option
    from agent_link_core.contribute import command
    from agent_link_hostkit.host_install import install_group, uninstall_group

    cli.add_command(command("endpoints", "agent_link_codex.cli:endpoints",
                            "Codex app-servers to use besides the default ones (a registry only you can read)."))
    install_group(cli).add_command(command(
        "codex", "agent_link_codex.install:install_codex",
        "Install agent-link as a Codex plugin (MCP tools, the prompt hook and the lease guard hook)."))
    uninstall_group(cli).add_command(command(
        "codex", "agent_link_codex.install:uninstall_codex",
        "Remove the agent-link Codex plugin (your messages stay in the state directory)."))
    add_socket_option(cli)
    add_envelope_option(cli)


@hookimpl
def agent_link_resolve_address(address: str, caller_address: str, app: App) -> Awaitable[dict[str, Any]] | None:
    """``ep_<id>:<thread id>`` → ``codex:<thread id>``, once that endpoint confirms it has the
    thread (:func:`agent_link_codex.api.aresolve_composite`: ``not_found``, ``archived``,
    ``codex_unavailable``); None for any other form. The endpoint is kept as metadata.

    Asking the endpoint is I/O, so the answer is an awaitable the core awaits on its own loop
    (the MCP server keeps serving meanwhile)."""
    if not address.startswith("ep_") or "codex" not in app.harnesses:
        return None
    from agent_link_codex.api import aresolve_composite, codex_harness
    from agent_link_codex.endpoints import parse_composite

    parsed = parse_composite(address)
    if parsed is None:
        return None
    harness = codex_harness(app)

    async def resolved() -> dict[str, Any]:
        recipient = await aresolve_composite(harness, *parsed)
        return {"address": recipient, "via": None, "metadata": {"codexEndpoint": parsed[0]}}

    return resolved()
