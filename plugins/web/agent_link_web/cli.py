"""``agent-link web``: serve the page and print its URL."""

from __future__ import annotations

import asyncio
import errno
import sys
import webbrowser

import click
from agent_link_web.context import act_for_patterns, person_address
from agent_link_web.server import WILDCARDS, WebConfig, allowed_hosts, bind_socket, is_loopback, link_host, serve

from agent_link_core.cli import fail, get_app
from agent_link_core.errors import AgentLinkError

LOOPBACK = "127.0.0.1"


@click.command("web")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="TCP port (0: any free one).")
@click.option("--open", "open_browser", is_flag=True, help="Open the page in the default browser.")
@click.option("--as", "as_name", help="Your name on the page: you appear as user:<name> (default: your login name).")
@click.option("--bind", default=LOOPBACK, show_default=True,
              help="Listen on another address than loopback (anyone who can reach it and has the link gets in).")
@click.pass_context
def web_command(ctx: click.Context, port: int, open_browser: bool, as_name: str | None, bind: str) -> None:
    """Serve a live page of the agents' mail on 127.0.0.1, for you: see conversations, search,
    send and answer as user:<name>. The printed link carries the access token."""
    app = get_app(ctx)
    try:
        # an empty --as is refused, not taken for "not given" (it fell back to the login name)
        person = person_address(as_name, "as") if as_name is not None else person_address(app.config.get("AGENT_LINK_WEB_USER"))
    except AgentLinkError as exc:
        fail(exc)
    try:
        sock = bind_socket(bind, port)
    except OSError as exc:  # a port taken wants another --port; an address that does not resolve or is not this machine's, another --bind
        fix = "Choose another --port." if exc.errno == errno.EADDRINUSE else "Check --bind: an address of this machine (127.0.0.1, ::1, 0.0.0.0)."
        click.echo(f"agent-link: cannot listen on {bind}:{port}: {exc.strerror or exc}. {fix}", err=True)
        sys.exit(1)
    if not is_loopback(bind):  # said once the socket is bound: a bind that fails says only why
        reached = "any address of this machine" if bind in WILDCARDS else bind
        click.echo(f"agent-link: WARNING: serving on {bind}, not only this machine's loopback: anyone who can reach "
                   f"{reached} and gets the link can read and send your agents' mail.", err=True)
    real_port = sock.getsockname()[1]
    config = WebConfig(person=person, port=real_port, hosts=allowed_hosts(real_port, bind),
                       act_for=act_for_patterns(app.config.get("AGENT_LINK_WEB_ACT_FOR")),
                       link_host=link_host(bind), any_ip=bind in WILDCARDS)

    def started() -> None:
        url = config.url()
        click.echo(f"agent-link web: {person} at {url}", nl=True)
        if app.config.get("AGENT_LINK_INSPECT_ALL"):
            click.echo("The page shows every agent's mail (AGENT_LINK_INSPECT_ALL is on).", err=True)
        else:
            click.echo(f"The page shows the mail of {person} only; AGENT_LINK_INSPECT_ALL=1 shows every agent's.", err=True)
        if config.any_ip:
            click.echo(f"From another machine, open the link with this machine's IP address in place of {config.link_host} "
                       "(a host name is refused, against DNS rebinding).", err=True)
        click.echo("Keep this link private: it is the key to the page. Ctrl-C stops the server.", err=True)
        sys.stdout.flush()
        if open_browser:
            webbrowser.open(url)

    asyncio.run(serve(app, config, sock, started))  # Ctrl-C: the group's one line, exit 130
