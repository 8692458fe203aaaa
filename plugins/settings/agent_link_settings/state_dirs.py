"""The record of the state dirs agent-link processes used lately, and health's warning about the others (README.md,
"The settings file"): a state dir other than this one is a separate mailbox, most often a setting that differs
between processes. The record, ``$XDG_CACHE_HOME/agent-link/state-dirs.json``, is ``{path: last use in ms}`` and
advisory (a lost race drops one entry until its next use). Every process that opens an App writes it
(``agent_link_app_opened``), so this module imports only what the core's open has imported already.
"""

from __future__ import annotations

import os
import time

from agent_link_core.errors import AgentLinkError
from agent_link_core.json_files import read_json_object, state_io_error, write_json_object

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    import click

STATE_DIR_RECENT_MS = 24 * 3600 * 1000  # "recently" for the health warning
#: how often (ms) a process notes a state dir still in use
RECORD_EVERY_MS = 60_000
FORGET_HELP = "Forget the other state dirs agent-link processes used lately (ends health's warning about them until one of them is used again)."


def _state_dirs(env: Mapping[str, str] | None) -> tuple[str, dict[str, int]]:
    """The record's path and its ``{path: last use in ms}`` entries."""
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "agent-link", "state-dirs.json")
    data = read_json_object(path) or {}
    return path, {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, int)}


def record_state_dir(state_dir: str, env: Mapping[str, str] | None = None, now_ms: int | None = None) -> None:
    """Note that ``state_dir`` is in use now (at most once per :data:`RECORD_EVERY_MS`; a failed write is ignored).
    ``env``: where ``XDG_CACHE_HOME`` and ``HOME`` are read (default ``os.environ``)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    path, known = _state_dirs(env)
    if now - known.get(state_dir, 0) < RECORD_EVERY_MS:
        return
    known[state_dir] = now
    try:
        write_json_object(path, known)  # private like every file agent-link makes, whatever the umask
    except (OSError, AgentLinkError):
        pass


def other_state_dirs(state_dir: str, env: Mapping[str, str] | None = None, now_ms: int | None = None) -> list[dict[str, object]]:
    """Other state directories used within :data:`STATE_DIR_RECENT_MS` that still exist (a removed one holds no mailbox anyone
    uses): ``[{path, lastUsedMs}]``, newest first."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    found = [{"path": p, "lastUsedMs": t} for p, t in _state_dirs(env)[1].items()
             if p != state_dir and now - t <= STATE_DIR_RECENT_MS and os.path.isdir(p)]
    return sorted(found, key=lambda item: -int(item["lastUsedMs"]))  # type: ignore[call-overload]


def forget_other_state_dirs(state_dir: str, env: Mapping[str, str] | None = None) -> list[str]:
    """Drop every state directory but ``state_dir`` from the record (``agent-link health --forget-state-dirs``; one still in use
    comes back with its next process): the paths dropped, sorted.

    :raises AgentLinkError: ``state_io_error`` when the record cannot be rewritten.
    """
    path, known = _state_dirs(env)
    dropped = sorted(p for p in known if p != state_dir)
    if dropped:
        try:
            write_json_object(path, {p: t for p, t in known.items() if p == state_dir})
        except OSError as exc:
            raise state_io_error(path, exc) from exc
    return dropped


def health_section(state_dir: str, env: Mapping[str, str]) -> dict[str, Any]:
    """The ``settings`` health section: ``{otherStateDirs: [{path, lastUsedMs}], summary?}``, the summary (the text
    form's warning line) only while another state dir was used lately."""
    others = other_state_dirs(state_dir, env)
    section: dict[str, Any] = {"otherStateDirs": others}
    if others:
        dirs, mailbox, it = ("state dirs", "separate mailboxes", "them") if len(others) > 1 else ("state dir", "a separate mailbox", "it")
        section["summary"] = (f"another agent-link process recently used the {dirs} {', '.join(str(o['path']) for o in others)}:"
                              f" {mailbox} (set AGENT_LINK_STATE_DIR alike everywhere: `agent-link config set state_dir ...`;"
                              f" if that is over, `agent-link health --forget-state-dirs` forgets {it})")
    return section


def add_forget_option(cli: click.Group) -> None:
    """Give the core's ``health`` a ``--forget-state-dirs`` flag when ``health`` is the command being run (the other core
    commands are placeholders without a callback, docs/plugins.md); the forgotten paths go to stderr, one line each,
    before health's answer (``--json`` prints one object)."""
    import functools

    import click

    command = cli.commands.get("health")
    if command is None or command.callback is None or any(p.name == "forget_state_dirs" for p in command.params):
        return
    command.params.append(click.Option(["--forget-state-dirs"], is_flag=True, help=FORGET_HELP))
    callback = command.callback

    @functools.wraps(callback)
    def run(*args: Any, forget_state_dirs: bool = False, **kwargs: Any) -> Any:
        if forget_state_dirs:
            from agent_link_core.cli_run import fail, open_app

            try:
                app = open_app(click.get_current_context())
            except AgentLinkError:  # health itself says why agent-link cannot start here
                return callback(*args, **kwargs)
            try:
                for path in forget_other_state_dirs(app.config.state_dir, app.env):
                    click.echo(f"forgot the state dir {path}", err=True)
            except AgentLinkError as exc:
                fail(exc)
        return callback(*args, **kwargs)

    command.callback = run
