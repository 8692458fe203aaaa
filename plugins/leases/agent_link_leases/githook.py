"""``agent-link lease-git-hook install|uninstall|check``: an optional git ``pre-commit`` hook
refusing a commit that touches a path another session holds exclusively.

``install`` writes the repository's ``pre-commit`` hook (where ``git rev-parse --git-path
hooks/pre-commit`` says, so ``core.hooksPath`` and worktrees are respected): a POSIX ``sh``
script that runs this installation's ``agent-link lease-git-hook check``, or ``agent-link``
on ``PATH``, and lets the commit go on when neither exists. It never replaces a hook it did
not write (``--force`` does). ``uninstall`` removes only a hook it wrote.

``check`` reads the staged paths (``git diff --cached --name-only -z --no-renames``: a
rename lists both names, so a lease of either stops it) and asks the edit guard
(:func:`agent_link_leases.guard.holders_of`) about each, as the caller this process is
(its session, ``AGENT_LINK_ADDRESS``; nobody for a person's shell, so every lease counts).
It exits 1 naming each holder, path, reason and expiry, and 0 otherwise; a commit can
always be made with ``git commit --no-verify``.
"""

from __future__ import annotations

import os
import shlex
import sqlite3
import subprocess
import sys

import click

from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.mailbox import iso
from agent_link_core.store import now_ms

#: the line that marks a hook this command wrote
MARK = "# agent-link lease guard (agent-link lease-git-hook install)"
GIT_TIMEOUT_S = 30


def _git(repo: str, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise AgentLinkError("internal_error", f"git could not run: {exc}", hint="Install git, or check it is on PATH.") from exc
    if done.returncode != 0:
        raise invalid_arguments([{"path": "repo", "rule": "git_work_tree", "expected": "a directory inside a git work tree"}],
                                f"{repo} is not in a git work tree: {done.stderr.strip() or 'git failed'}")
    return done.stdout


def hook_path(repo: str) -> str:
    """The absolute path of ``repo``'s ``pre-commit`` hook.

    :raises AgentLinkError: ``invalid_arguments`` outside a git work tree.
    """
    path = _git(repo, "rev-parse", "--git-path", "hooks/pre-commit").strip()  # relative to repo
    return os.path.normpath(os.path.join(os.path.realpath(repo), path))


def script(executable: str) -> str:
    """The hook's text: run ``executable`` (else ``agent-link`` on PATH); none: allow."""
    return (f"#!/bin/sh\n{MARK}\n"
            "# Refuses a commit touching a path another agent session holds exclusively (agent-link leases);\n"
            "# `git commit --no-verify` skips it. Without agent-link the commit goes on.\n"
            f"bin={shlex.quote(executable)}\n"
            '[ -x "$bin" ] || bin=$(command -v agent-link) || exit 0\n'
            'exec "$bin" lease-git-hook check\n')


def install(repo: str, executable: str, force: bool) -> str:
    """Write the hook; returns its path.

    :raises AgentLinkError: ``invalid_arguments`` outside a git work tree;
        ``permission_denied`` (reason ``foreign_pre_commit_hook``) when another pre-commit hook
        exists and ``force`` is false.
    """
    path = hook_path(repo)
    if os.path.exists(path) and not force and MARK not in _read(path):
        raise AgentLinkError("permission_denied", f"{path} is another pre-commit hook; it was left as it is.",
                             {"reason": "foreign_pre_commit_hook", "path": path}, hint="Add the line `agent-link lease-git-hook check || exit 1` to it, or pass --force to replace it.")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(script(executable))
    os.chmod(path, 0o755)
    return path


def uninstall(repo: str) -> str | None:
    """Remove the hook if this command wrote it; returns its path, or None when there was none of ours."""
    path = hook_path(repo)
    if not os.path.exists(path) or MARK not in _read(path):
        return None
    os.remove(path)
    return path


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def staged(repo: str) -> list[str]:
    """Absolute, resolved paths of what the index would commit (both names of a rename)."""
    top = _git(repo, "rev-parse", "--show-toplevel").strip()
    names = _git(repo, "diff", "--cached", "--name-only", "-z", "--no-renames").split("\0")
    return [os.path.realpath(os.path.join(top, n)) for n in names if n]


def refusals(conn: sqlite3.Connection, paths: list[str], caller: str, now: int) -> list[str]:
    """One line per staged path another session holds exclusively (its holders, reasons, expiry), for a terminal:
    a file name's or another agent's control, format and bidi characters as visible escapes."""
    from agent_link_core.cli_text import printable
    from agent_link_leases.guard import holders_of

    lines = []
    for path in paths:
        for row in holders_of(conn, path, caller, now):
            why = f" because: {printable(row['reason'])}" if row["reason"] else ""
            lines.append(f"{printable(path)}: leased by {printable(row['holder'])} ({printable(row['pattern'])} under {printable(row['root'])})"
                         f" until {iso(row['expires_at'])}{why}")
    return lines


def git_hook_command() -> click.Command:
    """``agent-link lease-git-hook`` (built when it runs: the plugin declares it)."""
    from agent_link_core.cli import EXIT_HELP, fail, get_app, printable

    @click.group("lease-git-hook", epilog=EXIT_HELP)
    def group() -> None:
        """An optional git pre-commit hook refusing commits that touch another session's exclusive lease."""

    repo_option = click.option("--repo", default=".", type=click.Path(file_okay=False, exists=True),
                               help="A directory in the git work tree (default: the current one).")

    @group.command("install", epilog=EXIT_HELP)
    @repo_option
    @click.option("--force", is_flag=True, help="Replace a pre-commit hook agent-link did not write.")
    def install_cmd(repo: str, force: bool) -> None:
        """Install the pre-commit hook into this repository."""
        from agent_link_hostkit.host_install import agent_link_executable

        try:
            click.echo(f"installed {install(repo, str(agent_link_executable()), force)}")
        except AgentLinkError as exc:
            fail(exc)

    @group.command("uninstall", epilog=EXIT_HELP)
    @repo_option
    def uninstall_cmd(repo: str) -> None:
        """Remove the pre-commit hook, if agent-link wrote it."""
        try:
            path = uninstall(repo)
        except AgentLinkError as exc:
            fail(exc)
        click.echo(f"removed {path}" if path else "no agent-link pre-commit hook here")

    @group.command("check", epilog=EXIT_HELP)
    @repo_option
    @click.pass_context
    def check_cmd(ctx: click.Context, repo: str) -> None:
        """Exit 1 when a staged path is another session's exclusive lease (what the hook runs)."""
        try:
            paths = staged(repo)
        except AgentLinkError as exc:
            fail(exc)
        if not paths:
            return
        app = get_app(ctx)
        caller = app.caller()
        try:
            lines = refusals(app.store.conn, paths, caller.address if caller.known else "", now_ms())
        except sqlite3.Error as exc:  # no leases table yet: nothing is leased
            click.echo(f"agent-link: leases not checked ({printable(exc)})", err=True)
            return
        if lines:
            for line in lines:
                click.echo(f"agent-link: {line}", err=True)
            click.echo("agent-link: commit refused: ask the holders to release these paths (agent-link send / message_agent), "
                       "or commit with --no-verify.", err=True)
            sys.exit(1)

    return group
