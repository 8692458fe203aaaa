"""Every extension point of agent-link, as pluggy hook specifications.

Plugins implement these with ``from agent_link_core import hookimpl``. Hooks are always
called with keyword arguments, through :class:`agent_link_core.plugins.Hooks` (the typed
facade); nothing else touches ``pm.hook``. Hooks stay synchronous: a hook that has to do
I/O returns an object whose methods are async (a :class:`~agent_link_core.harness.Harness`).

Naming says how a hook is called:

* ``agent_link_register_*`` contribute records through a ``register`` callback, so the core
  de-duplicates names and reports the plugin that clashed;
* ``agent_link_resolve_*`` are ``firstresult``: the first non-``None`` answer wins;
* ``agent_link_before_*`` may refuse by raising :class:`~agent_link_core.errors.AgentLinkError`;
* ``agent_link_render_*`` contribute pieces that the core assembles;
* ``agent_link_on_*`` observe events and return nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable

from agent_link_core.lazy_hooks import PROJECT, hookimpl, hookspec

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - typing only
    from typing import Any, Callable
    import sqlite3

    import click

    from agent_link_core.app import App
    from agent_link_core.config import Setting
    from agent_link_core.harness import Harness
    from agent_link_core.model import Caller
    from agent_link_core.records import EnvelopeContribution, Event, OutgoingMessage, PromptHook, SendContext
    from agent_link_core.reminders import DueReminders
    from agent_link_core.store import Migration
    from agent_link_core.tools.registry import ToolSpec

# pluggy's markers' effect without importing pluggy (agent_link_core.lazy_hooks)
_hookspec = hookspec
__all__ = ["PROJECT", "hookimpl"]


@_hookspec
def agent_link_register_harnesses(register: Callable[[Harness], None]) -> None:
    """Contribute harnesses: one :class:`~agent_link_core.harness.Harness` per host.

    :param register: call it once per harness object; its ``name`` is the address scheme it
        owns (a harness named ``x`` owns ``x:<session id>``). Two plugins registering the same name
        is an error naming both.

    Called once when the :class:`~agent_link_core.app.App` is built (server, CLI). Not
    ``firstresult``: every plugin is asked.
    """


@_hookspec
def agent_link_register_tools(register: Callable[[ToolSpec], None], app: App | None) -> None:
    """Contribute MCP tools.

    :param register: call it with a :class:`~agent_link_core.tools.registry.ToolSpec`
        (name, description, input and output JSON schemas, annotations, async handler).
        Duplicate tool names are an error naming both plugins.
    :param app: the :class:`~agent_link_core.app.App` (its harnesses are attached), or None
        when tools are listed without one; optional in implementations.

    Called once when the MCP server builds its tool table. The core's own tools are
    registered through this hook too (``agent_link_core.tools.core_tools``).
    """


@_hookspec
def agent_link_register_settings(register: Callable[[Setting], None]) -> None:
    """Declare the environment settings this plugin reads.

    :param register: call it with a :class:`~agent_link_core.config.Setting` per variable
        (canonical name, kind, default, legacy aliases). Declared settings are parsed by
        the core's rules and reported by health (deprecated aliases, conflicts, warnings).

    Called once when the :class:`~agent_link_core.app.App` is built. A plugin whose package
    declares the same settings as data (``AGENT_LINK_SETTINGS``, docs/plugins.md "Settings
    and migrations as data") is not imported for it by a command.
    """


@_hookspec
def agent_link_register_panels(register: Callable[[Any], None]) -> None:
    """Contribute sections to the views people read (the ``agent-link web`` page).

    :param register: call it with an ``agent_link_web.panels.Panel`` (name, title,
        ``render(app) -> PanelView``, order). A panel returns data (rows of plain values,
        conversation links, labels for agents), never markup; the page escapes all of it.
        Two plugins registering the same name is an error naming both. The type is the web
        plugin's, which alone calls this hook: import it inside the implementation (or
        register ``"module:attribute"`` with ``agent_link_core.contribute.registers``), so
        that a plugin loads without the web plugin installed.

    Called by the web plugin each time a view builds its list of sections (every page load
    and live refresh). Not ``firstresult``: every plugin is asked.
    """


@_hookspec
def agent_link_register_prompt_hooks(register: Callable[[PromptHook], None]) -> None:
    """Declare the module that answers a host's prompt hooks (``agent-link hook <harness> <event>``).

    :param register: call it with a :class:`~agent_link_core.records.PromptHook` (harness
        name, dotted module path) per host whose hooks this plugin answers. Two plugins
        registering the same harness is an error naming both.

    Called when the plugins load, and its result kept in a registry file that the hook fast
    path reads without loading pluggy (:mod:`agent_link_core.prompt_hooks`); the registry is
    rebuilt whenever installed or disabled plugins change, so a disabled or removed plugin's
    adapter never runs. The adapter shows what the core decided is due (pending-mail notes,
    reminder N of M, the Stop nudge) through :class:`~agent_link_core.hook.HookContext`, in
    whatever form its host reads hook output.
    """


@_hookspec
def agent_link_register_commands(cli: click.Group) -> None:
    """Add click commands or groups to the ``agent-link`` CLI.

    :param cli: the root group; call ``cli.add_command(...)``.

    Called once, lazily, when the CLI is built (never for ``agent-link hook``).
    """


@_hookspec
def agent_link_schema() -> list[Migration] | None:
    """Return the SQL migrations this plugin owns.

    :returns: a list of :class:`~agent_link_core.store.Migration` (owner, version, sql);
        versions of one owner apply in order, each exactly once per database, recorded in
        ``schema_migrations``. Owners are plugin names; ``core`` is the core's own.

    Called when a database is opened by the server or CLI (the hook fast path opens it
    only if it already exists and applies the core migrations only). A plugin whose package
    declares its owners and versions (``AGENT_LINK_SCHEMA``) is imported by a command only
    when the database lacks one of them.
    """


@_hookspec(firstresult=True)
def agent_link_resolve_address(address: str, caller_address: str, app: App) -> dict[str, Any] | None:
    """Resolve an indirect address (such as ``role:<name>``) to the agent that receives it.

    :param address: an address whose scheme no harness owns, or another target form a
        plugin may understand (e.g. a host's own composite target form, from the CLI).
    :param caller_address: who is sending (``external`` when unknown).
    :param app: the :class:`~agent_link_core.app.App` of this process (settings, database,
        mailbox); optional in implementations (pluggy passes only the arguments they take).
    :returns: ``None`` when this plugin does not handle the address, otherwise
        ``{"address": <concrete address>, "via": <the indirect address>, "metadata": {...}}``;
        ``metadata`` is stored with the message (e.g. a role procedure reference); an
        optional ``"served": true`` says the plugin knows a process serves the address
        elsewhere (another machine), so a send to it carries no ``unknown_address`` warning and
        ``requireKnown`` accepts it. A plugin that must ask a host first (I/O) returns an awaitable of that answer instead;
        the core awaits it on its event loop, within the hook budget. Being non-``None``, an
        awaitable always wins, so return one only for addresses the plugin owns.
    :raises AgentLinkError: ``not_found`` / ``ambiguous`` when the plugin owns the address
        but cannot resolve it.

    Called when a message is sent to, or resolve_agent is asked about, an address whose
    scheme no harness owns. ``firstresult``: the first plugin returning a dict wins. Another
    exception, a malformed answer or a hang is reported as this plugin's problem and the
    next plugin is asked.
    """


@_hookspec(firstresult=True)
def agent_link_resolve_elsewhere(address: str, app: App) -> dict[str, Any] | None:
    """Claim a session that an installed harness does not know here but another place serves
    (e.g. the same host on another machine), from local state only (no network).

    :param address: ``<harness>:<id>`` whose harness is installed but does not know the session.
    :param app: the :class:`~agent_link_core.app.App` of this process; optional in implementations.
    :returns: None, or ``{"metadata": {...}, "session": {...}?}``: a message to it is stored
        with ``metadata`` plus ``"elsewhere": true``, never pushed by the local harness (the
        plugin carries it), and ``resolve_agent`` shows ``session`` (a session view) for it.

    Called by a send or resolve_agent after the local harness did not find the session.
    ``firstresult``; a failure or a malformed answer is reported and the next plugin asked.
    """


@_hookspec
def agent_link_before_send(message: OutgoingMessage, context: SendContext, app: App) -> list[dict[str, Any]] | None:
    """Check or annotate a message before anything is stored.

    :param message: the message about to be stored (mutable ``metadata`` and ``tags``).
    :param context: the tool, its arguments, the indirect address used, whether it is a
        reply, the tool call's ``meta``, and ``result``: a dict of declared send-result fields
        the hook may fill (e.g. ``roleProcedure``, ``receipt``).
    :param app: the :class:`~agent_link_core.app.App` of this process (settings, database,
        mailbox); optional in implementations (pluggy passes only the arguments they take).
    :returns: warnings to attach to the result, ``[{"code", "message", "details"?}]``.
    :raises AgentLinkError: to refuse the send (e.g. ``permission_denied``); nothing is
        stored then.

    Called for every new message (sends and replies), after validation and address
    resolution, before the row is written.
    """


@_hookspec
def agent_link_render_envelope(message: dict[str, Any], app: App) -> EnvelopeContribution | None:
    """Contribute envelope attributes and elements for a stored message.

    :param message: the stored message as a dict (``id``, ``from``, ``to``, ``recipient``,
        ``metadata``, ...).
    :param app: the :class:`~agent_link_core.app.App` of this process (settings, database,
        mailbox); optional in implementations (pluggy passes only the arguments they take).
    :returns: an :class:`~agent_link_core.mailbox.EnvelopeContribution` with
        ``attributes`` (only ``via`` and ``procedure`` are rendered) and ``elements``
        (already rendered with :func:`agent_link_core.envelope.render_element`), or ``None``.

    Called every time a message is put in an envelope (push, inbox, wait results): once per
    message in a read (an inbox read asks only for the messages it measures, with each row as
    the read found it, before it marks them delivered), once per page of a paged message.
    """


@_hookspec
def agent_link_on_event(event: Event, app: App) -> None:
    """Observe a mailbox or harness event.

    :param event: an :class:`~agent_link_core.mailbox.Event` with ``kind`` one of sent,
        delivered, released, resolved, reminded, status_changed, launched, archived, forked,
        reconciled; ``message_id``, ``at_ms``, ``actor`` and ``data``.
    :param app: the :class:`~agent_link_core.app.App` of this process (settings, database,
        mailbox); optional in implementations (pluggy passes only the arguments they take).

    Called after the change is committed. An exception here is logged and never undoes or
    fails the change; records that must commit with the change belong in
    ``agent_link_record_event``, where the receipts plugin writes its audit records (a
    reminder claimed by a prompt hook or a push included, when the process that claimed it
    loaded the plugins).
    """


@_hookspec
def agent_link_record_event(event: Event, conn: sqlite3.Connection, app: App) -> None:
    """Write what must be stored together with a mailbox change, in the change's transaction.

    :param event: the :class:`~agent_link_core.mailbox.Event` about to be committed (kinds as
        for ``agent_link_on_event``); ``event.notes`` carries facts to this plugin's own
        ``agent_link_on_event`` (e.g. what to append to a file once committed).
    :param conn: the database connection inside the open write transaction (also reachable
        as ``app.store.conn``); reads through it see the uncommitted change.
    :param app: the :class:`~agent_link_core.app.App` of this process; optional in
        implementations (pluggy passes only the arguments they take).

    Called inside the write transaction, before the commit, each implementation after a
    savepoint (shared with the implementations before it that changed no rows): a crash can
    never leave the change without its record. An exception is logged and undoes only that
    implementation's writes. Write rows, never tables (``agent_link_schema`` makes those). No
    I/O outside the database here; do it in ``agent_link_on_event`` after the commit.
    """


@_hookspec(firstresult=True)
def agent_link_push_reminders(due: DueReminders, app: App) -> Awaitable[bool] | bool | None:
    """Show a session's due reminders by a push of the harness's own (e.g. a new prompt in an idle session).

    :param due: a :class:`~agent_link_core.reminders.DueReminders` for one session: its
        ``address``, ``harness`` and ``session_id``, the messages whose reminder is due, and
        ``claim(via)``, which wins the reminder numbers for this process (each is claimed once
        across all processes) and returns the :class:`~agent_link_core.reminders.ClaimedReminders`
        to show, with the core's wording in ``text()``; None means another process won them.
    :param app: the :class:`~agent_link_core.app.App` of this process.
    :returns: ``None`` when this plugin does not push for ``due.harness`` (the plugin that owns
        the harness answers); otherwise ``True``/``False`` (reminded or not), or an awaitable
        of that (the core awaits it). Check that the session can be shown a reminder *before*
        claiming; a claimed reminder that is then not shown is lost for that number.

    Called by the reminder sweep of every running MCP server (every
    :data:`~agent_link_core.reminders.SWEEP_INTERVAL_MS`) for each session with reminders due.
    Write the implementation as a plain function that returns a coroutine: an ``async def``
    implementation always returns a non-None value and would answer for every harness.
    ``firstresult``. Sessions whose plugin pushes nothing get their reminders through the
    host's prompt hooks instead.
    """


@_hookspec
def agent_link_health(app: App) -> tuple[str, dict[str, Any]] | None:
    """Contribute a section to ``agent_link_health`` / ``agent-link health``.

    :param app: the :class:`~agent_link_core.app.App` of this process (settings, database,
        mailbox); optional in implementations (pluggy passes only the arguments they take).

    :returns: ``(section name, JSON-serialisable dict)``, or ``None``. A ``problem`` key (a line, or ``{message, hint}``)
        or an ``error`` key holding an error object (``{code, message, hint}``) is something the person must fix: health
        lists it under ``problems`` and ``agent-link health`` exits 1; its text form prints a ``summary`` string's line.

    Called on every health request; must be cheap and must not raise (an exception is
    reported in the section instead).
    """


@_hookspec
def agent_link_session_roles(addresses: list[str], app: App) -> dict[str, list[str]] | None:
    """Say which roles the listed sessions hold, for ``list_agents`` / ``resolve_agent``.

    :param addresses: the session addresses about to be shown (``harness:id``).
    :param app: the :class:`~agent_link_core.app.App` of this process (settings, database,
        mailbox); optional in implementations (pluggy passes only the arguments they take).
    :returns: ``{address: [role name, ...]}`` for the sessions that hold a role (others may
        be left out), or ``None``. Answers of several plugins are merged.

    Called once per listing; must be cheap and must not raise (a failure leaves ``roles``
    empty and is logged).
    """


@_hookspec
def agent_link_sessions_listed(sessions: list[dict[str, Any]], app: App) -> None:
    """Observe the sessions a listing found (``list_agents``), e.g. to remember their titles.

    :param sessions: ``[{"address": "harness:id", "title": str}]``, the listed sessions the
        harnesses gave a title (every page's sessions before filters and paging), plain data
        the implementation may keep.
    :param app: the :class:`~agent_link_core.app.App` of this process; optional in
        implementations (pluggy passes only the arguments they take).

    Called once per listing that found a titled session, after the harnesses answered and
    outside any transaction; must be cheap (the listing waits for it) and never wait on the
    database's writer (``app.store.write(wait=False)``). An exception is reported and never
    fails the listing. The search plugin keeps titles here so mail is found by its sessions'
    titles.
    """


@_hookspec(firstresult=True)
def agent_link_check_override(
    target: str, sender: Caller, setting: str, value: str, context: dict[str, Any], app: App
) -> dict[str, Any] | None:
    """Decide whether ``sender`` may change ``setting`` of the existing session ``target``.

    :param target: the session's address.
    :param sender: the caller asking for the change (an ``external`` caller never matches a
        ``*`` policy entry).
    :param setting: ``model`` (also covers model provider and service tier), ``effort`` or
        ``cwd``.
    :param value: the requested value (an absolute path for ``cwd``).
    :param context: ``currentCwd`` (the session's current working directory) and
        ``launchedBy`` (who launched it through agent-link, when known).
    :param app: the :class:`~agent_link_core.app.App` of this process (settings, database,
        mailbox); optional in implementations (pluggy passes only the arguments they take).
    :returns: ``None`` when no plugin keeps a policy (then the harness allows nothing but
        an effort change by the launcher); else ``{"allowed": True, "grantedBy": {...}}`` or
        ``{"allowed": False, "reason": <permission_denied reason>, "message": str}`` with a
        reason among ``model_switch_requires_fork_or_opt_in``, ``effort_not_permitted``,
        ``cwd_change_not_permitted``, ``cwd_outside_workspace``.

    Called by a harness before it applies a model, effort or cwd change to an existing
    session. ``firstresult``.
    """


@_hookspec(firstresult=True)
def agent_link_claim_paths(
    holder: str, paths: list[str], project_root: str, reason: str | None, ttl_ms: int | None,
    until_resolved: str | None, key: str | None, app: App,
) -> Awaitable[dict[str, Any]] | None:
    """Claim files exclusively for a session another plugin starts or assigns work to (a
    project's worker, a role's holder).

    :param holder: the address the claim is for (the session), or a name that stands for a
        session not started yet (shown to anyone the claim stops; hand the claim to the
        session later with the same ``key``).
    :param paths: files, directories or globs, relative to ``project_root`` or absolute inside it.
    :param project_root: the absolute project root.
    :param reason: why, shown to anyone the claim stops.
    :param ttl_ms: time to live (ms), or None for the plugin's default.
    :param until_resolved: a message id: the claim ends when that message is resolved (the
        worker's task), or None.
    :param key: names the claim (``role:<name>``, a task's message id), or None: a claim with a
        key replaces, in the same transaction, whatever was claimed under that key before,
        whoever holds it (so a claim moves to another holder with no moment where a third
        party could take the paths), and :func:`agent_link_release_claims` ends it.
    :param app: the :class:`~agent_link_core.app.App` of this process.
    :returns: None when no plugin claims files; else an awaitable of
        ``{"projectRoot", "leases": [...]}``. Awaiting it raises
        :class:`~agent_link_core.errors.AgentLinkError` (``lease_conflict`` with
        ``details.conflicts``, ``invalid_arguments`` for a bad path) and claims nothing then.

    Called by a plugin that starts a session with files to own (claim first, under a stand-in
    holder and a key, then start the session and claim again for it with the same key: a
    clash then starts nothing) or that gives a session work (a role). ``firstresult``; write
    the implementation as a plain function returning a coroutine (see
    ``agent_link_push_reminders``).
    """


@_hookspec(firstresult=True)
def agent_link_release_claims(key: str, app: App) -> dict[str, Any] | None:
    """End what :func:`agent_link_claim_paths` claimed under ``key`` (a role given up, a
    worker that could not be started).

    :param key: the claim's key.
    :param app: the :class:`~agent_link_core.app.App` of this process.
    :returns: None when no plugin claims files; else ``{"released": [lease, ...]}`` (empty
        when nothing was held under ``key``).

    Called by a plugin whose claim ends before its own end comes (a worker whose launch or
    task failed, a role cleared). ``firstresult``.
    """


@_hookspec
def agent_link_server_tasks(app: App) -> list[Callable[[], Awaitable[None]]] | None:
    """Contribute background work that runs inside every ``agent-link mcp`` server.

    :param app: the :class:`~agent_link_core.app.App` of the server process (settings,
        database, mailbox, harnesses).
    :returns: coroutine functions taking no arguments (e.g. a loop finishing jobs whose
        server died), or ``None``. Each is started once, when the server starts serving, and
        cancelled when it stops; one that fails or holds the loop is reported, never fatal.

    Called once by the MCP server at start, before the client's ``initialize``. Keep the
    work cooperative (``await`` often): it shares the server's event loop with tool calls.
    """


@_hookspec
def agent_link_register_legacy_importers(register: Callable[[Any], None]) -> None:
    """Contribute importers of the original Agent Link's files (``agent-link import-legacy``).

    :param register: call it with an ``agent_link_legacy.contract.LegacyImporter`` per kind
        of the original's state this plugin owns (its ``name``: ``mailbox``, ``receipts``,
        ...). Two plugins registering the same name is an error naming both. The type is the
        legacy plugin's, which alone calls this hook: import it inside the implementation, so
        that a plugin loads without the legacy plugin installed.

    Called by the legacy plugin when ``agent-link import-legacy`` or health (its ``legacy``
    section) first needs the importers. Not ``firstresult``: every plugin is asked. The importer's ``run`` writes the
    plugin's own records through the import's transaction, which it may not end (commit,
    rollback and its own savepoints are refused); one that raises anything, tries to end it or
    leaves counts that are not integers is undone alone and reported, the other importers
    still run. The run holds the write lock, so importers must be quick (docs/plugins.md).
    """
