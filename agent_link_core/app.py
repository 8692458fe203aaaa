"""The application object: settings, plugins, database, harnesses, the caller and the reads.

The MCP tools and the CLI both call it (and the :class:`~agent_link_core.directory.Directory` and
:class:`~agent_link_core.sending.Outbox` it holds), so a tool and its command cannot drift apart.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
from collections.abc import Mapping
from functools import cached_property, partial

from agent_link_core.lazy import LazyLogger
from agent_link_core import boundary
from agent_link_core.config import Config, load_config
from agent_link_core.errors import AgentLinkError
from agent_link_core.harness_decl import HarnessDeclaration, HarnessTable
from agent_link_core.mailbox import Mailbox, Visibility
from agent_link_core.model import EXTERNAL, Caller, address_scheme
from agent_link_core.plugins import Hooks, MigrationUnavailable, plugins_of
from agent_link_core.settings_file import with_settings
from agent_link_core.store import Migration, Store, disk_full, ensure_private_dir

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any
    from agent_link_core.directory import Directory
    from agent_link_core.harness import Harness
    from agent_link_core.sending import Outbox

log = LazyLogger(__name__)


class App:
    """One agent-link process's view of the world.

    Build with :meth:`create`. Not thread-safe; the MCP server uses one per process.

    :param config: parsed settings.
    :param hooks: the plugin facade; its ``loaded``, ``blocked`` and ``failed`` say what loading found.
    :param env: the environment the process runs in (identity, host detection).
    """

    def __init__(self, config: Config, hooks: Hooks, env: Mapping[str, str], read_only_ok: bool = False) -> None:
        self.config = config
        self.hooks = hooks
        self.env = env
        hooks.app = self
        hooks.boundary.sink = lambda problem: boundary.append_problem(config.state_dir, problem,
                                                                 self.hooks.installed(env).get(problem["plugin"]))
        self._skip_hung_elsewhere()
        #: harnesses by name; a declared one is built (its host's modules imported) when first used
        self.harnesses = HarnessTable(hooks.harnesses(), self._build_harness)
        #: why this App only reads (its state dir is not writable), else None: see ``read_only_ok``
        self.read_only: AgentLinkError | None = None
        migrations = hooks.migrations()
        try:
            self.store = self._open_store(config.db_path, migrations)
        except AgentLinkError as exc:
            state_dir = os.path.dirname(os.path.abspath(config.db_path))
            if exc.details.get("reason") == "io_error":  # SQLite's word when it cannot make the -shm index of a full disk
                exc = disk_full(config.db_path) or exc
            refusal = read_only_error(state_dir) if not os.access(state_dir, os.W_OK | os.X_OK) else exc
            if not read_only_ok or not os.path.isfile(config.db_path) or refusal.details.get("reason") not in READ_ON:
                raise _name_the_setting(exc, config) from exc
            self.store = Store.open_read_only(config.db_path)
            # Migrations cut short (a first use on a full disk) leave tables missing: reading
            # would fail in the core and in plugins, blaming them for the storage's fault.
            wanted = {(m.owner, m.version) for m in migrations if m.owner not in hooks.boundary.disabled}
            if refusal.details.get("reason") != "corrupt" and not wanted <= self.store.applied():
                self.store.close()
                raise _name_the_setting(exc, config) from exc
            self.read_only = self.store.refusal = refusal
        hooks.boundary.held, hooks.boundary.locked_ms = self.store.conn, max(1000, self.store.busy_timeout_ms // boundary.LOCKED_SHARE)
        self.mailbox = Mailbox(self.store, config, hooks)
        #: the MCP client connection when this process is an MCP server (set by the server)
        self.mcp_connection: tuple[str, Any] | None = None  # (plugin, peer): agent_link_mcp_connection
        for harness in self.harnesses.built():
            self._attach_harness(harness)

    @cached_property
    def outbox(self) -> Outbox:
        """Sends and replies (:class:`~agent_link_core.sending.Outbox`), built when first used."""
        from agent_link_core.sending import Outbox

        return Outbox(self)

    def __getattr__(self, name: str) -> Any:
        """The outbox's and the directory's operations on the App (``app.send``, ``app.list_agents``, ...;
        docs/plugins.md section 4)."""
        if name in ("send", "reply", "push", "refresh_delivery"):
            return getattr(self.outbox, name)
        if name in ("list_agents", "resolve_agent", "target_address"):
            return getattr(self.directory, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @cached_property
    def directory(self) -> Directory:
        """The agents every harness knows (:class:`~agent_link_core.directory.Directory`), built when first used."""
        from agent_link_core.directory import Directory

        return Directory(self)

    def _attach_harness(self, harness: Harness) -> bool:
        """Attach a harness to this App; one that cannot attach leaves its plugin out (reported)."""
        from agent_link_core.harness import call_harness, harness_fault

        if call_harness(self.hooks, harness, "attach", partial(harness.attach, self), default=False) is False \
                and self.hooks.owner("harness", harness.name):
            harness_fault(self.hooks, harness, "attach", "the harness could not attach", disable=True)
            return False
        return True

    def _build_harness(self, declared: HarnessDeclaration) -> Harness | None:
        """Build and attach a declared harness; None when it cannot (reported)."""
        try:
            harness = declared.build()
        except (Exception, SystemExit) as exc:  # the plugin's fault: its harness is gone, its other contributions stay
            from agent_link_core.harness import harness_fault

            harness_fault(self.hooks, declared, "build", f"cannot load: {boundary.describe(exc)}", exc=exc if isinstance(exc, Exception) else None)
            return None
        return harness if self._attach_harness(harness) else None

    def _skip_hung_elsewhere(self) -> None:
        """Skip the hooks another process lately interrupted (:func:`boundary.hung_lately`); an upgraded plugin is tried again."""
        hung = boundary.hung_lately(self.config.state_dir)
        installed = self.hooks.installed(self.env) if hung else {}
        for entry in hung:
            name = entry["plugin"]
            if name in installed and entry.get("version") in (None, installed[name] or entry.get("version")):
                ago = max(int(time.time()) - entry["at"], 0)
                self.hooks.boundary.skip(name, entry["hook"], f"hung in another agent-link process {ago} s ago; skipped until "
                                         f"{boundary.HUNG_SKIP_S // 60} min have passed", boundary.HUNG_SKIP_S - ago)

    def _open_store(self, path: str, migrations: list[Any]) -> Store:
        """Open the database with the core's migrations, then each plugin's (one whose migration fails is left out,
        reported). Raises ``state_io_error`` when the database is unusable."""
        plugins = set(self.hooks.loaded)  # a plugin's migrations carry its name
        store = Store(path, [m for m in migrations if m.owner not in plugins], busy_timeout_ms=self.config.get("AGENT_LINK_BUSY_TIMEOUT_MS"))
        owners = dict.fromkeys(m.owner for m in migrations if m.owner in plugins)
        done = store.applied() if owners else set()
        for owner in owners:
            pending = [m for m in migrations if m.owner == owner and (owner, m.version) not in done]
            if not pending:  # all in: a plugin that declares its migrations is not imported
                continue
            try:
                # a declared migration's SQL is read (its plugin imported) now, not under the write lock
                pending = [m if isinstance(m, Migration) else Migration(m.owner, m.version, m.sql) for m in pending]
            except MigrationUnavailable as exc:
                if owner not in self.hooks.boundary.disabled:
                    self.hooks.boundary.fault(owner, "agent_link_schema", str(exc), disable=True,
                                              fix="List exactly its migrations in its package's AGENT_LINK_SCHEMA.")
                continue
            try:
                store.migrate(pending)  # a storage failure (full, read-only, damaged) is AgentLinkError
            except sqlite3.OperationalError as exc:  # the plugin's SQL
                self.hooks.boundary.fault(owner, "agent_link_schema", f"migration failed: {type(exc).__name__}: {exc}"[:300],
                                          fix="Fix the migration's SQL.", disable=True)
            except sqlite3.DatabaseError as exc:
                store.close()
                raise store.failure(exc) from exc
            except AgentLinkError:
                store.close()
                raise
        return store

    @classmethod
    def create(cls, env: Mapping[str, str] | None = None, extra_plugins: tuple[Any, ...] = (),
               read_only_ok: bool = False, hooks: Hooks | None = None) -> App:
        """Load plugins and settings, open the database, then tell the plugins (``agent_link_app_opened``).

        :param read_only_ok: when the database exists but its state dir is not writable, open it read-only instead of
            failing (``health``: report what can be read); ``read_only`` then holds the refusal, and every write fails.
        :param hooks: plugins already loaded by :func:`~agent_link_core.plugins.load_plugins` for the same ``env``
            (the CLI looks its plugin commands up before it opens the database).
        :raises AgentLinkError: ``invalid_arguments`` for a bad setting (naming the variable), ``state_io_error`` when
            the state dir or database is unusable.
        """
        env = with_settings(dict(os.environ if env is None else env))
        if hooks is None:
            hooks = plugins_of(env, extra_plugins)
        config = load_config(env, hooks.settings())
        configure_logging(config)
        if config.get("AGENT_LINK_DEBUG"):
            hooks.trace = log.debug
        app = cls(config, hooks, env, read_only_ok)
        hooks.call("agent_link_app_opened")
        return app

    async def aclose(self) -> None:
        """Shut the harnesses down (each failure logged), then close the database."""
        for harness in self.harnesses.built():
            try:
                await harness.aclose()
            except Exception:
                log.exception("harness %s failed to close", harness.name)
        self.store.close()

    def close(self) -> None:
        """:meth:`aclose` for code without a running event loop (the CLI, scripts); inside one
        it only closes the database: await :meth:`aclose` there."""
        if not self.harnesses.built():  # no event loop (nor asyncio) needed
            self.store.close()
            return
        import asyncio

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(self.aclose())
            return
        log.warning("App.close() called inside an event loop: harnesses not closed; use aclose()")
        self.store.close()

    def caller(self, meta: Mapping[str, Any] | None = None) -> Caller:
        """Who is calling: the host's harness first, then the others, then ``AGENT_LINK_ADDRESS``, else ``external``."""
        meta = meta or {}
        preferred = self.config.get("AGENT_LINK_HOST")
        for name in sorted(self.harnesses, key=lambda n: (n != preferred, n)):
            entry = self.harnesses.declaration(name)  # kept once built: built ones are skipped alike
            if entry is not None and not entry.may_identify(meta, self.env):
                continue  # it could not name the caller: not built (or asked) for nothing
            harness = self.harnesses.get(name)
            if harness is None:
                continue
            from agent_link_core.harness import call_harness  # loaded with the harness already

            # a harness that fails here loses its own callers only (reported)
            found = call_harness(self.hooks, harness, "identify_caller", partial(harness.identify_caller, meta, self.env),
                                 check=boundary.expect(lambda found: type(found) is Caller, "expected None or a Caller"))
            if found is not None and found.known:
                return found
        configured = self.config.get("AGENT_LINK_ADDRESS")  # validated by load_config
        if configured:
            return Caller(configured, "config", address_scheme(configured))
        return Caller(EXTERNAL, "fallback", None)

    async def _get_session(self, harness: Harness, session_id: str) -> Any:
        """``harness.get_session`` through the boundary: a fault or a hang is reported and is "not found"."""
        from agent_link_core.harness import acall_harness

        return await acall_harness(self.hooks, harness, "get_session", lambda: harness.get_session(session_id),
                                  check=boundary.expect(boundary.is_session, "expected None or a Session of the documented types"))

    def require_caller(self, caller: Caller) -> Caller:
        """The caller when it has an address; else ``no_current_session``."""
        if caller.known:
            return caller
        raise AgentLinkError(
            "no_current_session",
            "agent-link cannot tell which session is calling, so it has no address to act as (for mail, leases or roles).",
            {"host": self.config.get("AGENT_LINK_HOST"), "sources": ["harness", "AGENT_LINK_ADDRESS"]},
            hint="Run inside a supported host session, or set AGENT_LINK_ADDRESS (e.g. test:alice).",
        )

    def begin_inbox_read(self, caller: Caller, mark: bool, tell: bool = True) -> tuple[bool, list[dict[str, Any]]]:
        """What every inbox read does first: tell plugins the caller reads (``agent_link_inbox_read``: a read that marks,
        unless ``tell`` is False: an MCP server told them it serves as it started), and switch marking off, with a
        warning, when the database refuses writes (:attr:`read_only`, damaged or replaced). Returns ``(mark,
        warnings)``: whether the read may mark, and the warnings to report."""
        refusal = self.read_only or self.store.damage() or self.store.replaced() if mark else None
        if refusal is None:
            if mark and tell:  # only a read that writes anyway: a peek never waits for a writer
                self.hooks.call("agent_link_inbox_read", address=caller.address)
            return mark, []
        return False, [{"code": refusal.code, "message": refusal.message + " Nothing was marked delivered.",
                        "details": refusal.details, "hint": refusal.hint}]

    def inbox(self, caller: Caller, *, limit: int = 20, mark: bool = True, include_open: bool = True,
              message_id: str | None = None, offset: int = 0, tell: bool = True) -> dict[str, Any]:
        """The caller's open mail with envelopes (``read_agent_link_inbox``: :func:`agent_link_core.reading.inbox`, whose
        arguments these are) after :meth:`begin_inbox_read`; with ``mark``, what it returns undelivered is marked delivered."""
        from agent_link_core import reading

        mark, warnings = self.begin_inbox_read(self.require_caller(caller), mark, tell)
        out = reading.inbox(self, caller, limit=limit, mark=mark, include_open=include_open, message_id=message_id, offset=offset)
        return {**out, "warnings": [*out.get("warnings", []), *warnings]} if warnings else out

    def status(self, caller: Caller, message_id: str) -> dict[str, Any]:
        """A message's lifecycle, for its sender or recipient only (never the body)."""
        row = self.mailbox.require(message_id)
        # an unidentified caller is "external": it reaches mail sent as external
        Visibility(caller.address).require(row, f"the status of {row['id']}")
        state = self.mailbox.state(row)
        self.mailbox.note_transition(row, state)
        view = self.mailbox.to_view(row, state)
        return {"messageId": row["id"], "holder": row["recipient"], **{k: v for k, v in view.items() if k not in ("id", "bodyBytes")}}

    def health(self, meta: Mapping[str, Any] | None = None, include_caller_context: bool = False) -> dict[str, Any]:
        """Everything a person needs to tell whether agent-link works here (:func:`agent_link_core.health.report`)."""
        from agent_link_core import health as health_report

        return health_report.report(self, meta, include_caller_context)


def configure_logging(config: Config) -> None:
    """Send agent-link's logs to a private file when debugging or a level is set: ``AGENT_LINK_DEBUG`` (level debug) or
    ``AGENT_LINK_LOG_LEVEL`` turn it on; the file is ``AGENT_LINK_LOG_FILE`` or ``<state>/logs/agent-link.log`` (0600, dir
    0700). Otherwise only warnings reach stderr; never stdout (MCP's transport)."""
    level_name = "debug" if config.get("AGENT_LINK_DEBUG") else config.get("AGENT_LINK_LOG_LEVEL")
    if level_name is None:  # nothing to set up: logging is imported when something is logged
        return
    import logging

    logger = logging.getLogger("agent_link_core")
    if any(getattr(h, "_agent_link", False) for h in logger.handlers):
        return
    path = config.get("AGENT_LINK_LOG_FILE") or os.path.join(config.state_dir, "logs", "agent-link.log")
    handler: logging.Handler
    try:
        ensure_private_dir(os.path.dirname(path))
        os.close(os.open(path, os.O_CREAT | os.O_APPEND | os.O_WRONLY, 0o600))
        os.chmod(path, 0o600)  # also one made under someone else's umask, or by an older version
        handler = logging.FileHandler(path, encoding="utf-8")
    except (OSError, AgentLinkError) as exc:  # a logging problem must not stop agent-link
        reason = exc.message if isinstance(exc, AgentLinkError) else (exc.strerror or str(exc))
        variable = "AGENT_LINK_LOG_FILE" if config.get("AGENT_LINK_LOG_FILE") else "AGENT_LINK_STATE_DIR"
        sys.stderr.write(f"agent-link: warning: cannot write the log file {path} ({reason}); logging to stderr. "
                         f"Fix or unset {variable}.\n")
        handler = logging.StreamHandler(sys.stderr)
    handler._agent_link = True  # type: ignore[attr-defined]
    handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level_name.upper())  # error, warn, info, debug: names logging knows


#: why a database that cannot be opened for writing is still opened to be read (``read_only_ok``)
READ_ON = ("read_only", "disk_full", "corrupt")


def read_only_error(state_dir: str) -> AgentLinkError:
    """The refusal of a state dir this process can read but not write (``health`` reports it)."""
    from shlex import quote

    return AgentLinkError(
        "state_io_error",
        f"The state dir {state_dir} is not writable: mail can be read, but nothing can be sent, marked read or recorded.",
        {"path": ".", "errno": "EACCES", "reason": "read_only"},
        hint=f"Make it writable for this user (`chmod u+w {quote(state_dir)}`, or remount it read-write), "
             "or point AGENT_LINK_STATE_DIR at a writable directory.",
    )


def _name_the_setting(exc: AgentLinkError, config: Config) -> AgentLinkError:
    """Point a state error at the variable that chose the path."""
    if exc.code != "state_io_error" or exc.details.get("reason") in ("replaced", "orphan_wal", "corrupt", "disk_full"):
        return exc
    if config.get("AGENT_LINK_MAILBOX_PATH"):
        variable, path = "AGENT_LINK_MAILBOX_PATH", config.db_path
    else:
        variable, path = "AGENT_LINK_STATE_DIR", config.state_dir
    source = config.sources.get(variable, "default")
    named = variable if source in (variable, "default") else f"{source} (read as {variable})"
    if exc.details.get("reason") == "not_agent_link":
        what = "an agent-link database or a path that does not exist yet"
    else:
        what = "a path this user can create and write" + (" (a directory)" if variable == "AGENT_LINK_STATE_DIR" else "")
    exc.hint = f"{named} is {path}; point it at {what}, or unset it."
    return exc
