"""``agent-link lease``, ``agent-link release`` and ``agent-link leases``: the lease tools from a
terminal or a script, as the caller the CLI identifies (its session or ``AGENT_LINK_ADDRESS``).

* ``agent-link lease PATH... [--shared] [--ttl-ms N] [--reason TEXT] [--project-root DIR]``;
* ``agent-link release PATH... | --all [--project-root DIR] [--holder ADDR]``: ``--holder``
  ends another holder's (stale) leases and needs ``AGENT_LINK_LEASE_ADMIN=1``;
* ``agent-link leases [--path P] [--holder ADDR] [--project-root DIR]``.

Each prints a line per lease for people and the tool's JSON object with ``--json``; a refused
claim prints one line per conflicting holder on stderr, with the ``agent-link send`` line that
asks it for the paths (with ``--json``: the refusal as one object on stdout, ``{ok: false, error:
{code, message, details: {conflicts}, hint}}``), and exits 1; so does a release of paths
another holds (one line per holder, nothing of theirs released). Others' text (a reason, a
file's name) is shown on one line, its control, format and bidi characters as ``\\u{XXXX}``. Errors name the
commands' options (:data:`OPTION_NAMES`), not the tools' arguments.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, NoReturn

import click

from agent_link_core.cli_text import printable
from agent_link_core.errors import AgentLinkError
from agent_link_core.store import now_ms

from agent_link_leases.liveness import claim_ending_gone
from agent_link_leases.table import (
    ADMIN_SETTING,
    DEFAULT_TTL_MS,
    MAX_TTL_MS,
    TTL_SETTING,
    active,
    check_reason,
    project,
    project_warnings,
    release,
)

#: the tools' argument names (in their errors) -> what a person types to these commands
OPTION_NAMES = {"projectRoot": "--project-root", "paths": "PATH", "ttlMs": "--ttl-ms"}


def _line(lease: dict[str, Any]) -> str:
    """One lease for people; every field on one line, another agent's or a file name's control,
    format and bidi characters as visible escapes (:func:`~agent_link_core.cli_text.printable`)."""
    kind = "exclusive" if lease["exclusive"] else "shared"
    reason = f"  ({printable(lease['reason'])})" if lease.get("reason") else ""
    task = f" or message {printable(lease['untilResolved'])} is resolved" if lease.get("untilResolved") else ""
    return f"{printable(lease['path']):<40} {kind:<9} {printable(lease['holder']):<32} until {lease['expiresAt']}{task}{reason}"


def _paths(paths: list[str]) -> str:
    return ", ".join(printable(p) for p in paths)


def _refused(exc: AgentLinkError, as_json: bool) -> NoReturn:
    """End a refused claim: with ``as_json`` the refusal as one JSON object on stdout (``{version, ok: false,
    error: {code, message, details: {conflicts}, hint}}``, a tool's failed result); without, each holder
    on stderr with what it holds and the message to send it. Then the error line, exit 1."""
    import shlex

    from agent_link_core.cli import emit

    conflicts = exc.details.get("conflicts", [])
    if as_json:
        hint = "Send each holder its error.details.conflicts[].message (`agent-link send HOLDER MESSAGE`), or claim paths nobody holds."
        said = AgentLinkError(exc.code, exc.message, exc.details, hint=hint)
        emit({"ok": False, "error": said.to_dict()}, True, None)
    else:
        hint = "Send each holder the message above (the `agent-link send` line), or claim paths nobody holds."
        said = AgentLinkError(exc.code, exc.message, exc.details, hint=hint)
        for c in conflicts:
            why = f" ({printable(c['reason'])})" if c.get("reason") else ""
            click.echo(f"held by {printable(c['holder'])}: {_paths(c['paths'])}"
                       f" {'exclusive' if c['exclusive'] else 'shared'} until {c['expiresAt']}{why}", err=True)
            if c.get("message"):
                click.echo(f"  ask: agent-link send {shlex.quote(printable(c['holder']))} {shlex.quote(printable(c['message']))}", err=True)
    _fail(said)


def _fail(exc: AgentLinkError) -> NoReturn:
    """:func:`agent_link_core.cli.fail` in these commands' option names."""
    from agent_link_core.cli import fail

    fail(exc, OPTION_NAMES)


def _holder(holder: str | None) -> None:
    """Refuse a ``--holder`` that is no address, as the tools' schema does.

    :raises AgentLinkError: ``invalid_arguments`` (path ``holder``).
    """
    from agent_link_core.errors import invalid_arguments
    from agent_link_core.model import is_address

    if holder is not None and not is_address(holder):
        raise invalid_arguments([{"path": "holder", "rule": "address", "expected": "an address such as codex:<thread id> or team:<name>"}],
                                f"--holder {holder!r} is not an address.")


def _project(root: str | None, paths: tuple[str, ...]) -> Any:
    """The project root (:func:`project`); when there is none, an empty PATH is said first (the
    root's error would hide it; with a root, the claim names every bad path at once).

    :raises click.UsageError: no project root and an empty or blank PATH.
    :raises AgentLinkError: no project root.
    """
    try:
        return project(os.path.abspath(root) if root else None, os.getcwd())
    except AgentLinkError:
        if any(not p.strip() for p in paths):
            raise click.UsageError("PATHS: an empty path names nothing; give a file, directory or glob") from None
        raise


def register(cli: click.Group) -> None:
    """Add ``lease``, ``release`` and ``leases`` to the root ``agent-link`` group."""
    from agent_link_core.cli import EXIT_HELP, emit, get_app

    root_option = click.option("--project-root", "root", type=click.Path(file_okay=False),
                               help="Project root (default: the git top level of the current directory).")

    @cli.command("lease", epilog=EXIT_HELP)
    @click.argument("paths", nargs=-1, required=True)
    @click.option("--shared", is_flag=True, help="A shared lease (only exclusive leases clash with it).")
    @click.option("--ttl-ms", type=click.IntRange(1000, MAX_TTL_MS), help=f"Time to live in ms (default {TTL_SETTING}).")
    @click.option("--reason", help="Why: shown to anyone the lease stops.")
    @root_option
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
    @click.pass_context
    def lease(ctx: click.Context, paths: tuple[str, ...], shared: bool, ttl_ms: int | None, reason: str | None,
              root: str | None, as_json: bool) -> None:
        """Claim (or renew) files, directories or globs; refused whole if another holds any of them."""
        app = get_app(ctx)
        try:
            check_reason(reason)
            caller = app.require_caller(app.caller())
            where = _project(root, paths)
            ttl = ttl_ms or app.config.get(TTL_SETTING) or DEFAULT_TTL_MS
            data = asyncio.run(claim_ending_gone(app, caller.address, where, list(paths), exclusive=not shared,
                                                 reason=reason or None, ttl_ms=int(ttl)))
        except AgentLinkError as exc:
            if exc.code == "lease_conflict":
                _refused(exc, as_json)
            _fail(exc)

        def human(d: dict[str, Any]) -> None:
            for gone in d["ended"]:
                click.echo(f"ended {printable(gone['holder'])}'s leases ({printable(gone['why'])}): {_paths(gone['paths'])}", err=True)
            for x in d["leases"]:
                click.echo(_line(x))
            for w in d.get("warnings", []):
                click.echo(f"warning: {printable(w['message'])}", err=True)

        warnings = project_warnings(data)
        if warnings:  # as the tool's result carries them
            data["warnings"] = warnings
        emit(data, as_json, human)

    @cli.command("release", epilog=EXIT_HELP)
    @click.argument("paths", nargs=-1)
    @click.option("--all", "everything", is_flag=True, help="Release every lease you hold.")
    @click.option("--holder", help=f"Release this holder's leases instead of yours (a stale one; needs {ADMIN_SETTING}=1).")
    @root_option
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
    @click.pass_context
    def release_cmd(ctx: click.Context, paths: tuple[str, ...], everything: bool, holder: str | None, root: str | None,
                    as_json: bool) -> None:
        """Release the given leases (as leased), or all of yours with --all."""
        if bool(paths) == everything:
            raise click.UsageError("give the paths to release, or --all (not both)")
        app = get_app(ctx)
        try:
            _holder(holder)
            if holder is not None and not app.config.get(ADMIN_SETTING):
                raise AgentLinkError("permission_denied", "Releasing another holder's leases is turned off.",
                                     {"reason": "lease_admin_disabled"},
                                     hint=f"A person can turn it on for one command: {ADMIN_SETTING}=1 agent-link release --holder ...")
            owner = holder if holder is not None else app.require_caller(app.caller()).address
            where = _project(root, paths) if paths else None
            data = release(app.store, owner, where, list(paths) if paths else None, now_ms())
        except AgentLinkError as exc:
            _fail(exc)

        def human(d: dict[str, Any]) -> None:
            for x in d["released"]:
                click.echo(f"released {printable(x['path'])}")
            others = {o["path"] for o in d["heldByOthers"]}
            for text in d["notHeld"]:
                if text not in others:
                    click.echo(f"not held: {printable(text)}", err=True)
            for o in d["heldByOthers"]:
                click.echo(f"held by {printable(o['holder'])}, not by {printable(holder or 'you')}: {printable(o['path'])} (their lease of {_paths(o['paths'])},"
                           f" until {o['expiresAt']}); not released", err=True)

        emit(data, as_json, human)
        if data["heldByOthers"]:
            ctx.exit(1)

    @cli.command("leases", epilog=EXIT_HELP)
    @click.option("--path", help="Only leases overlapping this file, directory or glob.")
    @click.option("--holder", help="Only this holder's leases.")
    @root_option
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
    @click.pass_context
    def leases(ctx: click.Context, path: str | None, holder: str | None, root: str | None, as_json: bool) -> None:
        """List active leases: who holds what, until when, why."""
        app = get_app(ctx)
        try:
            _holder(holder)
            where = project(os.path.abspath(root) if root else None, os.getcwd()) if (root or path) else None
            data = {"projectRoot": where.path if where else None,
                    "leases": active(app.store, now_ms(), root=where, path=path, holder=holder)}
        except AgentLinkError as exc:
            _fail(exc)

        def human(d: dict[str, Any]) -> None:
            if not d["leases"]:
                click.echo("No active leases.")
            for x in d["leases"]:
                click.echo(_line(x))

        emit(data, as_json, human)


def _built(name: str) -> click.Command:
    group = click.Group()
    register(group)
    return group.commands[name]


def lease_command() -> click.Command:
    """``agent-link lease`` (built when it runs: the plugin declares it, agent_link_core.contribute)."""
    return _built("lease")


def release_command() -> click.Command:
    """``agent-link release`` (built when it runs)."""
    return _built("release")


def leases_command() -> click.Command:
    """``agent-link leases`` (built when it runs)."""
    return _built("leases")
