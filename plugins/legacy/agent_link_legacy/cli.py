"""``agent-link import-legacy [--dry-run] [--from DIR]``: fold the original's files into the
database (:mod:`agent_link_legacy.engine`, docs/legacy.md)."""

from __future__ import annotations

import sys
from typing import Any

import click

from agent_link_core.cli import emit, fail, get_app, printable
from agent_link_core.errors import AgentLinkError


def _human(report: dict[str, Any]) -> None:
    """One line per importer, its first bad lines under it, then what was left undone; what the original's files
    hold (a file's name, an error quoting a line) on its line, control and bidi characters escaped."""
    verb = "would import" if report["dryRun"] else "imported"
    click.echo(f"original's files in {printable(report['sourceDir'])}" + (" (dry run: nothing written)" if report["dryRun"] else ""))
    for item in report["importers"]:
        if not item["ok"]:
            click.echo(f"  {item['name']}: FAILED, nothing imported: {printable(item['error'])}")
            continue
        if not item["files"] and not item["unreadable"]:
            click.echo(f"  {item['name']}: no files")
            continue
        line = f"  {item['name']}: {verb} {item['imported']}, already present {item['alreadyPresent']}"
        if item["unreadable"]:
            line += f", unreadable {item['unreadable']}"
        if item.get("details"):  # e.g. duplicate lines: every line of the files is counted somewhere
            line += " (" + ", ".join(f"{key} {n}" for key, n in item["details"].items()) + ")"
        click.echo(line)
        for bad in [*item["badLines"], *item.get("flagged", [])]:
            where = f"{printable(bad['file'])}:{bad['line']}" if bad["line"] is not None else printable(bad["file"])
            click.echo(f"    {where}: {printable(bad.get('error') or bad.get('note'))}")
        shown = len(item["badLines"])
        if item["unreadable"] > shown:
            click.echo(f"    ... and {item['unreadable'] - shown} more unreadable (only the first {shown} are named)")
        for note in item.get("notes", []):
            click.echo(f"    {printable(note)}")
    if report["failed"]:
        click.echo(f"failed: {', '.join(report['failed'])} (the others were imported; run again once fixed)")


@click.command("import-legacy")
@click.option("--dry-run", is_flag=True, help="Count what would be imported; write nothing.")
@click.option("--from", "source_dir", type=str, default=None,
              help="The directory the original kept its files in (default: the state dir).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def import_legacy_command(ctx: click.Context, dry_run: bool, source_dir: str | None, as_json: bool) -> None:
    """Fold the original Agent Link's mailbox, receipts, roles and fork log into the
    database, once: records already there are left alone, the original files are kept.
    Exit 1 when an importer failed."""
    from agent_link_legacy.engine import import_legacy as run

    try:
        report = run(get_app(ctx), dry_run=dry_run, source_dir=source_dir)
    except AgentLinkError as exc:
        fail(exc)
    emit(report, as_json, _human)
    if report["failed"]:
        sys.exit(1)
