"""Entry point of the agent-link leases plugin, registered under the ``agent_link`` group.

Hooks: the ``leases`` table (schema), the ``AGENT_LINK_LEASE_TTL_MS`` setting, the tools
``lease_paths``, ``release_paths`` and ``list_leases``, the ``lease``/``release``/``leases``
commands, claims for sessions other plugins start or give work (``agent_link_claim_paths``: a
project worker's ``leasePaths``, ended when its task message is resolved; a role's
``leasePaths``; ``agent_link_release_claims`` ends them early), the web page's File leases panel, ``lease-git-hook`` (:mod:`agent_link_leases.githook`), the ``leases`` health section, and the ``leases`` prompt-hook adapter (the
``PreToolUse`` edit guard, :mod:`agent_link_leases.hook`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from agent_link_core import hookimpl
from agent_link_core.config import Setting
from agent_link_core.contribute import commands, migrations, registers
from agent_link_core.store import now_ms

from agent_link_leases.schema import ADMIN_SETTING, DEFAULT_TTL_MS, MAX_REASON_CHARS, MAX_TTL_MS, MIGRATIONS, TTL_SETTING

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any
    import sqlite3

    from agent_link_core.app import App
    from agent_link_core.records import Event

SETTINGS: tuple[Setting, ...] = (
    Setting(TTL_SETTING, "int", DEFAULT_TTL_MS, minimum=1000, maximum=MAX_TTL_MS,
            doc="a lease's time to live (ms) when the claim gives none"),
    Setting(ADMIN_SETTING, "flag", False, doc="lets `agent-link release --holder` and the web page's Release buttons end another holder's (stale) leases"),
)

agent_link_register_settings = registers(SETTINGS)
agent_link_schema = migrations(MIGRATIONS)
agent_link_register_tools = registers("agent_link_leases.tools:LEASE_TOOLS")
# `agent-link hook leases PreToolUse`: the edit guard (agent_link_leases.hook)
@hookimpl
def agent_link_register_prompt_hooks(register: Callable[[Any], None]) -> None:
    """``agent-link hook leases PreToolUse`` runs :mod:`agent_link_leases.hook`."""
    from agent_link_core.records import PromptHook

    register(PromptHook("leases", "agent_link_leases.hook"))
# the File leases section of the web page, with a Release button per lease (agent_link_leases.panel)
agent_link_register_panels = registers("agent_link_leases.panel:PANELS", optionalhook=True)  # the web plugin's hook


# declared here, imported when run (docs/plugins.md, "Declare now, import when used")
agent_link_register_commands = commands(
    ("lease", "agent_link_leases.cli:lease_command",
     "Claim (or renew) files, directories or globs; refused whole if another holds any of them."),
    ("release", "agent_link_leases.cli:release_command", "Release the given leases (as leased), or all of yours with --all."),
    ("leases", "agent_link_leases.cli:leases_command", "List active leases: who holds what, until when, why.", "reader"),
    ("lease-git-hook", "agent_link_leases.githook:git_hook_command",
     "An optional git pre-commit hook refusing commits that touch another session's exclusive lease."),
)


@hookimpl
def agent_link_health(app: App) -> tuple[str, dict[str, Any]]:
    """``leases``: ``{active, exclusive, holders, roots, forRoles, forTasks, ttlMs, sessionEnd}``
    (``forRoles``: leases a role's holder got with the role; ``forTasks``: leases ending with a
    project worker's task); ``sessionEnd`` says when a holder's session ending ends its leases."""
    row = app.store.conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(exclusive), 0), COUNT(DISTINCT holder), COUNT(DISTINCT root),"
        " COUNT(CASE WHEN claim_key LIKE 'role:%' THEN 1 END), COUNT(until_resolved)"
        " FROM leases WHERE expires_at > ?", (now_ms(),)).fetchone()
    return "leases", {
        "active": int(row[0]), "exclusive": int(row[1]), "holders": int(row[2]), "roots": int(row[3]),
        "forRoles": int(row[4]), "forTasks": int(row[5]),
        "ttlMs": app.config.get(TTL_SETTING),
        "sessionEnd": "checked when a claim clashes: a holder whose session is not running (or whose plain address is no longer served) loses its leases",
    }


@hookimpl
def agent_link_claim_paths(holder: str, paths: list[str], project_root: str, reason: str | None, ttl_ms: int | None,
                           until_resolved: str | None, key: str | None, app: App) -> Awaitable[dict[str, Any]]:
    """Exclusive leases of ``paths`` for ``holder`` (a worker another plugin starts, a role's
    holder), ending when ``until_resolved`` is resolved, replacing what was claimed under
    ``key``; a plain function returning the coroutine (firstresult). A ``reason`` over
    :data:`~agent_link_leases.schema.MAX_REASON_CHARS` characters (a worker's whole task) is
    cut to that length, ending in "...".

    :returns: an awaitable of :func:`agent_link_leases.liveness.claim_ending_gone`'s result;
        awaiting it raises ``lease_conflict`` or ``invalid_arguments`` as ``lease_paths`` does.
    """
    from agent_link_leases.liveness import claim_ending_gone
    from agent_link_leases.table import project

    async def run() -> dict[str, Any]:
        root = project(project_root, project_root)
        ttl = ttl_ms or app.config.get(TTL_SETTING) or DEFAULT_TTL_MS
        said = reason if reason is None or len(reason) <= MAX_REASON_CHARS else reason[:MAX_REASON_CHARS - 3] + "..."
        return await claim_ending_gone(app, holder, root, list(paths), exclusive=True, reason=said, ttl_ms=int(ttl),
                                       until_resolved=until_resolved, key=key)

    return run()


@hookimpl
def agent_link_release_claims(key: str, app: App) -> dict[str, Any]:
    """End the leases claimed under ``key`` (:func:`agent_link_leases.table.release_key`)."""
    from agent_link_leases.table import release_key

    return release_key(app.store, key, now_ms())


@hookimpl
def agent_link_record_event(event: Event, conn: sqlite3.Connection) -> None:
    """A resolved message ends the leases claimed until it is resolved (a worker's task done),
    in the resolution's own transaction."""
    if event.kind == "resolved" and event.message_id:
        from agent_link_leases.table import end_with_message

        end_with_message(conn, event.message_id)
