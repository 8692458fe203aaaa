"""``agent-link install <host>`` and ``agent-link uninstall <host>``: registering agent-link with
a host application through the host's own CLI.

This helper package (``agent-link-hostkit``, no plugin of its own) holds what every host
shares; each host plugin adds a subcommand to both groups from its
``agent_link_register_commands`` (through :func:`install_group` / :func:`uninstall_group`,
which add the groups when the first host plugin asks) and describes what it does as a list of
:class:`Step`. ``--dry-run`` prints the steps and changes nothing.

What a host installs is a small folder (manifests, hook declarations and the launcher
``hooks/agent-link.sh``; a few KB), never a checkout: the plugin ships it as package data and
:func:`stage_folder` copies it to ``$XDG_DATA_HOME/agent-link/host-plugins/<host>/`` (default
``~/.local/share``), writing the absolute path of the running ``agent-link`` executable into
the launcher, so the host runs this installation whatever PATH it was started with. The
launcher still prefers ``$AGENT_LINK_BIN`` and falls back to ``agent-link`` on PATH when that
executable is gone.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import click

from agent_link_core.errors import AgentLinkError

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

#: The launcher line :func:`stage_folder` fills in (the plugin's copy leaves it empty).
LAUNCHER = "hooks/agent-link.sh"
LAUNCHER_LINE = "installed_bin=''"
#: A bound on one host CLI command (s); hosts answer these in seconds, never a speed target.
HOST_COMMAND_TIMEOUT_S = 300.0


@dataclass
class Step:
    """One thing an install or uninstall does, shown to people before or as it happens.

    :param text: what it does, one line in the person's terms.
    :param argv: a host CLI command to run (exit 0 = done), or None for a local ``action``.
    :param action: a local change (copying or removing files) when ``argv`` is None.
    :param nothing_to_do: fragments of a failing command's output that mean the thing was not
        there to begin with (an uninstall run twice), so the step counts as done.
    :param env: variables added to the command's environment.
    """

    text: str
    argv: Sequence[str] | None = None
    action: Callable[[], object] | None = None
    nothing_to_do: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)


def plugin_dir(host: str, env: Mapping[str, str] | None = None) -> Path:
    """Where ``agent-link install <host>`` keeps the folder the host runs:
    ``$XDG_DATA_HOME/agent-link/host-plugins/<host>`` (default ``~/.local/share/...``)."""
    from pathlib import Path

    env = os.environ if env is None else env
    base = env.get("XDG_DATA_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".local", "share")
    return Path(base) / "agent-link" / "host-plugins" / host


def agent_link_executable() -> Path:
    """The ``agent-link`` executable of the running installation: the script next to this
    interpreter (a virtualenv, pipx or ``uv tool`` environment), else the one on PATH.

    :raises AgentLinkError: ``internal_error`` when neither exists (agent-link was started some
        other way, e.g. ``python -m agent_link_core``).
    """
    import shutil
    from pathlib import Path

    beside = Path(sys.executable).with_name("agent-link")
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside.absolute()
    found = shutil.which("agent-link")
    if found:
        return Path(found).absolute()
    raise AgentLinkError("internal_error", "no agent-link executable found next to this Python or on PATH",
                         hint="Install agent-link with pipx or `uv tool install`, or run it from its virtualenv's bin.")


def stage_folder(source: Path, dest: Path, executable: Path, extra: Mapping[str, str] | None = None) -> Path:
    """Copy a host plugin folder to ``dest`` (replacing what was there), write ``executable``
    into its launcher's :data:`LAUNCHER_LINE`, and add ``extra`` files (relative path → text,
    e.g. a marketplace manifest).

    :raises AgentLinkError: ``internal_error`` when ``source`` has no launcher with that line.
    """
    import shutil

    launcher = source / LAUNCHER
    text = launcher.read_text(encoding="utf-8") if launcher.is_file() else ""
    if LAUNCHER_LINE not in text.splitlines():
        raise AgentLinkError("internal_error", f"{launcher} lacks the line {LAUNCHER_LINE!r}",
                             hint="Reinstall the host plugin package; its folder is incomplete.")
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    filled = text.replace(LAUNCHER_LINE, f"installed_bin={shlex.quote(str(executable))}", 1)
    (dest / LAUNCHER).write_text(filled, encoding="utf-8")
    (dest / LAUNCHER).chmod(0o755)
    for rel, content in (extra or {}).items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(content, encoding="utf-8")
    return dest


def remove_folder(path: Path) -> None:
    """Remove ``path`` and then its parents up to ``agent-link`` while they are empty."""
    import shutil

    shutil.rmtree(path, ignore_errors=True)
    for parent in path.parents:
        try:
            parent.rmdir()
        except OSError:
            break
        if parent.name == "agent-link":
            break


def folder_size(path: Path) -> int:
    """Bytes in the files under ``path`` (0 when absent)."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


#: a backtrace's frame line: Rust's ``  4: <unknown>`` / ``  0: 0x5f3a...`` / ``  0: std::...`` (inside a
#: ``Stack backtrace:``), its ``      at src/main.rs:3`` and a JavaScript stack's ``    at f (file.js:1:2)``
_FRAME_ANYWHERE = re.compile(r"^\s*(\d+: (<unknown>|0x[0-9a-fA-F]+)\s*$|at \S)")
_FRAME_IN_BACKTRACE = re.compile(r"^\s*\d+: ")
_ERROR_LINE = re.compile(r"^\s*(\w+)?(Error|error|ERROR)\b[:\[ ]")
TAIL_LINES = 5  # shown when no line says "Error"
CAUSE_LINES = 8  # shown from the first line that says "Error"


def cause_lines(output: str) -> list[str]:
    """The lines of a failed host command's ``output`` that say why: backtrace frames and blank
    lines dropped (a Rust CLI such as Codex prints its error, its ``Caused by:`` chain, then a
    ``Stack backtrace:`` of ``N: <unknown>`` frames), then up to :data:`CAUSE_LINES` lines from
    the first ``Error:`` line, else the last :data:`TAIL_LINES`."""
    kept: list[str] = []
    in_backtrace = False
    for line in output.splitlines():
        if line.strip() in ("Stack backtrace:", "stack backtrace:"):
            in_backtrace = True
            continue
        if in_backtrace and _FRAME_IN_BACKTRACE.match(line):
            continue
        if line.strip() and not _FRAME_ANYWHERE.match(line):
            in_backtrace = in_backtrace and line.startswith(" ")
            kept.append(line.rstrip())
    first_error = next((i for i, line in enumerate(kept) if _ERROR_LINE.match(line)), None)
    return kept[first_error:first_error + CAUSE_LINES] if first_error is not None else kept[-TAIL_LINES:]


def run_steps(steps: Sequence[Step], *, dry_run: bool, echo: Callable[[str], None] = click.echo) -> None:
    """Print each step and, unless ``dry_run``, do it; stop at the first that fails.

    :raises AgentLinkError: ``upstream_error`` naming the failed step, with the command's
        last output lines in ``details.output``.
    """
    import subprocess

    for n, step in enumerate(steps, 1):
        command = f"  $ {shlex.join(step.argv)}" if step.argv is not None else ""
        echo(f"{n}. {step.text}" + ("" if not command else "\n" + command))
        if dry_run:
            continue
        if step.action is not None:
            step.action()
        if step.argv is None:
            continue
        try:
            done = subprocess.run(list(step.argv), capture_output=True, text=True, timeout=HOST_COMMAND_TIMEOUT_S,
                                  env={**os.environ, **step.env}, stdin=subprocess.DEVNULL, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise AgentLinkError("upstream_error", f"step {n} failed: {exc}", details={"step": step.text},
                                 hint="Check that the host's CLI runs, then try again.") from exc
        output = (done.stdout + done.stderr).strip()
        if done.returncode != 0 and not any(f in output for f in step.nothing_to_do):
            tail = "\n".join(cause_lines(output))
            raise AgentLinkError("upstream_error", f"step {n} failed (exit {done.returncode}): {tail}",
                                 details={"step": step.text, "output": output[-4000:]},
                                 hint="Fix what the host said and run the command again; finished steps are safe to repeat.")


def carry_out(steps: Callable[[], Sequence[Step]], *, dry_run: bool, done: str,
              problem: Callable[[], AgentLinkError | None] | None = None) -> None:
    """An install/uninstall command's body: build the steps, run them (or print them with
    ``dry_run``), then say ``done``; an AgentLinkError from either is one line and exit 1.

    :param problem: asked after the steps: what still keeps agent-link from working with the
        host (something the steps must not change, such as the person's own config), or None.
        It is the command's error (exit 1) instead of ``done``; a dry run prints it as a warning.
    """
    from agent_link_core.cli import fail

    try:
        run_steps(steps(), dry_run=dry_run)
        left = problem() if problem is not None else None
    except AgentLinkError as exc:
        fail(exc)
    if left is not None and not dry_run:
        fail(left)
    if left is not None:
        click.echo(f"warning: {left.message} {left.hint}", err=True)
    click.echo("(dry run: nothing changed)" if dry_run else done)


def has_command(*words: str) -> bool:
    """Whether the running ``agent-link`` has the command ``words`` (e.g. ``"approvals",
    "apply"``): a plugin that is not installed, or not loaded, adds none, and a hint must not
    point at it. False outside a click command."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return False
    root = ctx.find_root()
    command: click.Command | None = root.command
    from agent_link_core.lazy_command import LazyCommand

    for word in words:
        if isinstance(command, LazyCommand):  # a plugin's declared command: its code says what is under it
            try:
                command = command.load(root)
            except SystemExit:  # it cannot load (already reported): as good as not installed
                return False
        if not isinstance(command, click.Group):
            return False
        command = command.get_command(root, word)
    return command is not None


INSTALL_EVERYDAY = "./install-everyday.sh"  # in the checkout: the core with every plugin (README)


def host_command(harness: str, name: str, explicit: str | None, env: Mapping[str, str] | None = None,
                 *, dry_run: bool = False) -> str:
    """The host CLI to run: ``explicit`` when given, else ``name`` found on PATH (a dry run
    that finds neither shows ``explicit or name`` and warns on stderr that the real run would
    stop there).

    :raises AgentLinkError: ``<harness>_unavailable`` when it is not there (not for a dry run).
    """
    import shutil

    found = explicit if explicit and os.access(explicit, os.X_OK) else None
    if not explicit:
        found = shutil.which(name, path=(os.environ if env is None else env).get("PATH"))
    if found:
        return found
    where = f"{explicit} is not an executable." if explicit else f"`{name}` is not on PATH."
    fix = "Install the host's CLI, or pass its path with --host-bin."
    if dry_run:
        click.echo(f"warning: {where} The real run would stop here. {fix}", err=True)
        return explicit or name
    raise AgentLinkError(f"{harness}_unavailable", where, details={"command": explicit or name}, hint=fix)


def _group(cli: click.Group, name: str, doc: str) -> click.Group:
    """The group ``name`` of ``cli``, added (empty, with help ``doc``) by the first host plugin asking."""
    group = cli.commands.get(name)
    if group is None:
        group = click.Group(name, help=doc)
        cli.add_command(group)
    if not isinstance(group, click.Group):
        raise TypeError(f"agent-link {name} is a {type(group).__name__}, not a command group")
    return group


def install_group(cli: click.Group) -> click.Group:
    """The ``install`` group a host plugin adds its subcommand to (from
    ``agent_link_register_commands``); the first host plugin asking adds it to ``cli``.

    :raises TypeError: ``cli`` has an ``install`` command that is not a group.
    """
    return _group(cli, "install", "Register agent-link with a host application (the host plugins add one subcommand each); --dry-run prints the steps.")


def uninstall_group(cli: click.Group) -> click.Group:
    """The ``uninstall`` group a host plugin adds its subcommand to (added like :func:`install_group`)."""
    return _group(cli, "uninstall", "Remove agent-link from a host application; --dry-run prints the steps.")
