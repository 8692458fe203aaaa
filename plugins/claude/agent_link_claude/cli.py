"""``agent-link claude-peers``: publish agents as peers of the Claude Code sessions on this machine."""

from __future__ import annotations

import json
import queue
import signal
import sys
from typing import Any

import click


def _target(value: str) -> tuple[str, str | None]:
    address, _, name = value.partition("=")
    return address.strip(), (name.strip() or None)


@click.command("claude-peers")
@click.option("--to", "targets", multiple=True, required=True, metavar="ADDRESS[=NAME]",
              help="an agent to publish (codex:<thread id>, role:<name>, any address), optionally under NAME")
def claude_peers(targets: tuple[str, ...]) -> None:
    """Publish agents so Claude Code sessions (2.1.224+) list them in ListAgents and reach them
    with SendMessage; each such message becomes an agent-link message from the sending session
    (identified by the kernel's peer credentials). Runs until interrupted; prints one JSON line
    per forwarded message. Records are removed when this command ends."""
    from agent_link_core.app import App

    from agent_link_claude.peers import PeerPublisher, forward, peer_name
    from agent_link_claude.sessions import config_dir

    inbox: queue.Queue[tuple[str, str, str] | None] = queue.Queue()
    app = App.create()
    publisher = PeerPublisher(
        config_dir(app.env), lambda target, sid, text: inbox.put((target, sid, text)),
        lambda target, why: print(json.dumps({"rejected": target, "why": why}), flush=True),
    )
    signal.signal(signal.SIGTERM, lambda *_: inbox.put(None))
    try:
        for value in targets:
            address, name = _target(value)
            path = publisher.publish(address, name or peer_name(address))
            print(json.dumps({"published": address, "name": name or peer_name(address), "socket": path}), flush=True)
        while True:
            try:
                item = inbox.get(timeout=0.5)
            except queue.Empty:
                continue
            if item is None:
                break
            result: dict[str, Any] = forward(app, *item)
            print(json.dumps(result), flush=True)
    except KeyboardInterrupt:
        pass
    except RuntimeError as exc:
        click.echo(f"agent-link claude-peers: {exc}", err=True)
        sys.exit(1)
    finally:
        publisher.close()
        app.close()
