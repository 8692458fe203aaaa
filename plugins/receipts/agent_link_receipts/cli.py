"""``agent-link receipts``: read the audit receipts from a terminal or a script.

* ``agent-link receipts [--json] [--limit N] [--action A] [--kind K] [--target ADDR]
  [--message ID] [--query TEXT]``: newest first; a table for people, one JSON object
  (the same as list_agent_link_receipts) with ``--json``;
* ``agent-link receipts export --jsonl``: every receipt, oldest first, one JSON object per
  line on stdout, for archiving or auditing elsewhere.
"""

from __future__ import annotations

import json
from typing import Any

import click

from agent_link_receipts.build import ACTIONS, KINDS
from agent_link_receipts.context import from_app
from agent_link_receipts.ledger import export_receipts
from agent_link_receipts.tools import query

PREVIEW_COLUMNS = 60


def _line(receipt: dict[str, Any]) -> str:
    action = receipt["action"] + (f"/{receipt['kind']}" if receipt.get("kind") else "")
    target = (receipt.get("target") or {}).get("address") or "-"
    preview = " ".join((receipt.get("messagePreview") or receipt.get("purpose") or "").split())[:PREVIEW_COLUMNS]
    return f"{receipt['createdAt']}  {action:<28} {target:<40} {preview}".rstrip()


def register(cli: click.Group) -> None:
    """Add the ``receipts`` group to the root ``agent-link`` group."""
    from agent_link_core.cli import EXIT_HELP, emit, get_app

    @cli.group("receipts", invoke_without_command=True, epilog=EXIT_HELP)
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
    @click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True)
    @click.option("--action", type=click.Choice(ACTIONS), help="Only this action.")
    @click.option("--kind", type=click.Choice(KINDS), help="Only this kind.")
    @click.option("--target", help="Only receipts about this address.")
    @click.option("--message", "message_id", help="Only receipts of this message id.")
    @click.option("--query", "text", help="Case-insensitive text to look for.")
    @click.pass_context
    def receipts(ctx: click.Context, as_json: bool, limit: int, action: str | None, kind: str | None,
                 target: str | None, message_id: str | None, text: str | None) -> None:
        """List audit receipts, newest first."""
        if ctx.invoked_subcommand is not None:
            return
        args = {"limit": limit, "action": action, "kind": kind, "target": target, "messageId": message_id, "query": text}
        data = query(from_app(get_app(ctx)), args)

        def human(d: dict[str, Any]) -> None:
            if not d["data"]:
                click.echo(f"No receipts match (of {d['scannedReceipts']}).")
                return
            for receipt in d["data"]:
                click.echo(_line(receipt))

        emit(data, as_json, human)

    @receipts.command("export", epilog=EXIT_HELP)
    @click.option("--jsonl", is_flag=True, help="One JSON object per line (the only format).")
    @click.pass_context
    def export(ctx: click.Context, jsonl: bool) -> None:
        """Print every receipt, oldest first, for archiving."""
        if not jsonl:
            raise click.UsageError("choose the output format: --jsonl")
        for receipt in export_receipts(from_app(get_app(ctx)).store):
            click.echo(json.dumps(receipt, ensure_ascii=False))
