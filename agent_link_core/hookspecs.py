"""Every extension point of agent-link, as pluggy hook specifications.

Each docstring gives the arguments' and the answer's shapes and when the hook is called; how a failure of each is
contained is in docs/plugins.md section 3 (tested against these specs). Plugins implement them with ``from
agent_link_core import hookimpl``; the core calls them with keywords through :class:`agent_link_core.plugins.Hooks`.
Hooks are synchronous: I/O goes in a harness's async methods, or an awaitable answer where a hook allows one.
Implementations name only the arguments they take (an ``app`` is the process's :class:`~agent_link_core.app.App`);
``refuses``: one may raise ``AgentLinkError``, ``awaitable``: it may answer with an awaitable, awaited on the caller's loop.
"""

from __future__ import annotations

from agent_link_core.lazy import hookspec

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - typing only
    import sqlite3
    from collections.abc import Awaitable, Collection, Mapping
    from typing import Any, Callable

    import click

    from agent_link_core.app import App
    from agent_link_core.config import Setting
    from agent_link_core.harness import Harness
    from agent_link_core.model import Caller, Session
    from agent_link_core.reading import ReadDraft
    from agent_link_core.records import EnvelopeContribution, Event, OutgoingMessage, PromptHook, SendContext
    from agent_link_core.store import Migration
    from agent_link_core.tools.registry import ToolCall, ToolSpec


@hookspec
def agent_link_register_harnesses(register: Callable[[Harness], None]) -> None:
    """Contribute harnesses, one per host. Called once per process, when the App is built.

    :param register: call it with a :class:`~agent_link_core.harness.Harness` (or a ``HarnessDeclaration``) per host;
        its ``name`` is the address scheme it owns (``name:<session id>``).
    """


@hookspec
def agent_link_register_tools(register: Callable[[ToolSpec], None], app: App | None) -> None:
    """Contribute MCP tools (the core's own come through it too: ``agent_link_core.tools.core_tools``).
    Called when the MCP server builds its tool table, and by ``plugins`` and health.

    :param register: call it with a :class:`~agent_link_core.tools.registry.ToolSpec` per tool.
    :param app: the App with its harnesses, or None when tools are listed without one.
    """


@hookspec
def agent_link_listed_tools(tools: dict[str, ToolSpec], host: str | None, app: App) -> list[str] | None:
    """Choose which registered tools an MCP server lists in ``tools/list`` (and answers ``tools/call`` for). Called once
    when the server starts, and by whoever asks what a server lists (cheap: no I/O). Without an answer every tool is listed.

    :param tools: ``{tool name: ToolSpec}``, every registered tool in registration order.
    :param host: the host that started the server (its ``AGENT_LINK_HOST``), or None.
    :param app: the server's App.
    :returns: the names to list, or None for no opinion; with several answers a tool is listed when every answer names it.
    """


@hookspec
def agent_link_register_settings(register: Callable[[Setting], None]) -> None:
    """Declare the ``AGENT_LINK_*`` settings this plugin reads. Called once per process, unless the package declares them
    as data (``AGENT_LINK_SETTINGS``).

    :param register: call it with a :class:`~agent_link_core.config.Setting` per variable.
    """


@hookspec
def agent_link_register_prompt_hooks(register: Callable[[PromptHook], None]) -> None:
    """Declare the module that answers a host's prompt hooks (``agent-link hook <harness> <event>``). Called when the
    plugins load; the answer is kept in the registry file the hook fast path reads (:mod:`agent_link_core.hook`,
    docs/plugins.md section 6).

    :param register: call it with a :class:`~agent_link_core.records.PromptHook` (harness name, dotted module path) per host.
    """


@hookspec
def agent_link_register_commands(cli: click.Group) -> None:
    """Add click commands or groups to the ``agent-link`` CLI. Called when the CLI looks up a command through click
    (never for ``agent-link hook``).

    :param cli: the root group; call ``cli.add_command(...)``.
    """


@hookspec
def agent_link_schema() -> list[Migration] | None:
    """Return the SQL migrations this plugin owns. Called when the server or the CLI opens the database (a package
    declaring its versions as ``AGENT_LINK_SCHEMA`` is imported only when the database lacks one).

    :returns: :class:`~agent_link_core.store.Migration` records (owner: the plugin's name, version from 1, sql); each
        version applies once per database, in order.
    """


@hookspec(firstresult=True, refuses=True, awaitable=True)
def agent_link_resolve_address(address: str, caller_address: str, app: App) -> dict[str, Any] | None:
    """Resolve an indirect address (such as ``role:<name>``) to the agent that receives it. Called by a send or
    resolve_agent for an address whose scheme no harness owns, and by a CLI target that is no address (a contact alias).

    :param address: an address whose scheme no harness owns, or another target form.
    :param caller_address: the sender (``external`` when unknown).
    :param app: the App.
    :returns: None when this plugin does not own the address, else
        ``{"address": concrete address, "via": the indirect one, "metadata": {...}, "served"?: bool}``
        or an awaitable of it (awaited within the hook budget; being non-None it always wins).
    :raises AgentLinkError: ``not_found`` / ``ambiguous`` for an owned address it cannot resolve.
    """


@hookspec(firstresult=True)
def agent_link_resolve_elsewhere(address: str, app: App) -> dict[str, Any] | None:
    """Claim a session the local harness does not know but another place serves (another machine), from local state
    only. Called by a send or resolve_agent after the local harness did not find the session.

    :param address: ``<harness>:<id>`` of an installed harness that did not find the session.
    :param app: the App.
    :returns: None, or ``{"metadata": {...}, "session"?: session view}``.
    """


@hookspec(refuses=True)
def agent_link_before_send(message: OutgoingMessage, context: SendContext, app: App) -> list[dict[str, Any]] | None:
    """Check or annotate a message before it is stored. Called for every new message, after validation and address resolution.

    :param message: the message about to be stored (``metadata`` and ``tags`` mutable).
    :param context: the tool, its arguments, the indirect address, whether it is a reply, the call's ``meta``, and
        ``result``: declared send-result fields the hook may fill.
    :param app: the App.
    :returns: warnings for the result, ``[{"code", "message", "details"?}]``, or None.
    :raises AgentLinkError: to refuse the send (e.g. ``permission_denied``); nothing is stored.
    """


@hookspec(firstresult=True, refuses=True)
def agent_link_before_store(message: OutgoingMessage, context: SendContext, conn: sqlite3.Connection, app: App) -> str | None:
    """Check a new message against the mailbox as it is when the message is stored (the loops plugin's loop guard).
    Called for every new message (not a resend under a stored id) after ``agent_link_before_send``, inside the write
    transaction that inserts it, so what concurrent sends stored counts; for a reply that resolves the message it
    answers, just before the resolution's transaction.
    Under the write lock its budget is a quarter of the busy timeout (docs/plugins.md, section 3).

    :param message: the message about to be stored (read it, do not change it).
    :param context: the send's context as ``agent_link_before_send`` left it (``chosen_id``: the caller chose the id).
    :param conn: the store's connection, in the open write transaction: read with it, never write.
    :param app: the App.
    :returns: None to store the message, or the id of a stored message this one retries: nothing is stored and the send
        answers with that one (``created`` False, ``duplicate``).
    :raises AgentLinkError: to refuse the send; nothing is stored.
    """


@hookspec
def agent_link_render_envelopes(messages: tuple[Mapping[str, Any], ...], app: App) -> dict[str, EnvelopeContribution] | None:
    """Contribute envelope attributes and elements for stored messages. Called each time messages are put in envelopes
    (push, inbox, wait, listings), once for all the messages of that read; a paged message once per page.

    :param messages: the stored messages (``id``, ``from``, ``to``, ``recipient``, ``metadata``, ...), in order, read-only
        (each a ``MappingProxyType``, its nested dicts too, its lists tuples) in a tuple, so every plugin sees them as stored.
    :param app: the App.
    :returns: ``{message id: EnvelopeContribution}`` for the messages it adds to (of ``attributes`` only ``via`` and
        ``procedure`` are rendered; ``elements`` made with :func:`agent_link_core.envelope.render_element`; ``author``, 1-300
        characters, replaces the notice's "another AI agent" sentence, the first plugin's counting), or None.
    """


@hookspec
def agent_link_on_event(event: Event, app: App) -> None:
    """Observe a mailbox or harness event. Called after the change is committed; records that must commit with it belong
    in ``agent_link_record_event``.

    :param event: an :class:`~agent_link_core.records.Event` (``kind``, ``message_id``, ``at_ms``, ``actor``, ``data``).
    :param app: the App.
    """


@hookspec
def agent_link_record_event(event: Event, conn: sqlite3.Connection, app: App) -> None:
    """Write rows that must be stored together with a mailbox change. Called inside the transaction before the commit,
    after a savepoint; no I/O outside the database. Under the write lock its budget is a quarter of the busy timeout.

    :param event: the :class:`~agent_link_core.records.Event` about to be committed; ``event.notes`` carries facts to
        this plugin's own ``agent_link_on_event``.
    :param conn: the connection inside the change's open write transaction.
    :param app: the App.
    """


@hookspec
def agent_link_health(app: App) -> tuple[str, dict[str, Any]] | None:
    """Contribute a section to ``agent_link_health`` / ``agent-link health``. Called on every health request; must be cheap.

    :param app: the App.
    :returns: ``(section name, JSON-serialisable dict)`` or None; the dict may hold ``summary`` (one line), ``problem``
        (a line or ``{message, hint}``) or ``error`` (an error object) for something the person must fix.
    """


@hookspec
def agent_link_session_roles(addresses: list[str], app: App) -> dict[str, list[str]] | None:
    """Say which roles the listed sessions hold (``list_agents``, ``resolve_agent``). Called once per listing; must be cheap.

    :param addresses: the session addresses about to be shown.
    :param app: the App.
    :returns: ``{address: [role name, ...]}`` (sessions without a role may be left out) or None; several plugins'
        answers are merged.
    """


@hookspec
def agent_link_sessions_listed(sessions: list[dict[str, Any]], app: App) -> None:
    """Observe the titled sessions a listing found (e.g. to find mail by session title). Called once per listing that
    found a titled session, outside any transaction; must be cheap and never wait for the database's writer
    (``app.store.write(wait=False)``).

    :param sessions: ``[{"address": "harness:id", "title": str}]``, before filters and paging.
    :param app: the App.
    """


@hookspec
def agent_link_present_sessions(harness: str, app: App) -> list[Session] | None:
    """Contribute sessions of addresses no harness lists (the presence plugin: plain addresses a process serves now).
    Called by every listing and resolve (``list_agents``, ``resolve_agent``, ``agent-link sessions``, a harness filter's
    check); must be cheap.

    :param harness: ``all``, or the one address scheme the listing asks for.
    :param app: the App.
    :returns: :class:`~agent_link_core.model.Session` records (of schemes no installed harness owns), or None; several
        plugins' answers are joined.
    """


@hookspec
def agent_link_app_opened(app: App) -> None:
    """Observe an App just opened (its settings read, its database open): ``App.create``, once per CLI command that opens
    the mailbox and once per MCP server; not the prompt hook's fast path. Called in every such process: keep it cheap
    and import little (the settings plugin's record of the state dirs in use).

    :param app: the App.
    """


@hookspec
def agent_link_inbox_read(address: str, app: App) -> None:
    """Observe a read of ``address``'s inbox that marks mail delivered (``agent-link inbox``, ``wait``, ...), before it
    reads; an MCP server's reads are not told (its serving is: ``agent_link_server_tasks``). Called outside any
    transaction; may write, waiting briefly for the writer (a busy database is no reason to fail the read).

    :param address: the reader's address.
    :param app: the App.
    """


@hookspec
def agent_link_held_messages(address: str, rows: list[Any] | None, app: App) -> Collection[str] | None:
    """Name the mail of ``address`` a running wait of it (any process) returns itself: a push leaves it to the wait (event
    ``held_for_wait``), an inbox read leaves it out (``heldByActiveWait``). Called by every push and inbox read: answer None
    before reading any message when nobody waits.

    :param address: the recipient.
    :param rows: the ``messages`` rows of ``address`` to check, or None for its undelivered mail.
    :param app: the App.
    :returns: the held message ids (answers joined), or None. With no answer nothing is held.
    """


@hookspec(firstresult=True)
def agent_link_fit_read(caller: Caller, read: ReadDraft, app: App) -> int | None:
    """Fit an inbox read (``read_agent_link_inbox``, ``agent-link inbox``) to what the caller's host shows the model in
    full (the budgets plugin: its harness's ``OutputBudget``). Called by every read that found mail, before anything is
    marked: a read marks delivered only what it returns. Without an answer the read returns everything, unpaged (a host
    may then cut a long result); a failure or an answer outside ``read.start..read.stop`` counts as none, and the read
    says so with a ``plugin_failed`` warning.

    :param caller: who reads (its ``host`` names the harness whose host shows the result).
    :param read: a :class:`~agent_link_core.reading.ReadDraft`: ``read.result(n)`` is what the read returns with
        answer ``n``; ``read.page`` False: ``n`` whole messages (0: the first one is paged); True: one message's
        envelope (``messageId`` + ``offset``) up to character ``n``.
    :param app: the App.
    :returns: ``n`` (``read.start`` <= n <= ``read.stop``), or None.
    """


@hookspec(firstresult=True)
def agent_link_push_notice(message: dict[str, Any], size: int, app: App) -> str | None:
    """Give the text pushed instead of an envelope larger than the recipient's host shows in one push: the message
    stays queued and is read from the inbox (the budgets plugin: an ``<agent-link-notice>`` naming it). Called by a push
    whose envelope is over its harness's ``OutputBudget.push_bytes`` (and by a host plugin's own push loop). Without an answer
    the envelope is pushed whole (a host may then cut it); a failure or an answer that is not a text within that limit
    counts as none.

    :param message: the stored message (as :meth:`~agent_link_core.harness.Harness.deliver` gets it).
    :param size: UTF-8 bytes of its envelope.
    :param app: the App.
    :returns: the text, or None.
    """


@hookspec(firstresult=True, refuses=True)
def agent_link_check_recipient(address: str, require_known: bool, app: App) -> dict[str, Any] | None:
    """Say whether a plain address (no harness owns its scheme, not ``role:``, no plugin said it is served elsewhere) is
    known to be served. Called by a send for its recipient (not a resend under a stored id) and by a plugin handing work
    to an address without sending (a role's holder: :meth:`agent_link_core.sending.Outbox.unseen_address`).

    :param address: the plain address.
    :param require_known: the sender asked to refuse an unknown address (``requireKnown``, ``--require-known``).
    :param app: the App.
    :returns: None for no opinion, else ``{"known": bool, "warning"?: {"code", "message", "details"?}}``: the warning the
        send carries (``unknown_address``). With no answer, a send carries no warning and ``require_known`` refuses.
    :raises AgentLinkError: ``not_found`` to refuse an unknown address when ``require_known``.
    """


@hookspec(firstresult=True)
def agent_link_suggest_addresses(query: str, app: App) -> list[str] | None:
    """Name the addresses closest to a target that found nothing (a typo's fix). Called by ``agent-link send`` and the
    other CLI targets (:meth:`agent_link_core.directory.Directory.resolve_target`) before they answer ``not_found``.

    :param query: the target as given (a bare id such as ``teambob``, or an address).
    :param app: the App.
    :returns: up to three addresses, closest first, or None.
    """


@hookspec
def agent_link_server_tasks(app: App) -> list[Callable[[], Awaitable[None]]] | None:
    """Contribute background work of every ``agent-link mcp`` server. Called once by the MCP server at start, before
    the client's ``initialize``: what the call itself does (the presence plugin's record of the address it serves) is
    done before the server answers anything.

    :param app: the server's App.
    :returns: coroutine functions taking no arguments, or None; each starts once when the server starts serving and is
        cancelled when it stops. They share the server's event loop with tool calls: ``await`` often.
    """


@hookspec(firstresult=True)
def agent_link_mcp_connection(write: Any, app: App) -> Any:
    """Watch an ``agent-link mcp`` connection message by message (which protocol revision the client speaks; a host
    plugin refuses ``server/discover`` while its live channel needs the ``initialize`` handshake, and adds its channel's
    capability to the ``initialize`` answer). Called once per connection, before the client's first message.

    :param write: where the plugin writes notifications: ``await write.send(SessionMessage(JSONRPCNotification(...)))``
        (MCP SDK types); anything else raises ``TypeError`` there.
    :param app: the server's App.
    :returns: None, or a peer that every harness's ``serve`` receives, with ``inbound(item) -> SessionMessage | None`` (each
        item read from the client, before the SDK's server sees it; an answer, a ``JSONRPCResponse`` or ``JSONRPCError``
        with the request's id, is written back instead of passing it on), ``outbound(item) -> SessionMessage | None``
        (each item the server writes, before it is written; an answer, the same kind of message with the same id, is
        written instead of it) and ``view() -> dict``; an answer that is none of these is a fault, and the item passes
        (``agent_link_health``'s ``mcp``). Each call is synchronous and must be cheap.
    """


def _extension_problem(answer: Any, plugin: str) -> str | None:
    from agent_link_core.tools.core_tools import extension_problem

    return extension_problem(answer)


@hookspec(check=_extension_problem)
def agent_link_extend_tools(app: App | None) -> dict[str, dict[str, Any]] | None:
    """Add arguments, result fields and a description's end to core MCP tools (the waits plugin's ``waitForReply`` in
    ``message_agent``). Called when the tools are collected (``agent_link_register_tools``); must be cheap. Added arguments
    a call gives reach the recipient's ``Harness.deliver`` (``message_agent``) or every ``Harness.prepare_health`` (health).

    :param app: the App, or None when tools are listed without one.
    :returns: ``{core tool name: {"input"?: {argument: JSON schema}, "output"?: {result field: JSON schema},
        "description"?: str}}`` or None; the names are the plugin's own (one the tool has is refused, with the answer).
    """


@hookspec(firstresult=True, refuses=True, awaitable=True, bound_s=700.0)  # a wait's 600 s, its last poll and push
def agent_link_tool_send(arguments: dict[str, Any], recipient: str, send: Callable[..., Awaitable[dict[str, Any]]],
                         call: ToolCall, app: App) -> Awaitable[dict[str, Any]] | None:
    """Carry out a ``message_agent`` send (or a plugin tool's send through it) whose arguments ask for what the plugin
    added to the tool (``agent_link_extend_tools``; the waits plugin's ``waitForReply``). Called for every such send once
    the recipient is checked, before anything is stored (the first answer takes it); its awaitable runs up to 700 s,
    not the hook budget.

    :param arguments: the tool's validated arguments.
    :param recipient: the address the message goes to.
    :param send: ``send(message_id=None, **keywords)``: stores and pushes the message once (a later call returns the same
        future) under ``message_id`` when the caller gave none, with more :meth:`~agent_link_core.app.App.send` keywords
        (``wait_for_reply``); its result is the tool's.
    :param call: the tool call (caller, warnings, progress).
    :param app: the App.
    :returns: an awaitable of the tool's result, or None to leave the send to the core.
    :raises AgentLinkError: a refusal, before anything is sent.
    """
