"""``--socket PATH`` on ``sessions`` and ``send``: one Codex app-server and no other.

Added by the codex plugin's ``agent_link_register_commands`` to every ``agent-link`` process,
so it lives apart from :mod:`agent_link_codex.cli` (the ``endpoints`` commands): a plain
``send`` imports only this, and the Codex API when ``--socket`` is given.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

import click

from agent_link_core.cli import fail, get_app, run_async
from agent_link_core.errors import AgentLinkError
from agent_link_core.lazy_command import LazyCommand

SOCKET_COMMANDS = ("sessions", "send")


def add_socket_option(cli: click.Group) -> None:
    """Give ``sessions`` (the listings plugin's) and the core's ``send`` a ``--socket PATH``
    option (Codex only): the command then talks to that one app-server and no other, and a
    socket that answers is registered for later commands (``registration``/``endpointRegistration``
    in the JSON: added, updated or registry-full, as agent-session-intercom reports it).
    Called after the other plugins added their commands (``trylast``)."""
    for name in SOCKET_COMMANDS:
        command = cli.commands.get(name)
        if isinstance(command, LazyCommand):  # another plugin's declared command: given the option when it loads
            command.load = _loading_with_socket(command.load)  # type: ignore[method-assign]
        elif command is not None and command.callback is not None:
            _add_socket(command)


def _add_socket(command: click.Command) -> None:
    if any(p.name == "socket" for p in command.params):
        return
    command.params.append(click.Option(
        ["--socket"], help="Use only the Codex app-server at this Unix socket; once it answers it is registered."))
    command.callback = _with_socket(command.callback)  # type: ignore[arg-type]


def _loading_with_socket(load: Callable[..., click.Command]) -> Callable[..., click.Command]:
    """``load`` of a declared command, returning a copy of the real command with ``--socket``
    (the module's command stays as it is: another invocation in this process may load no codex)."""
    def load_with_socket(ctx: click.Context | None = None) -> click.Command:
        command = copy.copy(load(ctx))
        command.params = list(command.params)
        _add_socket(command)
        return command

    return load_with_socket


def _with_socket(callback: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(callback)
    def run(*args: Any, socket: str | None = None, **kwargs: Any) -> Any:
        if socket is not None:
            use_only_socket(click.get_current_context(), socket)
        return callback(*args, **kwargs)

    return run


def use_only_socket(ctx: click.Context, path: str) -> None:
    """Restrict this process's Codex harness to the app-server at ``path`` after checking
    that it answers, and register it (a full registry only warns: the socket still works)."""
    from agent_link_codex import api
    from agent_link_codex.endpoints import EndpointRegistry

    app = get_app(ctx)
    data = run_async(api.add_endpoint(app, path))
    harness = api.codex_harness(app)
    try:
        harness.service.only = EndpointRegistry.prepare(path)
    except AgentLinkError as exc:
        fail(exc)
    harness.endpoint_registration = data["registration"]
    if data["registration"] == "registry-full":
        click.echo(f"warning: the endpoint registry is full; {data['endpoint']['id']} is used now but not remembered.", err=True)
