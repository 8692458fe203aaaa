"""The plugins of a process and :class:`Hooks`, the one way hooks are called (docs/plugins.md, sections 1-3): the entry
points of the ``agent_link`` group, then the core's default plugins, each implementation called through
:mod:`agent_link_core.boundary` in pluggy's order (no pluggy import). A plugin is taken by what its package declares
(docs/plugins.md, "Which hooks the entry module implements" and "Settings, migrations and harnesses as data") and
imported when a call needs it."""

from __future__ import annotations

import functools
import importlib
import os
import sys
from collections.abc import Mapping

from agent_link_core import discovery, hookspecs, lazy
from agent_link_core.lazy import Struct, field
from agent_link_core.config import Setting, check_setting
from agent_link_core.boundary import (_PLUGIN, CORE_PLUGIN, Boundary, CallState, Refused, _awaitable, _guarded, check_migrations,
                                     run_blocking, timeout_from_env)

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Callable
    import click
    import sqlite3

    from agent_link_core.app import App
    from agent_link_core.harness import Harness
    from agent_link_core.model import Caller, Session
    from agent_link_core.reading import ReadDraft
    from agent_link_core.records import Event, OutgoingMessage, PromptHook, SendContext
    from agent_link_core.store import Migration
    from agent_link_core.tools.registry import ToolSpec

ENTRY_POINT_GROUP = "agent_link"
#: the hooks a package may answer with data
SETTINGS_HOOK, SCHEMA_HOOK, HARNESS_HOOK = "agent_link_register_settings", "agent_link_schema", "agent_link_register_harnesses"
DATA_HOOKS = {SETTINGS_HOOK: lazy.SETTINGS_ATTR, SCHEMA_HOOK: lazy.SCHEMA_ATTR,
              HARNESS_HOOK: lazy.HARNESSES_ATTR}
REGISTRATION_FAILED = "registration failed (check each hook's name and arguments against agent_link_core/hookspecs.py): "


def plugins_of(env: Mapping[str, str] | None = None, extra_plugins: tuple[Any, ...] = (), *,
               declared: bool = False) -> Hooks:
    """The plugins of ``env`` as given (default: the process's; no settings file read) in load order, then
    ``extra_plugins`` (objects or ``(name, plugin)`` pairs); never raises for a plugin's fault (it is in the report).

    :param env: where ``AGENT_LINK_DISABLE_PLUGINS``, ``..._LOAD_PLUGINS``, ``..._HOOK_TIMEOUT_MS`` are read.
    :param declared: take each entry point's plugin by the hooks its package declares, imported when a call needs one;
        else every plugin is imported now.
    """
    env = os.environ if env is None else env
    blocked, only = discovery.chosen(env)
    hooks = Hooks(Boundary(timeout_from_env(env)), sorted(blocked))
    chosen: dict[str, Any] = {}
    for ep in discovery.entry_points(ENTRY_POINT_GROUP, env):
        if ep.name not in blocked and ep.name not in chosen and (only is None or ep.name in only):
            chosen[ep.name] = ep
    tables: dict[str, Any] = {}  # every plugin's hooks are known before any implementation is checked
    for name, ep in chosen.items():
        tables[name] = hooks.boundary.call(name, "load", package_tables, ep.value, default=(None, None, {}), disable=True,
                                           prefix="import failed: ")
        hooks.declare_specs(name, tables[name][0])
    for name, ep in chosen.items():
        hooks.add_entry_point(ep, *(tables[name][1:] if declared and ":" not in ep.value else (None, {})))
    hooks.add_object(CORE_PLUGIN, importlib.import_module(CORE_PLUGIN))
    for item in extra_plugins:
        hooks.add_object(*(item if isinstance(item, tuple) else (hooks.unique_name(item), item)))
    return hooks


def module_specs(module: Any) -> dict[str, tuple[frozenset[str], bool, dict[str, Any]]]:
    """``{hook: (the arguments it offers, firstresult, how its calls are guarded)}`` of the hookspecs in ``module``."""
    return {name: (frozenset(lazy.argnames(value) or ()), bool(opts.get("firstresult")),
                   getattr(value, lazy.GUARD_ATTR, {"check": None, "refuses": False, "awaitable": False, "bound_s": None}))
            for name, value in vars(module).items() if isinstance(opts := getattr(value, lazy.SPEC_ATTR, None), dict)}


CORE_SPECS = module_specs(hookspecs)


class Impl(Struct):
    """One hook implementation of a plugin: its guarded ``function``, called with the ``argnames`` it takes."""

    plugin_name: str
    function: Callable[..., Any]
    argnames: tuple[str, ...]
    opts: dict[str, Any]


class Entry(Struct):
    """One plugin: ``load`` (``() -> module``, None when ``module`` is given), its top-level ``package``, the ``hooks`` it
    implements (as declared, then as found once imported; None: not known yet), ``impls`` (``{hook: (function,
    options)}`` once imported), ``records`` (``{hook: declared records}`` answering it unimported)."""

    name: str
    load: Callable[[], Any] | None
    package: str
    hooks: frozenset[str] | None = None
    module: Any = None
    impls: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = field(default_factory=dict)
    records: dict[str, Any] = field(default_factory=dict)


class Hooks:
    """The plugins of a process (see the module doc), called through ``boundary``, with one typed method per hook.
    Registration hooks are collected once; a plugin with a refused record is left out whole. What loading found:
    ``loaded`` (names, in load order), ``blocked`` (turned off: ``AGENT_LINK_DISABLE_PLUGINS``), ``failed`` (``{plugin:
    reason}``, also those left out later), ``dists`` (each entry-point plugin's distribution, or the cache's ``version``)."""

    def __init__(self, boundary: Boundary, blocked: list[str]) -> None:
        self.boundary, self.blocked = boundary, blocked
        self.loaded: list[str] = []
        self.failed: dict[str, str] = {}
        self.dists: dict[str, Any] = {}
        self.entries: list[Entry] = []
        self._cache: dict[str, list[Impl]] = {}
        self.specs = dict(CORE_SPECS)
        #: ``{hook: (plugin, its hookspecs module)}`` of the hooks plugins specify (in :attr:`specs` once imported)
        self.spec_of: dict[str, tuple[str, str]] = {}
        #: the App these hooks serve; set by ``App.__init__`` and passed to hooks taking ``app``
        self.app: App | None = None
        self.boundary.on_disable = self._disable
        self._records: dict[str, dict[str, tuple[str, Any]]] = {}
        self._owners: dict[tuple[str, str], str] = {}  # (kind, record name) -> plugin, kept when it is left out
        #: told ``hook <name>(<arguments>)`` of each hook call (``AGENT_LINK_DEBUG``)
        self.trace: Callable[[str], None] | None = None

    def declare_specs(self, plugin: str, table: Any) -> None:
        """Take the hooks ``plugin`` specifies (:data:`~agent_link_core.lazy.HOOKSPECS_ATTR`: ``{hookspecs module: (hook
        name, ...)}``); a module is imported when one of its hooks is first called."""
        declared = {h: (plugin, m) for m, hooks in table.items() for h in hooks} if isinstance(table, dict) else {}
        taken = sorted(h for h in declared if h in CORE_SPECS or h in self.spec_of)
        if table is not None and (taken or not declared or not all(isinstance(h, str) and isinstance(m, str) for h, (_, m) in declared.items())):
            error = f"specifies {taken[0]}, which the core or another plugin specifies" if taken else f"{lazy.HOOKSPECS_ATTR} is not {{module: (hook name, ...)}}"
            self.boundary.fault(plugin, "load", error, fix="Give each hook a name of its own.", disable=True)
        elif table is not None:
            self.spec_of.update(declared)

    def spec(self, hook: str) -> tuple[frozenset[str], bool, dict[str, Any]] | None:
        """``hook``'s :func:`module_specs` entry (a plugin's hookspecs module imported now, guarded), or None: nobody specifies it."""
        if hook not in self.specs and hook in self.spec_of:
            plugin, module = self.spec_of[hook]
            mine = {h for h, owner in self.spec_of.items() if owner == (plugin, module)}
            found = self.boundary.call(plugin, "load", lambda: module_specs(importlib.import_module(module)), default={},
                                       disable=True, prefix="hookspecs import failed: ")
            if set(found) != mine and plugin not in self.boundary.disabled:
                self.boundary.fault(plugin, "load", f"declares hookspecs {sorted(mine)} in {module} but it specifies {sorted(found)}",
                                    fix=f"List exactly the module's hooks in {lazy.HOOKSPECS_ATTR}.", disable=True)
            self.specs.update({h: found[h] for h in mine if plugin not in self.boundary.disabled})
        return self.specs.get(hook)

    def add_entry_point(self, ep: Any, hooks: frozenset[str] | None, records: dict[str, Any]) -> None:
        """Take entry point ``ep``'s plugin by the ``hooks`` and ``records`` its package declares (:func:`package_tables`),
        or imported now (``hooks`` None); a plugin left out is reported."""
        module = ep.value.partition(":")[0].strip()
        entry = Entry(ep.name, ep.load, module.partition(".")[0], hooks, records=records if hooks is not None else {})
        if ep.name not in self.boundary.disabled and (hooks is not None or self.load(entry)):
            self.entries.append(entry)
            self.loaded.append(ep.name)
            if ep.dist is not None:  # its version is read from its metadata when a report shows it
                self.dists[ep.name] = ep.dist

    def add_object(self, name: str, plugin: Any) -> None:
        """Take ``plugin`` (a module or object given in code; the core's own, never blocked) as ``name``; a name or a
        plugin taken already is reported, and the name left out."""
        if (name in self.blocked and name != CORE_PLUGIN) or name in self.boundary.disabled:
            return
        if any(e.name == name or e.module is plugin for e in self.entries):
            self.boundary.fault(name, "load", f"{REGISTRATION_FAILED}a plugin of this name, or this plugin, is registered already",
                                disable=True)
            return
        self.declare_specs(name, getattr(plugin, lazy.HOOKSPECS_ATTR, None))
        entry = Entry(name, None, (getattr(plugin, "__name__", None) or "").partition(".")[0])
        if name not in self.boundary.disabled and self._checked(entry, plugin):
            self.entries.append(entry)
            if name != CORE_PLUGIN:
                self.loaded.append(name)

    def unique_name(self, plugin: Any) -> str:
        """A readable name no plugin has for ``plugin``, given without one."""
        base = getattr(plugin, "__name__", None) or type(plugin).__name__
        taken = {*self.blocked, *(e.name for e in self.entries)}
        name, n = base, 2
        while name in taken:
            name, n = f"{base}#{n}", n + 1
        return name

    def only(self, names: set[str]) -> None:
        """Call only the plugins ``names`` from now on (the others are dropped unreported)."""
        self.entries = [e for e in self.entries if e.name in names]
        self._cache.clear()

    def load_all(self) -> None:
        """Import and register every plugin now: what a report of every plugin's state needs."""
        for entry in list(self.entries):
            self.load(entry)  # a failure is reported and leaves the plugin out

    def load(self, entry: Entry) -> bool:
        """Import ``entry``'s module (guarded) and check its implementations; False when it is left out."""
        if entry.module is not None or entry.name in self.boundary.disabled:
            return entry.name not in self.boundary.disabled
        assert entry.load is not None
        module = self.boundary.call(entry.name, "load", entry.load, default=None, disable=True, prefix="import failed: ")
        return module is not None and self._checked(entry, module)

    def _checked(self, entry: Entry, module: Any) -> bool:
        """Register ``module`` as ``entry``'s code, refusing what pluggy's registration refuses (a misspelt hook, an
        argument the hook does not offer) and a hook wrapper (not supported); a declaration that differs from the code is
        reported (the code wins). False when the plugin is left out."""
        entry.module = module
        found = self.boundary.call(entry.name, "load", lazy.module_hooks, module, disable=True, prefix="registration failed: ")
        if found is None:
            return False
        unknown = sorted(h for h, (_, opts) in found.items()
                         if h not in self.specs and h not in self.spec_of and not opts.get("optionalhook"))
        if unknown:
            self.boundary.fault(entry.name, "load", f"implements {', '.join(unknown)}, which is not an agent-link hook (misspelt?)",
                                fix="Use a hook name from agent_link_core/hookspecs.py or a plugin's hookspecs.", disable=True)
            return False
        impls: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {}
        for hook, (function, opts) in found.items():
            if opts.get("wrapper") or opts.get("hookwrapper"):
                self.boundary.fault(entry.name, "load", f"{hook} is a hook wrapper; wrappers are not supported",
                                    fix="Make it a plain implementation (tryfirst or trylast to order it).", disable=True)
                return False
            if hook in self.specs and self._misfit(entry.name, hook, function):
                return False
            impls[hook] = (function, opts)  # one of a plugin's hooks is checked when first called (its spec imported)
        if entry.hooks is not None and entry.hooks != frozenset(found):
            self.boundary.fault(entry.name, "load", f"declares hooks {sorted(entry.hooks)} but implements {sorted(found)}",
                                fix=f"List exactly its hook implementations in {entry.package}.{lazy.DECLARED_ATTR}.")
        entry.hooks, entry.impls = frozenset(found), impls
        self._cache.clear()  # what this plugin implements may differ from what it declared
        return True

    def _misfit(self, plugin: str, hook: str, function: Callable[..., Any]) -> bool:
        """Leave ``plugin`` out (reported) when ``function`` takes an argument ``hook`` does not offer."""
        names = lazy.argnames(function)
        extra = sorted(set(names) - self.specs[hook][0]) if names is not None else None
        if extra is None or extra:
            what = "is no function" if extra is None else f"takes {', '.join(extra)}, which the hook does not offer"
            self.boundary.fault(plugin, "load", f"{REGISTRATION_FAILED}{hook} {what}", disable=True)
        return extra != []

    def impls(self, hook: str) -> list[Impl]:
        """The guarded implementations of ``hook`` in pluggy's call order, importing the plugins
        that declare it."""
        if hook in self._cache:
            return self._cache[hook]
        spec = self.spec(hook)
        methods: list[Impl] = []
        for entry in list(self.entries):
            if entry.hooks is not None and hook not in entry.hooks:
                continue
            check = None
            opts: dict[str, Any] = {}
            if entry.module is None and hook in entry.records:  # answered by the declaration
                function = declared_impl(self, entry, hook)
                if hook == SCHEMA_HOOK:  # their SQL is read when applied
                    check = functools.partial(check_migrations, declared=True)
            elif (entry.module is None and not self.load(entry)) or hook not in entry.impls:
                continue
            else:
                function, opts = entry.impls[hook]
            if entry.name in self.boundary.disabled or spec is None or (hook not in CORE_SPECS and self._misfit(entry.name, hook, function)):
                continue
            _place(methods, Impl(entry.name, _guarded(self.boundary, function, entry.name, hook, spec[2], check),
                                 lazy.argnames(function) or (), opts))
        self._cache[hook] = methods[::-1]
        return self._cache[hook]

    def migrations_of(self, entry: Entry) -> dict[tuple[str, int], Any] | None:
        """``{(owner, version): Migration}`` that ``entry``'s ``agent_link_schema`` really returns
        (imported now); None when it cannot be had. A differing declaration is reported."""
        if not self.load(entry) or SCHEMA_HOOK not in entry.impls:
            if entry.name not in self.boundary.disabled:
                self.boundary.fault(entry.name, SCHEMA_HOOK, "declares migrations its entry module does not return",
                                    fix=f"Make {entry.package}.{lazy.SCHEMA_ATTR} match the code.", disable=True)
            return None
        found = self.boundary.call(entry.name, SCHEMA_HOOK, entry.impls[SCHEMA_HOOK][0], default=None)
        real = {(m.owner, m.version): m for m in found or ()}
        declared = {(owner, v) for owner, versions in entry.records.get(SCHEMA_HOOK, {}).items() for v in versions}
        if declared != set(real):
            self.boundary.fault(entry.name, SCHEMA_HOOK, f"declares migrations {sorted(declared)} but returns {sorted(real)}",
                                fix=f"List exactly its migrations in {entry.package}.{lazy.SCHEMA_ATTR}.")
        return real

    def installed(self, env: Mapping[str, str] | None = None) -> dict[str, str | None]:
        """``{name: version or None (given in code)}`` of every plugin installed, loaded or not (``env``: for discovery)."""
        from agent_link_core import __version__

        return {**dict.fromkeys((*self.loaded, *self.failed)), CORE_PLUGIN: __version__,
                **{ep.name: ep.dist and str(ep.dist.version) for ep in discovery.entry_points(ENTRY_POINT_GROUP, env)}}

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape of ``agent-link plugins --json`` and health's ``plugins``."""
        return {"loaded": list(self.loaded), "blocked": list(self.blocked), "failed": dict(self.failed),
                "versions": {name: dist.version for name, dist in self.dists.items()}, "problems": self.boundary.report()}

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
        impls = self.impls(hook_name)
        with CallState() as call:
            first = (self.spec(hook_name) or (0, False))[1]
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
                plugin = _PLUGIN.get() or "?"
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
            rank = {entry.name: i for i, entry in enumerate(self.entries)}
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
        return next((e.name for e in self.entries if e.package == package), None)

    def hook_view(self) -> dict[str, dict[str, dict[str, Any] | None]]:
        """``{plugin: {hook: {calls, lastMs, maxMs} | None (not called here)}}``: every hook each
        registered plugin implements (each imported now), plus what else the boundary timed (load, harness methods, tools)."""
        self.load_all()
        view: dict[str, dict[str, dict[str, Any] | None]] = {
            entry.name: dict.fromkeys(entry.hooks or ()) for entry in self.entries if entry.name not in self.boundary.disabled}
        for name, timed in self.boundary.timing_report().items():
            view.setdefault(name, {}).update(timed)
        return {name: dict(sorted(hooks.items())) for name, hooks in sorted(view.items())}

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
            plugin = _PLUGIN.get()  # the plugin whose hook is running
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
        impls = [impl for impl in self.impls("agent_link_record_event") if impl.plugin_name not in self.boundary.disabled]
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
        for answer in self.call("agent_link_session_roles", addresses=list(addresses)) or []:  # each checked: {str: [str]}
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
        if answer is None or type(answer) is str and len(answer.encode("utf-8", "replace")) <= limit:
            return answer
        what = f"{len(answer.encode('utf-8', 'replace'))} bytes of text" if type(answer) is str else f"a {type(answer).__name__}"
        self.boundary.fault(call.answers[-1][0], "agent_link_push_notice", f"answered {what}; expected None or a text of at most {limit} bytes")
        return None

    def suggest_addresses(self, query: str) -> list[str]:
        """The first plugin's addresses closest to ``query`` (at most three), or none."""
        return list(self.call("agent_link_suggest_addresses", query=query) or [])[:3]

    def host_arguments(self, address: str, tool: str = "message_agent") -> set[str]:
        """The arguments of core tool ``tool`` that the plugin which registered the harness of ``address`` (``scheme:id``)
        adds (``agent_link_extend_tools``): a host plugin refusing its own send options for another host's session
        (``agent_link_tool_send``) lets through those this session's host adds too."""
        owner = self.owner("harness", address.partition(":")[0])
        _, call = self._run("agent_link_extend_tools")
        return {name for plugin, answer in call.answers if plugin == owner for name in answer.get(tool, {}).get("input", {})}

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


def _place(methods: list[Impl], impl: Impl) -> None:
    """Insert ``impl`` where pluggy's ``HookCaller._add_hookimpl`` would."""
    if impl.opts.get("trylast"):
        methods.insert(0, impl)
    elif impl.opts.get("tryfirst"):
        methods.append(impl)
    else:
        i = len(methods) - 1
        while i >= 0 and methods[i].opts.get("tryfirst"):
            i -= 1
        methods.insert(i + 1, impl)


def package_tables(target: str) -> tuple[Any, frozenset[str] | None, dict[str, Any]]:
    """What entry point ``target``'s top-level package (imported now) declares in its tables (``{module: ...}``): the
    :data:`~agent_link_core.lazy.HOOKSPECS_ATTR` table, the hooks the entry module implements (None: nothing declared,
    or not names) and ``{hook: records}`` of what it declares as data (each record's shape is checked by the hook call
    that reads it)."""
    module = target.partition(":")[0].strip()
    package = importlib.import_module(module.partition(".")[0])
    declared = {hook: table.get(module) for hook, attr in {"": lazy.DECLARED_ATTR, **DATA_HOOKS}.items()
                if isinstance(table := getattr(package, attr, None), dict) and table.get(module) is not None}
    hooks: Any = declared.pop("", None)
    named = isinstance(hooks, (tuple, list, frozenset, set)) and all(isinstance(h, str) for h in hooks)
    return getattr(package, lazy.HOOKSPECS_ATTR, None), (frozenset(hooks) if named else None), declared


def declared_impl(plugins: Hooks, entry: Entry, hook: str) -> Callable[..., Any]:
    """The implementation of ``hook`` (settings, harnesses or schema) that ``entry``'s declared
    records give without importing it (a key a record type does not take raises ``TypeError``)."""
    records = entry.records[hook]
    if hook != SCHEMA_HOOK:
        def register_records(register: Callable[[Any], None]) -> None:
            for fields in map(dict, records):
                if hook == SETTINGS_HOOK:
                    register(Setting(**fields))
                    continue
                from agent_link_core.harness_decl import HarnessDeclaration, SenderOption

                register(HarnessDeclaration(**{**fields, "sender_options": tuple(SenderOption(**o) for o in fields.get("sender_options", ()))}))
        return register_records

    def schema() -> list[DeclaredMigration]:
        real = functools.cache(lambda: plugins.migrations_of(entry) or {})  # the code's, imported when first asked
        return [DeclaredMigration(owner, int(version), lambda key: getattr(real().get(key), "sql", None))
                for owner, versions in records.items() for version in versions]
    return schema


class DeclaredMigration(Struct, frozen=True):
    """A migration as a plugin declares it; its SQL is read from the plugin's code when
    :attr:`sql` is first asked (only for a database that lacks it) through ``sql_of``:
    ``((owner, version)) -> SQL``, or None when the plugin cannot give it (reported)."""

    owner: str
    version: int
    sql_of: Callable[[tuple[str, int]], str | None]

    @property
    def sql(self) -> str:
        """The migration's SQL. :raises MigrationUnavailable: the plugin cannot give it (reported)."""
        found = self.sql_of((self.owner, self.version))
        if found is None:
            raise MigrationUnavailable(f"{self.owner} migration {self.version} cannot be loaded")
        return found


class MigrationUnavailable(LookupError):
    """A declared migration whose plugin cannot give its SQL (the plugin is reported)."""
