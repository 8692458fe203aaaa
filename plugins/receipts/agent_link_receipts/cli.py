"""``agent-link receipts``: read the audit receipts from a terminal or a script.

* ``agent-link receipts [--json] [--limit N] [--action A] [--kind K] [--target ADDR]
  [--message ID] [--query TEXT]``: newest first; a line per receipt for people (the preview's
  words as written, not the envelope's ``&lt;`` escaping, with control, format and bidi
  characters as ``\\u{XXXX}``), one JSON object (the same as list_agent_link_receipts, escaped
  as stored) with ``--json``;
* ``agent-link receipts export --jsonl``: every receipt, oldest first, one JSON object per
  line on stdout, for archiving or auditing elsewhere.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

import click

from agent_link_core.app import App
from agent_link_core.cli_text import printable
from agent_link_core.errors import AgentLinkError
from agent_link_core.mailbox import Visibility

from agent_link_receipts.build import ACTIONS, KINDS
from agent_link_receipts.context import from_app
from agent_link_receipts.ledger import export_receipts
from agent_link_receipts.recording import repair
from agent_link_receipts.tools import query

PREVIEW_COLUMNS = 60
#: what the envelope's escaping writes (:func:`agent_link_core.envelope.escape_text`): ``&lt;``, ``&gt;``, ``&amp;``,
#: ``&#xHHHH;`` for a format or invisible character, ``\u{XX}`` for a control character
_ESCAPED = re.compile(r"&(lt|gt|amp);|&#x([0-9A-F]{1,6});|\\u\{([0-9A-F]{2,6})\}")
_ENTITIES = {"lt": "<", "gt": ">", "amp": "&"}


def _unescaped(match: re.Match[str]) -> str:
    if match.group(1):
        return _ENTITIES[match.group(1)]
    code = int(match.group(2) or match.group(3), 16)
    if code > 0x10FFFF or (match.group(3) and unicodedata.category(chr(code)) != "Cc"):
        return match.group(0)  # not what the escaping writes: someone's own text
    return chr(code)


def people_text(text: str | None) -> str:
    """A receipt's escaped text (a preview, a purpose) as people read it: the envelope's entities and escapes
    back to the words and characters they stand for, whitespace runs as one space. Not yet terminal-safe:
    :func:`~agent_link_core.cli_text.printable` shows its control, format and bidi characters."""
    return " ".join(_ESCAPED.sub(_unescaped, text or "").split())


def _line(receipt: dict[str, Any]) -> str:
    """One receipt for people, on one line: every field (another agent's words, a plugin's names) printable."""
    action = printable(receipt["action"] + (f"/{receipt['kind']}" if receipt.get("kind") else ""))
    target = printable((receipt.get("target") or {}).get("address") or "-")
    preview = printable(people_text(receipt.get("messagePreview") or receipt.get("purpose"))[:PREVIEW_COLUMNS])
    return f"{printable(receipt['createdAt'])}  {action:<28} {target:<40} {preview}".rstrip()


def _visibility(app: App, everyone: bool) -> Visibility:
    """The CLI caller's view (its session or AGENT_LINK_ADDRESS; unidentified: nothing); ``--all``
    needs the inspect-all setting, and a session's view its host's proof
    (:func:`agent_link_core.identity.prove_reader`): a one-line error otherwise. Missing
    receipts are repaired first."""
    from agent_link_core.cli import fail, run_async
    from agent_link_core.identity import prove_reader
    from agent_link_core.model import RUNTIME_SOURCES

    me = app.caller()
    try:
        # a host's session needs its host's proof (a plain AGENT_LINK_ADDRESS does not); --all
        # is the inspect-all setting's own check
        if me.source in RUNTIME_SOURCES and not everyone:
            run_async(prove_reader(app, me.address))
        visibility = app.mailbox.visible_to(me.address, all_mail=everyone)
    except AgentLinkError as exc:
        fail(exc)
        raise
    repair(app)  # receipts of what a process without plugins recorded (host hooks)
    return visibility


def command_group() -> click.Group:
    """The ``agent-link receipts`` group (built when the command runs: the plugin declares it
    with :func:`agent_link_core.contribute.command`)."""
    from agent_link_core.cli import EXIT_HELP, WholeRange, emit, get_app

    @click.group("receipts", invoke_without_command=True, epilog=EXIT_HELP)
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
    @click.option("--limit", type=WholeRange(1, 500), default=50, show_default=True)
    @click.option("--action", type=click.Choice(ACTIONS), help="Only this action.")
    @click.option("--kind", type=click.Choice(KINDS), help="Only this kind.")
    @click.option("--target", help="Only receipts about this address.")
    @click.option("--message", "message_id", help="Only receipts of this message id.")
    @click.option("--query", "text", help="Case-insensitive text to look for.")
    @click.option("--all", "everyone", is_flag=True, help="Every receipt, not only your mail's (needs AGENT_LINK_INSPECT_ALL=1).")
    @click.pass_context
    def receipts(ctx: click.Context, as_json: bool, limit: int, action: str | None, kind: str | None,
                 target: str | None, message_id: str | None, text: str | None, everyone: bool) -> None:
        """List audit receipts of what you sent or received, newest first."""
        if ctx.invoked_subcommand is not None:
            return
        args = {"limit": limit, "action": action, "kind": kind, "target": target, "messageId": message_id, "query": text}
        app = get_app(ctx)
        data = query(from_app(app), args, _visibility(app, everyone))

        def human(d: dict[str, Any]) -> None:
            if not d["data"]:
                click.echo(f"No receipts match (of {d['scannedReceipts']}).")
                return
            for receipt in d["data"]:
                click.echo(_line(receipt))

        emit(data, as_json, human)

    @receipts.command("export", epilog=EXIT_HELP)
    @click.option("--jsonl", is_flag=True, help="One JSON object per line (the only format).")
    @click.option("--all", "everyone", is_flag=True, help="Every receipt, not only your mail's (needs AGENT_LINK_INSPECT_ALL=1).")
    @click.pass_context
    def export(ctx: click.Context, jsonl: bool, everyone: bool) -> None:
        """Print the receipts of what you sent or received (all with --all), oldest first, for archiving."""
        if not jsonl:
            raise click.UsageError("choose the output format: --jsonl")
        app = get_app(ctx)
        for receipt in export_receipts(from_app(app).store, visibility=_visibility(app, everyone)):
            click.echo(json.dumps(receipt, ensure_ascii=False))

    return receipts
