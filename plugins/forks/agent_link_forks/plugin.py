"""Entry point of the agent-link forks plugin (entry point ``forks`` in group ``agent_link``).

Contributes the ``fork_codex_thread`` tool, the fork job tables, the ``<fork .../>`` element of
reconcile envelopes, the ``forkJobs`` health section, the ``agent-link forks`` commands, its
settings, and the sweeper every MCP server runs (``agent_link_server_tasks``). It reaches
Codex only through the codex plugin's harness (``agent-link-codex``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from agent_link_core import hookimpl
from agent_link_core.config import Setting
from agent_link_core.store import Migration
from agent_link_forks.schema import MIGRATIONS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any
    import click

    from agent_link_core.app import App
    from agent_link_core.records import EnvelopeContribution

SETTINGS: tuple[Setting, ...] = (
    Setting("AGENT_LINK_FORKS_LEASE_MS", "int", 60_000, minimum=1_000, maximum=3_600_000, warning="forks_lease_ignored",
            doc="how long a server's claim on a running fork job lasts without renewal, in ms"),
    Setting("AGENT_LINK_FORKS_SWEEP_MS", "int", 60_000, minimum=1_000, maximum=3_600_000, warning="forks_sweep_ignored",
            doc="how often each MCP server looks for fork jobs left by a server that stopped, in ms"),
    Setting("AGENT_LINK_FORKS_START_TIMEOUT_MS", "int", 900_000, minimum=1_000, maximum=86_400_000,
            warning="forks_start_timeout_ignored", doc="a fork job whose task never started is failed after this many ms"),
)


@hookimpl
def agent_link_register_tools(register: Callable[[Any], None]) -> None:
    """``fork_codex_thread``."""
    from agent_link_forks.tools import FORK_TOOLS

    for spec in FORK_TOOLS:
        register(spec)


@hookimpl
def agent_link_register_settings(register: Callable[[Setting], None]) -> None:
    """Lease, sweep interval and start timeout of fork jobs."""
    for setting in SETTINGS:
        register(setting)


@hookimpl
def agent_link_schema() -> list[Migration]:
    """``fork_jobs``, ``fork_job_events``, ``fork_reconciles``, ``fork_archives``."""
    return list(MIGRATIONS)


@hookimpl
def agent_link_render_envelopes(messages: tuple[Mapping[str, Any], ...]) -> dict[str, EnvelopeContribution] | None:
    """``<fork thread="codex:<id>" model=… effort=… status=…/>`` on each reconcile message."""
    forks = {m["id"]: fork for m in messages
             if isinstance(fork := m["metadata"].get("fork"), Mapping) and str(fork.get("thread") or "").startswith("codex:")}
    if not forks:
        return None
    from agent_link_core.envelope import render_element
    from agent_link_core.records import EnvelopeContribution

    added = {}
    for mid, fork in forks.items():
        attrs = [(name, fork.get(name) if isinstance(fork.get(name), str) else None) for name in ("thread", "model", "effort", "status")]
        added[mid] = EnvelopeContribution(elements=[render_element("fork", attrs)])
    return added


@hookimpl
def agent_link_health(app: App) -> tuple[str, dict[str, Any]]:
    """``forkJobs``: ``{pending, running, stuck, error, unreconciled}`` (see :meth:`Jobs.counts`)."""
    from agent_link_forks.jobs import Jobs

    return "forkJobs", Jobs(app.store).counts()


@hookimpl
def agent_link_server_tasks(app: App) -> list[Callable[[], Awaitable[None]]]:
    """The fork job sweeper."""
    from agent_link_forks.runner import runtime

    return [runtime(app).sweeper_loop]


@hookimpl
def agent_link_register_commands(cli: click.Group) -> None:
    """``agent-link forks list|show``."""
    from agent_link_core.contribute import command

    cli.add_command(command("forks", "agent_link_forks.cli:forks",
                            "Fork jobs: tasks run on a fork of a Codex thread (fork_codex_thread)."))


@hookimpl(optionalhook=True)  # the legacy plugin's hook
def agent_link_register_legacy_importers(register: Callable[[Any], None]) -> None:
    """The original's fork log (``agent-link import-legacy``)."""
    from agent_link_forks.legacy import ForksImporter

    register(ForksImporter())
