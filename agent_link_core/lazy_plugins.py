"""The plugins of every process, the one way hooks are called: :class:`Declared` (docs/plugins.md, "Which hooks the
entry module implements" and "Settings, migrations and harnesses as data")."""

from __future__ import annotations

import functools
import importlib

from agent_link_core import hookspecs, lazy
from agent_link_core.boundary import CORE_PLUGIN, Boundary, _guarded, check_migrations
from agent_link_core.lazy import Struct, field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable


#: the hooks a package may answer with data
SETTINGS_HOOK, SCHEMA_HOOK, HARNESS_HOOK = "agent_link_register_settings", "agent_link_schema", "agent_link_register_harnesses"
DATA_HOOKS = {SETTINGS_HOOK: lazy.SETTINGS_ATTR, SCHEMA_HOOK: lazy.SCHEMA_ATTR,
              HARNESS_HOOK: lazy.HARNESSES_ATTR}
REGISTRATION_FAILED = "registration failed (check each hook's name and arguments against agent_link_core/hookspecs.py): "


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
    """One plugin of :class:`Declared`: ``load`` (``() -> module``, None when ``module`` is given), its top-level
    ``package``, the ``hooks`` it implements (as declared, then as found once imported; None: not known yet), ``impls``
    (``{hook: (function, options)}`` once imported), ``records`` (``{hook: declared records}`` answering it unimported)."""

    name: str
    load: Callable[[], Any] | None
    package: str
    hooks: frozenset[str] | None = None
    module: Any = None
    impls: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = field(default_factory=dict)
    records: dict[str, Any] = field(default_factory=dict)


class Declared:
    """The plugins of a process (see the module doc), called through ``boundary``; ``blocked``:
    names turned off (``AGENT_LINK_DISABLE_PLUGINS``)."""

    def __init__(self, boundary: Boundary, blocked: list[str]) -> None:
        self.boundary, self.blocked = boundary, blocked
        self.entries: list[Entry] = []
        self._cache: dict[str, list[Impl]] = {}
        self.specs = dict(CORE_SPECS)
        #: ``{hook: (plugin, its hookspecs module)}`` of the hooks plugins specify (in :attr:`specs` once imported)
        self.spec_of: dict[str, tuple[str, str]] = {}

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

    def add_entry_point(self, ep: Any, *, declared: bool = True) -> bool:
        """Take entry point ``ep``'s plugin by the hooks its package declares, or imported now (not
        ``declared``, or it declares none); False when it is left out."""
        module, colon, _ = ep.value.partition(":")
        module = module.strip()
        hooks, records = (None, {}) if colon or not declared else self.boundary.call(
            ep.name, "load", package_declarations, module, default=(None, {}), disable=True, prefix="import failed: ")
        entry = Entry(ep.name, ep.load, module.partition(".")[0], hooks, records=records if hooks is not None else {})
        if ep.name in self.boundary.disabled or (hooks is None and not self.load(entry)):
            return False
        self.entries.append(entry)
        return True

    def add_object(self, name: str, plugin: Any) -> bool:
        """Take ``plugin`` (a module or object given in code; the core's own, never blocked) as ``name``; False when it
        is left out (a name or a plugin taken already: reported, and the name left out)."""
        if (name in self.blocked and name != CORE_PLUGIN) or name in self.boundary.disabled:
            return False
        if any(e.name == name or e.module is plugin for e in self.entries):
            self.boundary.fault(name, "load", f"{REGISTRATION_FAILED}a plugin of this name, or this plugin, is registered already",
                                disable=True)
            return False
        self.declare_specs(name, getattr(plugin, lazy.HOOKSPECS_ATTR, None))
        entry = Entry(name, None, (getattr(plugin, "__name__", None) or "").partition(".")[0])
        if name in self.boundary.disabled or not self._checked(entry, plugin):
            return False
        self.entries.append(entry)
        return True

    def unique_name(self, plugin: Any) -> str:
        """A readable name no plugin has for ``plugin``, given without one."""
        base = getattr(plugin, "__name__", None) or type(plugin).__name__
        taken = {*self.blocked, *(e.name for e in self.entries)}
        name, n = base, 2
        while name in taken:
            name, n = f"{base}#{n}", n + 1
        return name

    def keep(self, names: set[str]) -> None:
        """Drop every plugin but ``names``."""
        self.entries = [e for e in self.entries if e.name in names]
        self._cache.clear()

    def load(self, entry: Entry) -> bool:
        """Import ``entry``'s module (guarded) and check its implementations; False when it is left out."""
        if entry.module is not None or entry.name in self.boundary.disabled:
            return entry.name not in self.boundary.disabled
        assert entry.load is not None
        module = self.boundary.call(entry.name, "load", entry.load, default=None, disable=True, prefix="import failed: ")
        return module is not None and self._checked(entry, module)

    def _checked(self, entry: Entry, module: Any) -> bool:
        entry.module = module
        found = self.boundary.call(entry.name, "load", lazy.module_hooks, module, disable=True, prefix="registration failed: ")
        return found is not None and self.check(entry, found)

    def check(self, entry: Entry, found: dict[str, tuple[Callable[..., Any], dict[str, Any]]]) -> bool:
        """Refuse what pluggy's registration refuses (a misspelt hook, an argument the hook does not
        offer) and a hook wrapper (not supported); report a declaration that differs from the code
        (the code wins)."""
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


def package_hookspecs(target: str) -> Any:
    """The :data:`~agent_link_core.lazy.HOOKSPECS_ATTR` table of entry point ``target``'s top-level package (imported now)."""
    return getattr(importlib.import_module(target.partition(".")[0].partition(":")[0].strip()), lazy.HOOKSPECS_ATTR, None)


def package_declarations(module: str) -> tuple[frozenset[str] | None, dict[str, Any]]:
    """What entry module ``module``'s top-level package (imported now) declares for it in its tables
    (``{module: ...}``): its hooks (None: nothing declared, or not names) and ``{hook: records}`` of
    what it declares as data (each record's shape is checked by the hook call that reads it)."""
    package = importlib.import_module(module.partition(".")[0])
    declared = {hook: table.get(module) for hook, attr in {"": lazy.DECLARED_ATTR, **DATA_HOOKS}.items()
                if isinstance(table := getattr(package, attr, None), dict) and table.get(module) is not None}
    hooks: Any = declared.pop("", None)
    named = isinstance(hooks, (tuple, list, frozenset, set)) and all(isinstance(h, str) for h in hooks)
    return (frozenset(hooks) if named else None), declared


def declared_impl(plugins: Declared, entry: Entry, hook: str) -> Callable[..., Any]:
    """The implementation of ``hook`` (settings, harnesses or schema) that ``entry``'s declared
    records give without importing it (a key a record type does not take raises ``TypeError``)."""
    records = entry.records[hook]
    if hook != SCHEMA_HOOK:
        def register_records(register: Callable[[Any], None]) -> None:
            for record in records:
                register(_made(hook, dict(record)))
        return register_records

    def schema() -> list[DeclaredMigration]:
        real = functools.cache(lambda: plugins.migrations_of(entry) or {})  # the code's, imported when first asked
        return [DeclaredMigration(owner, int(version), lambda key: getattr(real().get(key), "sql", None))
                for owner, versions in records.items() for version in versions]
    return schema


def _made(hook: str, fields: dict[str, Any]) -> Any:
    """The ``Setting`` or ``HarnessDeclaration`` a declared record stands for."""
    if hook == SETTINGS_HOOK:
        from agent_link_core.config import Setting

        return Setting(**fields)
    from agent_link_core.harness_decl import HarnessDeclaration, SenderOption

    return HarnessDeclaration(**{**fields, "sender_options": tuple(SenderOption(**o) for o in fields.get("sender_options", ()))})


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
