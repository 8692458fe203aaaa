"""``agent-link forks list|show``: fork jobs for people (a table, or ``--json``)."""

from __future__ import annotations

import sys
from typing import Any

import click

from agent_link_core.cli import EXIT_HELP, WholeRange, emit, get_app, printable, table
from agent_link_core.mailbox import iso
from agent_link_forks.jobs import Jobs

json_opt = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
STATUSES = ("running", "completed", "failed", "interrupted", "aborted")
FORMAT_VERSION = 1


def job_entry(job: dict[str, Any], jobs: Jobs) -> dict[str, Any]:
    """A job as the CLI shows it (times ISO 8601; no task text)."""
    stored = jobs.reconcile(job["id"])
    archive = jobs.archive(job["id"])
    fork = job.get("fork") or {}
    request = job.get("request") or {}
    return {
        "id": job["id"], "status": job["status"], "phase": job["phase"],
        "original": f"codex:{job['original_thread']}", "fork": f"codex:{job['fork_thread']}" if job["fork_thread"] else None,
        "by": job["created_by"], "model": fork.get("model") or request.get("model"), "effort": fork.get("effort") or request.get("effort"),
        "createdAt": iso(job["created_at"]), "finishedAt": iso(job["finished_at"]),
        "taskTurnId": job["task_turn_id"], "compaction": job.get("compaction"),
        "error": (job.get("result") or {}).get("error"), "tokenUsage": (job.get("result") or {}).get("tokenUsage"),
        "reconcile": {"messageId": stored["message_id"], "stored": stored["stored_at"] is not None,
                      "deliveredVia": stored["delivered_via"], "generation": stored["generation"]} if stored else None,
        "archive": {"state": archive["state"], "detail": archive["detail"]} if archive else None,
        "lease": {"owner": job["lease_owner"], "until": iso(job["lease_until"]) if job["lease_until"] else None,
                  "generation": job["lease_generation"]},
    }


@click.group(epilog=EXIT_HELP)
def forks() -> None:
    """Fork jobs: tasks run on a fork of a Codex thread (fork_codex_thread)."""


@forks.command("list", epilog=EXIT_HELP)
@click.option("--status", type=click.Choice(STATUSES), help="Only jobs with this status.")
@click.option("--limit", type=WholeRange(1, 500), default=50, show_default=True)
@json_opt
@click.pass_context
def list_(ctx: click.Context, status: str | None, limit: int, as_json: bool) -> None:
    """Fork jobs, newest first."""
    jobs = Jobs(get_app(ctx).store)
    data = {"version": FORMAT_VERSION, "jobs": [job_entry(j, jobs) for j in jobs.recent(status=status, limit=limit)]}

    def human(d: dict[str, Any]) -> None:
        if not d["jobs"]:
            click.echo("No fork jobs.")
            return
        rows = [[j["id"], j["status"], j["original"], j["fork"] or "-", j["model"] or "-", j["createdAt"],
                 (j["reconcile"] or {}).get("deliveredVia") or ("stored" if (j["reconcile"] or {}).get("stored") else "-")]
                for j in d["jobs"]]
        table(["JOB", "STATUS", "ORIGINAL", "FORK", "MODEL", "CREATED", "RECONCILE"], rows)

    emit(data, as_json, human)


@forks.command("show", epilog=EXIT_HELP)
@click.argument("job_id")
@json_opt
@click.pass_context
def show(ctx: click.Context, job_id: str, as_json: bool) -> None:
    """One fork job with its history."""
    jobs = Jobs(get_app(ctx).store)
    job = jobs.get(job_id.strip().upper())
    if job is None:
        click.echo(f"agent-link: no fork job {printable(job_id.strip())}; list them with `agent-link forks list`.", err=True)
        sys.exit(1)
    data = {"version": FORMAT_VERSION, "job": job_entry(job, jobs),
            "events": [{"kind": e["kind"], "at": iso(e["at"]), "data": e["data"]} for e in jobs.events(job["id"])]}

    def human(d: dict[str, Any]) -> None:
        # each field on its one line, as a header: what Codex or an agent wrote there (an error, a model) cannot drive the terminal
        j = d["job"]
        for key in ("id", "status", "phase", "original", "fork", "by", "model", "effort", "createdAt", "finishedAt", "taskTurnId", "error"):
            click.echo(f"{key:12} {printable(j[key]) if j[key] is not None else '-'}")
        if j["compaction"]:
            c = j["compaction"]
            click.echo(f"{'compaction':12} {printable(c.get('reason'))} (compact: {printable(c.get('compact'))},"
                       f" compacted: {printable(c.get('compacted'))})")
        if j["reconcile"]:
            r = j["reconcile"]
            click.echo(f"{'reconcile':12} {printable(r['messageId'])} ({'stored' if r['stored'] else 'not stored'},"
                       f" via {printable(r['deliveredVia'] or '-')})")
        if j["archive"]:
            a = j["archive"]
            click.echo(f"{'archive':12} {printable(a['state'])}" + (f" ({printable(a['detail'])})" if a["detail"] else ""))
        table(["AT", "EVENT"], [[e["at"], e["kind"]] for e in d["events"]])

    emit(data, as_json, human)
