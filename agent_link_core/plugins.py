"""Plugin loading and :class:`Hooks`, the typed facade over agent-link's hooks (docs/plugins.md, sections 1-3): the
entry points of the ``agent_link`` group, then the core's default plugins, each implementation called through
:mod:`agent_link_core.boundary` in pluggy's order by :class:`~agent_link_core.lazy_plugins.Declared` (no pluggy import)."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping

from agent_link_core.lazy import LazyLogger
from agent_link_core import discovery
from agent_link_core.lazy_plugins import Declared, package_hookspecs
from agent_link_core.config import check_setting
from agent_link_core.boundary import (CORE_PLUGIN, Boundary, CallState, Refused, _awaitable, current_plugin, run_blocking,
                                     timeout_from_env)

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Callable
    import click
    import sqlite3

    from agent_link_core.config import Setting
    from agent_link_core.app import App
    from agent_link_core.harness import Harness
    from agent_link_core.model import Caller, Session
    from agent_link_core.reading import ReadDraft
    from agent_link_core.records import Event, OutgoingMessage, PromptHook, SendContext
    from agent_link_core.store import Migration
    from agent_link_core.tools.registry import ToolSpec

log = LazyLogger(__name__)

ENTRY_POINT_GROUP = "agent_link"


def plugins_of(env: Mapping[str, str] | None = None, extra_plugins: tuple[Any, ...] = (), *,
               declared: bool = False) -> Hooks:
    """The plugins of ``env`` as given (default: the process's; no settings file read) in load order, then
    ``extra_plugins`` (objects or ``(name, plugin)`` pairs); never raises for a plugin's fault (it is in the report).

    :param env: where ``AGENT_LINK_DISABLE_PLUGINS``, ``..._LOAD_PLUGINS``, ``..._HOOK_TIMEOUT_MS`` are read.
    :param declared: take each entry point's plugin by the hooks its package declares, imported when a call needs one;
        else every plugin is imported now.
    """
    env = os.environ if env is None else env
    boundary = Boundary(timeout_from_env(env))
    blocked, only = discovery.chosen(env)
    plugins = Declared(boundary, sorted(blocked))
    hooks = Hooks(plugins)  # told of each plugin left out while loading
    chosen: dict[str, Any] = {}
    for ep in discovery.entry_points(ENTRY_POINT_GROUP, env):
        if ep.name not in blocked and ep.name not in chosen and (only is None or ep.name in only):
            chosen[ep.name] = ep
    for ep in chosen.values():  # every plugin's hooks are known before any implementation is checked
        plugins.declare_specs(ep.name, boundary.call(ep.name, "load", package_hookspecs, ep.value, disable=True, prefix="import failed: "))
    for ep in chosen.values():
        if plugins.add_entry_point(ep, declared=declared):
            hooks.loaded.append(ep.name)
            if ep.dist is not None:  # its version is read from its metadata when a report shows it
                hooks.dists[ep.name] = ep.dist
    plugins.add_object(CORE_PLUGIN, importlib.import_module(CORE_PLUGIN))
    for item in extra_plugins:
        name, plugin = item if isinstance(item, tuple) else (plugins.unique_name(item), item)
        if plugins.add_object(name, plugin):
            hooks.loaded.append(name)
    return hooks


class Hooks:
    """Typed facade: one method per hook, calling the guarded implementations of the ``declared`` plugins as pluggy would.
    Registration hooks are collected once; a plugin with a refused record is left out whole. What loading found:
    ``loaded`` (names, in load order), ``blocked`` (turned off), ``failed`` (``{plugin: reason}``, also those left out
    later), ``dists`` (each entry-point plugin's distribution, or the cache's ``version`` of it)."""

    def __init__(self, declared: Declared) -> None:
        self._declared = declared
        self.loaded: list[str] = []
        self.blocked: list[str] = list(declared.blocked)
        self.failed: dict[str, str] = {}
        self.dists: dict[str, Any] = {}
        self.report = self  # the loading report: these hooks themselves
        #: the App these hooks serve; set by ``App.__init__`` and passed to hooks taking ``app``
        self.app: App | None = None
        self.boundary: Boundary = declared.boundary
        self.boundary.on_disable = self._disable
        self._records: dict[str, dict[str, tuple[str, Any]]] = {}
        self._owners: dict[tuple[str, str], str] = {}  # (kind, record name) -> plugin, kept when it is left out
        #: told ``hook <name>(<arguments>)`` of each hook call (``AGENT_LINK_DEBUG``)
        self.trace: Callable[[str], None] | None = None

    def installed(self, env: Mapping[str, str] | None = None) -> dict[str, str | None]:
        """``{name: version or None (given in code)}`` of every plugin installed, loaded or not (``env``: for discovery)."""
        from agent_link_core import __version__

        return {**dict.fromkeys((*self.loaded, *self.failed)), CORE_PLUGIN: __version__,
                **{ep.name: ep.dist and str(ep.dist.version) for ep in discovery.entry_points(ENTRY_POINT_GROUP, env)}}

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape of ``agent-link plugins --json`` and health's ``plugins``."""
        return {"loaded": list(self.loaded), "blocked": list(self.blocked), "failed": dict(self.failed),
                "versions": {name: dist.version for name, dist in self.dists.items()}, "problems": self.boundary.report()}

    def only(self, names: set[str]) -> None:
        """Call only the plugins ``names`` from now on (the others are dropped unreported)."""
        self._declared.keep(names)

    def load_all(self) -> None:
        """Import and register every plugin now: what a report of every plugin's state needs."""
        for entry in list(self._declared.entries):
            self._declared.load(entry)  # a failure is reported and leaves the plugin out

    def _disable(self, plugin: str, reason: str) -> None:  # its records and harnesses: the guard skips its calls
        self.failed[plugin] = reason[:300]
        if plugin in self.loaded:
            self.loaded.remove(plugin)
        for kind, records in self._records.items():
            for name in [n for n, (owner, _) in records.items() if owner == plugin]:
                del records[name]
                if kind == "harness" and self.app is not None:
                    self.app.harnesses.pop(name, None)

    def call(self, hook_name: str, **kwargs: Any) -> Any:
        """Call hook ``hook_name`` (``agent_link_*``) with ``kwargs`` and ``app`` as pluggy would (docs/plugins.md,
        section 3): a ``firstresult`` hook's first non-None answer (or None), else the list of answers.
        :raises AgentLinkError: the refusal of a hook that may refuse (hookspecs)."""
        return self._run(hook_name, **kwargs)[0]

    async def acall(self, hook_name: str, **kwargs: Any) -> Any:
        """:meth:`call`, its awaitable answer awaited (:func:`_settled`)."""
        return await _settled(self.call(hook_name, **kwargs))

    def _run(self, hook_name: str, **kwargs: Any) -> tuple[Any, CallState]:  # call's answer, and what the call learnt
        if self.trace is not None:
            self.trace(f"hook {hook_name}({', '.join(sorted(kwargs))})")
        kwargs["app"] = self.app
        impls = self._declared.impls(hook_name)
        with CallState() as call:
            first = (self._declared.spec(hook_name) or (0, False))[1]
            results = []
            for impl in impls:
                answer = impl.function(*[kwargs[name] for name in impl.argnames])
                if answer is not None:
                    if first:
                        return answer, call
                    results.append(answer)
            return (None if first else results), call

    def collect(self, kind: str, hook_name: str, check: Callable[[Any], None]) -> dict[str, Any]:
        """Run ``register``-style hook ``hook_name`` once (also a plugin's hook with records of its own: panels, importers).

        :param kind: what the records are, in reports and :meth:`owner` (``legacy importer``).
        :param check: raises :class:`~agent_link_core.boundary.Refused` for a record it refuses; the plugin that
            registered it is then left out and reported.
        :returns: ``{name attribute: record}`` of the accepted records (two of one name: the later plugin is left out);
            the same answer for every later call with this ``kind``.
        """
        if kind not in self._records:
            offered: list[tuple[str, Any]] = []

            def register(record: Any) -> None:
                plugin = current_plugin() or "?"
                if plugin in self.boundary.disabled:
                    return
                try:
                    check(record)
                except Refused as exc:
                    self.boundary.fault(plugin, hook_name, str(exc), fix=exc.fix, disable=True)
                    raise
                offered.append((plugin, record))

            self.call(hook_name, register=register)
            # Name clashes: the core wins, then a plugin's record named after itself, then the
            # earlier registered plugin (one installed later cannot take a name over).
            rank = {entry.name: i for i, entry in enumerate(self._declared.entries)}
            offered.sort(key=lambda pr: (pr[0] != CORE_PLUGIN, getattr(pr[1], "name", None) != pr[0],
                                         rank.get(pr[0], len(rank))))
            records: dict[str, tuple[str, Any]] = {}
            for plugin, record in offered:
                if plugin in self.boundary.disabled:
                    continue
                try:
                    if record.name in records:
                        first = records[record.name][0]
                        who = "it already registered" if first == plugin else f"plugin {first!r} already registered"
                        raise Refused(f"registered {kind} {record.name!r}, which {who}",
                                      "Give it another name, or disable one of the two plugins.")
                    for other_plugin, other in records.values() if kind == "setting" else ():  # names and aliases are unique
                        if clash := {record.name, *record.aliases} & {other.name, *other.aliases}:
                            raise Refused(f"setting {record.name} reads {sorted(clash)[0]}, which {other_plugin!r} reads for {other.name}",
                                          "Use names of your own.")
                except Refused as exc:
                    self.boundary.fault(plugin, hook_name, str(exc), fix=exc.fix, disable=True)
                    continue
                records[record.name] = (plugin, record)
            self._records[kind] = {n: r for n, r in records.items() if r[0] not in self.boundary.disabled}
            self._owners.update({(kind, n): r[0] for n, r in records.items()})
        return {name: record for name, (_, record) in self._records[kind].items()}

    def owner(self, kind: str, name: str) -> str | None:
        """The plugin that registered record ``name`` of ``kind``, also after it was left out."""
        return self._owners.get((kind, name))

    def plugin_of_module(self, module: str) -> str | None:
        """The registered plugin whose top-level package holds dotted ``module``, or None."""
        package = module.partition(".")[0]
        return next((e.name for e in self._declared.entries if e.package == package), None)

    def hook_view(self) -> dict[str, dict[str, dict[str, Any] | None]]:
        """``{plugin: {hook: {calls, lastMs, maxMs} | None (not called here)}}``: every hook each
        registered plugin implements (each imported now), plus what else the boundary timed (load, harness methods, tools)."""
        self.load_all()
        view: dict[str, dict[str, dict[str, Any] | None]] = {
            entry.name: dict.fromkeys(entry.hooks or ()) for entry in self._declared.entries if entry.name not in self.boundary.disabled}
        for name, timed in self.boundary.timing_report().items():
            view.setdefault(name, {}).update(timed)
        return {name: dict(sorted(hooks.items())) for name, hooks in sorted(view.items())}

    def problems(self) -> list[dict[str, Any]]:
        """Every plugin failure recorded in this process: ``{plugin, hook, error, fix, disabled, count}``, oldest first."""
        return self.boundary.report()

    def harnesses(self) -> dict[str, Harness]:
        """All accepted harnesses by name (address scheme)."""
        from agent_link_core.harness_decl import check_harness

        return self.collect("harness", "agent_link_register_harnesses", check_harness)

    def tools(self) -> dict[str, ToolSpec]:
        """All accepted MCP tools by name (schemas checked)."""
        from agent_link_core.tools.registry import check_tool

        return self.collect("tool", "agent_link_register_tools", check_tool)

    def listed_tools(self, host: str | None) -> dict[str, ToolSpec]:
        """The registered tools (by name, in registration order) an MCP server lists: those every
        ``agent_link_listed_tools`` answer names, or all; ``host``: the server's ``AGENT_LINK_HOST``."""
        tools = dict(self.tools())  # the caller's own copy
        answers = self.call("agent_link_listed_tools", tools=dict(tools), host=(host or "").strip() or None)
        for names in answers or ():
            chosen = set(names)
            tools = {name: spec for name, spec in tools.items() if name in chosen}
        return tools

    def tool_owners(self) -> dict[str, str]:
        """``{tool name: the plugin that registered it}``."""
        return {name: self.owner("tool", name) or "?" for name in self.tools()}

    def settings(self) -> tuple[Setting, ...]:
        """Settings declared by plugins (a core name, or a name another plugin took, is refused)."""
        from agent_link_core.config import CORE_SETTINGS

        core = frozenset(n for s in CORE_SETTINGS for n in (s.name, *s.aliases))
        return tuple(self.collect("setting", "agent_link_register_settings", lambda r: check_setting(r, core)).values())

    def prompt_hooks(self) -> dict[str, tuple[PromptHook, str]]:
        """Prompt-hook adapters by harness name, each with the plugin that registered it (a refused
        record leaves its plugin out, as :meth:`collect` does)."""
        from agent_link_core.records import check_prompt_hook

        records = self.collect("prompt hook", "agent_link_register_prompt_hooks", check_prompt_hook)
        return {name: (rec, self.owner("prompt hook", name) or "?") for name, rec in records.items()}

    def register_commands(self, cli: click.Group) -> None:
        """Let every plugin add its click commands to ``cli`` (a plugin may not replace one)."""
        original = cli.add_command

        def add_command(cmd: click.Command, name: str | None = None) -> None:
            plugin = current_plugin()
            taken = name or cmd.name
            if plugin is not None and taken in cli.commands:
                self.boundary.fault(plugin, "agent_link_register_commands", f"adds command {taken!r}, which exists already",
                                    fix="Give the command another name.", disable=True)
                raise Refused(f"command {taken!r} exists already")
            if plugin is not None:
                cmd._agent_link_plugin = plugin  # type: ignore[attr-defined]
            original(cmd, name)

        cli.add_command = add_command  # type: ignore[method-assign]
        before = dict(cli.commands)
        try:
            self.call("agent_link_register_commands", cli=cli)
        finally:
            del cli.add_command
        for name in set(cli.commands) - set(before):  # commands of plugins left out while adding
            command = cli.commands[name]
            if getattr(command, "callback", None) is not None and getattr(command, "_agent_link_plugin", None) in self.boundary.disabled:
                del cli.commands[name]

    def migrations(self) -> list[Migration]:
        """Every accepted plugin's schema migrations, flattened (owners checked)."""
        batches = self.call("agent_link_schema")
        return [m for batch in batches if batch for m in batch if m.owner not in self.boundary.disabled]

    def before_send(self, message: OutgoingMessage, context: SendContext) -> list[dict[str, Any]]:
        """Run every ``before_send`` check; returns their warnings (a refusal raises AgentLinkError).
        A plugin that fails here adds a ``plugin_failed`` warning; the send goes on without it."""
        results, call = self._run("agent_link_before_send", message=message, context=context)
        warnings = [w for batch in results if batch for w in batch]
        for plugin in sorted(call.faulted):
            warnings.append({"code": "plugin_failed",
                             "message": f"The {plugin} plugin failed while checking this message and was skipped.",
                             "details": {"plugin": plugin, "hook": "agent_link_before_send"}})
        return warnings

    def before_store(self, message: OutgoingMessage, context: SendContext, conn: sqlite3.Connection) -> str | None:
        """The first ``before_store`` answer for a new message: the id of the stored message it
        retries, or None (a refusal raises AgentLinkError). An id no message has counts as None."""
        answer = self.call("agent_link_before_store", message=message, context=context, conn=conn)
        return answer if answer is not None and conn.execute("SELECT 1 FROM messages WHERE id = ?", (answer,)).fetchone() else None

    def record_event(self, event: Event) -> None:
        """Let observers write their records in the transaction of the change ``event``
        describes (one is opened when none is). A failing observer is reported and its writes
        undone; the change itself still commits."""
        impls = [impl for impl in self._declared.impls("agent_link_record_event") if impl.plugin_name not in self.boundary.disabled]
        if not impls:
            return
        store = self.app.store
        if not store.conn.in_transaction:
            with store.write():
                return self.record_event(event)
        conn = store.conn
        # named as store.write() names its savepoints, so a nested write tells them apart
        store._savepoints += 1
        mark = f"agent_link_{store._savepoints}"
        changes = -1  # a new savepoint only after an observer changed rows: most write nothing
        try:
            for impl in impls:
                plugin = impl.plugin_name
                if conn.total_changes != changes:
                    conn.execute(f"SAVEPOINT {mark}")
                    changes = conn.total_changes
                offered = {"event": event, "conn": conn, "app": self.app}
                with CallState() as call:  # guarded: a failure is recorded, never raised
                    impl.function(*(offered[name] for name in impl.argnames))
                if plugin not in call.faulted:
                    continue
                try:  # an audit record must never undo or fail the change it records: only its own writes go
                    conn.execute(f"ROLLBACK TO {mark}")  # the restore point stays, for the next observer
                    changes = conn.total_changes
                except Exception as exc:  # an observer ended the savepoint: its writes stay, the change too
                    self.boundary.fault(plugin, "agent_link_record_event", f"its writes could not be undone: {exc}"[:300],
                                        fix="An observer may not end the transaction or its savepoints.")
                    changes = -1
        finally:
            store._savepoints -= 1

    def session_roles(self, addresses: list[str]) -> dict[str, list[str]]:
        """``{address: sorted role names}`` from every plugin that keeps roles."""
        merged: dict[str, set[str]] = {}
        for answer in self.call("agent_link_session_roles", addresses=list(addresses)) or []:
            if isinstance(answer, dict):
                for address, names in answer.items():
                    merged.setdefault(address, set()).update(names)
        return {address: sorted(names) for address, names in merged.items()}

    def present_sessions(self, harness: str) -> list[Session]:
        """Every plugin's sessions of addresses no harness lists (of ``harness``, or ``all``), joined."""
        return [s for batch in self.call("agent_link_present_sessions", harness=harness) or [] for s in batch]

    def held_messages(self, address: str, rows: list[Any] | None = None) -> set[str]:
        """Ids of ``address``'s mail (of ``rows``, or its undelivered mail) a running wait returns (``agent_link_held_messages``)."""
        return {i for ids in self.call("agent_link_held_messages", address=address, rows=rows) or [] for i in ids}

    def fit_read(self, caller: Caller, read: ReadDraft) -> tuple[int | None, list[dict[str, Any]]]:
        """How much of ``read`` the caller's host shows in full (``agent_link_fit_read``), and the read's warnings. None:
        everything, as no plugin answered, or one failed or answered outside ``read.start..read.stop`` (reported, and
        said by a ``plugin_failed`` warning)."""
        answer, call = self._run("agent_link_fit_read", caller=caller, read=read)
        if answer is not None and not (type(answer) is int and read.start <= answer <= read.stop):
            call.faulted.add(plugin := call.answers[-1][0])
            self.boundary.fault(plugin, "agent_link_fit_read", f"answered {answer if type(answer) is int else type(answer).__name__}; "
                                f"expected None or a whole number from {read.start} to {read.stop}")
            answer = None
        return answer, [{"code": "plugin_failed", "details": {"plugin": plugin, "hook": "agent_link_fit_read"},
                         "message": f"The {plugin} plugin failed to fit this read to what your host shows; it is returned whole."}
                        for plugin in sorted(call.faulted)]

    def push_notice(self, message: dict[str, Any], size: int, limit: int) -> str | None:
        """What is pushed instead of ``message``'s envelope of ``size`` UTF-8 bytes, over the ``limit`` the recipient's
        host shows in one push (``agent_link_push_notice``), or None: the envelope, as no plugin answered, or one failed
        or answered other than a text of at most ``limit`` bytes (reported)."""
        answer, call = self._run("agent_link_push_notice", message=message, size=size)
        if answer is None or isinstance(answer, str) and len(answer.encode("utf-8", "replace")) <= limit:
            return answer
        what = f"{len(answer.encode('utf-8', 'replace'))} bytes of text" if isinstance(answer, str) else f"a {type(answer).__name__}"
        self.boundary.fault(call.answers[-1][0], "agent_link_push_notice", f"answered {what}; expected None or a text of at most {limit} bytes")
        return None

    def suggest_addresses(self, query: str) -> list[str]:
        """The first plugin's addresses closest to ``query`` (at most three), or none."""
        return list(self.call("agent_link_suggest_addresses", query=query) or [])[:3]

    def server_tasks(self) -> list[tuple[str, Any]]:
        """``[(plugin name, coroutine function)]`` an MCP server runs in the background."""
        _, call = self._run("agent_link_server_tasks")
        return [(plugin, task) for plugin, answer in reversed(call.answers) for task in answer]

    def mcp_connection(self, write: Any) -> tuple[str, Any] | None:
        """``(plugin, its answer)`` of the plugin that watches an MCP connection (``agent_link_mcp_connection``), or None."""
        answer, call = self._run("agent_link_mcp_connection", write=write)
        return None if answer is None else (call.answers[-1][0], answer)

    def health_sections(self) -> dict[str, Any]:
        """Each plugin's health section; a failing one reports its error under the plugin's name."""
        results, call = self._run("agent_link_health")
        sections: dict[str, Any] = dict(reversed(results))  # pluggy answers last-registered first
        for plugin in sorted(call.faulted):
            problem = self.boundary.problem_of(plugin, "agent_link_health")
            sections[plugin] = {"error": problem.error, "fix": problem.fix} if problem else {"error": "failed", "fix": ""}
        return sections


async def _settled(answer: Any) -> Any:
    """A hook's ``answer``, awaited when awaitable: on the running loop, else on one of its own in a worker thread."""
    if not _awaitable(answer):
        return answer
    asyncio = sys.modules.get("asyncio")  # not imported: no loop runs
    try:
        if asyncio is not None and asyncio.get_running_loop():
            return await answer
    except RuntimeError:  # no running loop
        pass
    return run_blocking(lambda: answer)


def load_plugins(env: Mapping[str, str] | None = None, extra_plugins: tuple[Any, ...] = (), *,
                 declared: bool = False) -> Hooks:
    """The plugins of ``env`` (default: the process's, the settings file's values filled in), as
    :func:`plugins_of` takes them; ``declared`` is not taken with ``extra_plugins``.
    :raises AgentLinkError: ``invalid_arguments`` for a settings file that cannot be read."""
    from agent_link_core.settings_file import with_settings

    env = with_settings(dict(os.environ if env is None else env))
    return plugins_of(env, extra_plugins, declared=declared and not extra_plugins)
