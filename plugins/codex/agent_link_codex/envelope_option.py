"""``--envelope agent-link|intercom-v2`` on the core's ``send`` and ``reply``: what the recipient's model reads
(``intercom-v2``: :mod:`agent_link_codex.intercom`, not imported here). Added by the codex plugin's ``agent_link_register_commands``; the core's commands take
the value as ``envelope_format`` (None: the core's own envelope, ``agent-link``)."""

from __future__ import annotations

import click

HELP = {"send": "What the recipient's model reads: agent-link's envelope, or agent-session-intercom's v2 text (for harnesses that support it).",
        "reply": "What the original sender's model reads (intercom-v2: for harnesses that support it)."}


def add_envelope_option(cli: click.Group) -> None:
    """Give the core's ``send`` and ``reply`` (when loaded: the command being run or listed) ``--envelope``, before ``--from``."""
    for name, help_ in HELP.items():
        command = cli.commands.get(name)
        if command is None or command.callback is None or any(p.name == "envelope_format" for p in command.params):
            continue
        at = next((i for i, p in enumerate(command.params) if p.name == "from_address"), len(command.params))
        command.params.insert(at, click.Option(["--envelope", "envelope_format"], type=click.Choice(["agent-link", "intercom-v2"]),
                                               default="agent-link", show_default=True, help=help_,
                                               callback=lambda _ctx, _param, value: None if value == "agent-link" else value))
