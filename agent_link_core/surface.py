"""The stable surface of the App for plugins, as typing protocols.

A plugin's hooks and harness receive the process's :class:`~agent_link_core.app.App`. What is
listed here is promised to stay (names, arguments and meaning); everything else on the App,
the mailbox and the store is the core's own and may change without notice. The plugin
author's guide (``docs/plugins.md``, section "The app surface") describes each member.

Annotate with these protocols to let mypy hold a plugin to the promise::

    from agent_link_core.surface import PluginApp

    @hookimpl
    def agent_link_health(app: PluginApp) -> tuple[str, dict[str, Any]]:
        return "mine", {"stateDir": app.config.state_dir}

A test (``tests/test_surface.py``) checks that the App really has every member listed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover
    import sqlite3

    from agent_link_core.directory import Directory
    from agent_link_core.harness import Harness
    from agent_link_core.model import Caller
    from agent_link_core.sending import Outbox
    from agent_link_core.tools.registry import ToolSpec
    from agent_link_core.waits import Waits


class PluginConfig(Protocol):
    """Parsed settings: the core's and every plugin's declared ``AGENT_LINK_*`` variables."""

    sources: dict[str, str]

    def get(self, name: str) -> Any:
        """The parsed value of a declared setting (``KeyError`` for an undeclared one)."""

    @property
    def state_dir(self) -> str:
        """The state directory (absolute). A plugin keeps its files under ``<state>/<plugin>/``."""

    @property
    def db_path(self) -> str:
        """The database file."""

    @property
    def reminder_limit(self) -> int:
        """Reminders per message."""

    @property
    def reminder_interval_ms(self) -> int:
        """Time between reminders, in ms."""


class PluginStore(Protocol):
    """The database, for the plugin's own tables (created by its ``agent_link_schema``
    migrations). Core tables (messages, resolutions, ...) are read and changed through
    :class:`PluginMailbox` only."""

    path: str
    conn: sqlite3.Connection

    def write(self) -> AbstractContextManager[sqlite3.Connection]:
        """One short ``BEGIN IMMEDIATE`` transaction, rolled back on any error."""


class PluginMailbox(Protocol):
    """Message operations a plugin may use (each change is one transaction and emits events)."""

    def get_row(self, message_id: str) -> sqlite3.Row | None:
        """A stored message by exact id, or None."""

    def require(self, message_id: str) -> sqlite3.Row:
        """A stored message; ``not_found`` / ``invalid_arguments`` otherwise."""

    def state(self, row: sqlite3.Row, now: int | None = None) -> Any:
        """The computed status, delivery state and reminder schedule of a message."""

    def to_view(self, row: sqlite3.Row, state: Any = None, *, body: bool = False) -> dict[str, Any]:
        """The JSON view tools show."""

    def rows(self, ids: Sequence[str]) -> list[sqlite3.Row]:
        """Stored messages by exact ids, in that order (absent ones left out), in one query."""

    def states(self, rows: Sequence[sqlite3.Row], now: int | None = None) -> list[Any]:
        """:meth:`state` of many rows in a fixed number of queries (for lists)."""

    def to_views(self, rows: Sequence[sqlite3.Row], *, body: bool = False, now: int | None = None) -> list[dict[str, Any]]:
        """:meth:`to_view` of many rows, their states read together (for lists)."""

    def envelope(self, row: sqlite3.Row) -> str:
        """The rendered ``<agent-link-message>`` envelope (the only form a model may see)."""

    @staticmethod
    def row_dict(row: sqlite3.Row) -> dict[str, Any]:
        """A row as a dict with parsed metadata."""

    def open_for(self, recipient: str, limit: int, *, undelivered_only: bool = False) -> list[sqlite3.Row]:
        """Open mail of ``recipient``, oldest first."""

    def open_expectations(self, visibility: Any, limit: int) -> list[sqlite3.Row]:
        """Open reply/action mail ``visibility`` may read, oldest first: what agents wait on."""

    def count_open(self, recipient: str, *, undelivered_only: bool = False) -> int:
        """How much open mail ``recipient`` has."""

    def has_event(self, message_id: str, kind: str) -> bool:
        """Whether the message's event log holds an event of ``kind``."""

    def recent_correspondents(self, scan: int, visibility: Any = None) -> list[sqlite3.Row]:
        """Senders and recipients of the newest ``scan`` sends (of those ``visibility``, a
        :class:`~agent_link_core.mailbox.Visibility`, allows), with their latest time."""

    def open_addressed_to(self, to: str, *, held_by_other_than: str) -> list[str]:
        """Open reply/action mail addressed to ``to`` (e.g. ``role:x``) held by someone else."""

    def mark_delivered(self, message_id: str, via: str, evidence: dict[str, Any] | None = None) -> bool:
        """Record delivery on evidence (a harness's push path ``via``); True when it changed."""

    def due_reminders(self, recipient: str, now: int | None = None) -> list[tuple[sqlite3.Row, Any]]:
        """Reminders due now for ``recipient``."""

    def record_reminder(self, message_id: str, n: int, via: str, to: str, *, wait: bool = True) -> bool:
        """Claim reminder ``n`` of a message (exactly once across processes)."""

    def reassign(self, message_id: str, new_recipient: str, actor: str, *, wait: bool = True) -> bool:
        """Hand an open message to another recipient (role handover)."""

    def record_event(self, message_id: str, kind: str, actor: str | None, via: str | None, data: dict[str, Any]) -> None:
        """Append to a message's event log."""

    def push_outcome(self, message_id: str) -> str:
        """``unknown`` when the last push's outcome is unknown, else ``queued``."""


class PluginHooks(Protocol):
    """The hook calls a plugin may make itself."""

    def check_override(self, target: str, sender: Caller, setting: str, value: str,
                       context: dict[str, Any]) -> dict[str, Any] | None:
        """Ask the override policy (``agent_link_check_override``)."""

    def tools(self) -> dict[str, ToolSpec]:
        """Every accepted MCP tool by name."""

    def collect(self, kind: str, hook_name: str, check: Callable[[Any], None]) -> dict[str, Any]:
        """Run a core ``register``-style hook whose record type is the calling plugin's (the
        web plugin's panels, the legacy plugin's importers); ``check`` raises ``Refused``."""


class PluginApp(Protocol):
    """What a plugin may use on the App (see the module docstring)."""

    config: PluginConfig
    env: Mapping[str, str]
    store: PluginStore
    mailbox: PluginMailbox
    hooks: PluginHooks
    harnesses: dict[str, Harness]
    #: the operations as objects (their methods below are the same bound methods)
    directory: Directory
    outbox: Outbox
    waits: Waits

    def caller(self, meta: Mapping[str, Any] | None = None) -> Caller:
        """Who is calling (harnesses first, then ``AGENT_LINK_ADDRESS``, else external)."""

    def require_caller(self, caller: Caller) -> Caller:
        """The caller when it has an address; ``no_current_session`` otherwise."""

    def held_by_wait(self, row: Any) -> bool:
        """True when a wait in this process is about to return this message (leave it be)."""

    async def send(self, **kwargs: Any) -> Any:
        """Store and push a message (:meth:`agent_link_core.sending.Outbox.send`)."""

    async def reply(self, **kwargs: Any) -> dict[str, Any]:
        """Resolve a message (:meth:`agent_link_core.sending.Outbox.reply`)."""

    async def wait(self, **kwargs: Any) -> dict[str, Any]:
        """Wait for a resolution or a message (:meth:`agent_link_core.waits.Waits.wait`)."""

    def inbox(self, caller: Caller, *, limit: int = 20, mark: bool = True, include_open: bool = True) -> dict[str, Any]:
        """The caller's open mail with envelopes."""

    def status(self, caller: Caller, message_id: str) -> dict[str, Any]:
        """A message's lifecycle for its sender or recipient."""

    async def list_agents(self, **kwargs: Any) -> dict[str, Any]:
        """Sessions of every harness, newest first."""

    async def resolve_agent(self, query: str, **kwargs: Any) -> dict[str, Any]:
        """Resolve an address, an id or words of a title."""

    async def target_address(self, to: str, caller: Caller, *, allow_archived: bool = False) -> tuple[str, str | None, dict[str, Any]]:
        """A ``to`` argument as ``(recipient, via, metadata)``."""


#: The members a test checks against the real App (name -> protocol it belongs to).
SURFACE: dict[str, tuple[str, ...]] = {
    "app": tuple(n for n in PluginApp.__annotations__) + (
        "caller", "require_caller", "held_by_wait", "send", "reply", "wait", "inbox", "status", "list_agents",
        "resolve_agent", "target_address"),
    "config": ("sources", "get", "state_dir", "db_path", "reminder_limit", "reminder_interval_ms"),
    "store": ("path", "conn", "write"),
    "mailbox": ("get_row", "require", "state", "to_view", "envelope", "row_dict", "rows", "states", "to_views", "open_for", "open_expectations", "count_open", "open_addressed_to", "recent_correspondents", "has_event",
                "mark_delivered", "due_reminders", "record_reminder", "reassign", "record_event", "push_outcome"),
    "hooks": ("check_override", "tools", "collect"),
}

