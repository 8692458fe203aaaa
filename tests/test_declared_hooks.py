"""Declared hook tables (docs/plugins.md, "Declare now, import when used";
:mod:`agent_link_core.lazy`, :func:`agent_link_core.plugins.load_plugins` with ``declared=True``).

* Every installed plugin's ``AGENT_LINK_HOOKS`` names exactly the hooks registration finds
  in its entry module (as pluggy's would: tests/test_plugin_manager.py): a declaration cannot drift from the code.
* A call imports only the plugins declaring its hook, calls them in pluggy's order through
  the one guard (a fault, SystemExit included, harms only its plugin), and imports no pluggy.
* A declaration that differs from the code is reported when the module is imported.
* Every installed plugin's ``AGENT_LINK_SETTINGS`` / ``AGENT_LINK_SCHEMA`` give exactly the
  settings and migrations its entry module registers; they answer those hooks without
  importing it, and a migration's SQL is imported only for a database that lacks it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import itertools
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import pytest

from agent_link_core import discovery, lazy, plugins
from agent_link_testing.dists import install_dist

_serial = itertools.count()


@pytest.mark.installed_plugins
def test_every_installed_plugin_declares_exactly_the_hooks_it_implements() -> None:
    """The registration of each entry module is the truth the declaration must match."""
    view = plugins.plugins_of({k: v for k, v in os.environ.items() if k != discovery.LOAD_ONLY_ENV}).hook_view()
    checked = []
    for ep in importlib.metadata.entry_points(group=plugins.ENTRY_POINT_GROUP):
        module = ep.value.partition(":")[0].strip()
        declared = plugins.package_tables(module)[1]
        assert declared is not None, f"{module.partition('.')[0]} declares no AGENT_LINK_HOOKS for {module}"
        assert ep.name in view, ep.name
        real = set(view[ep.name]) - {"load"}  # the hooks it is registered for, beside its timed import
        assert declared == real, (ep.name, sorted(declared ^ real))
        checked.append(ep.name)
    assert {"codex", "claude", "receipts", "roles", "settings"} <= set(checked)


SETTING_FIELDS = ("name", "kind", "default", "aliases", "minimum", "maximum", "choices", "warning", "doc", "secret")


def setting_fields(setting: Any) -> tuple[Any, ...]:
    return tuple(getattr(setting, f) for f in SETTING_FIELDS)


def entry_modules() -> Iterator[tuple[Any, str, Any, dict[str, Any]]]:
    """``(entry point, entry module name, its top package, its hooks by name)`` of every installed plugin."""
    for ep in importlib.metadata.entry_points(group=plugins.ENTRY_POINT_GROUP):
        module = ep.value.partition(":")[0].strip()
        yield ep, module, importlib.import_module(module.partition(".")[0]), lazy.module_hooks(importlib.import_module(module))


@pytest.mark.installed_plugins
def test_every_installed_plugin_declares_exactly_the_settings_and_migrations_it_registers() -> None:
    """What each entry module's hooks really register (called as pluggy would) is the truth
    its package's AGENT_LINK_SETTINGS and AGENT_LINK_SCHEMA must match, field by field; a
    plugin implementing either hook must declare it (else every command imports it)."""
    from agent_link_core.config import Setting

    checked = []
    for ep, module, package, found in entry_modules():
        records = plugins.package_tables(module)[2]
        settings, schema = records.get(plugins.SETTINGS_HOOK), records.get(plugins.SCHEMA_HOOK)
        if "agent_link_register_settings" in found:
            real: list[Any] = []
            found["agent_link_register_settings"][0](real.append)
            assert settings is not None, f"{package.__name__} declares no AGENT_LINK_SETTINGS for {module}"
            declared = [setting_fields(Setting(**d)) for d in settings]
            assert declared == [setting_fields(s) for s in real], ep.name
            checked.append(ep.name)
        else:
            assert settings is None, f"{ep.name} declares settings it does not register"
        if "agent_link_schema" in found:
            assert schema is not None, f"{package.__name__} declares no AGENT_LINK_SCHEMA for {module}"
            migrations = found["agent_link_schema"][0]() or []
            assert sorted((o, v) for o, vs in schema.items() for v in vs) == sorted((m.owner, m.version) for m in migrations), ep.name
            checked.append(ep.name)
        else:
            assert schema is None, f"{ep.name} declares migrations it does not return"
    assert {"codex", "claude", "receipts", "roles", "leases", "filehost"} <= set(checked)


@pytest.mark.installed_plugins
def test_every_installed_plugin_declares_exactly_the_harnesses_it_registers() -> None:
    """What each entry module's ``agent_link_register_harnesses`` really registers is the
    truth its package's AGENT_LINK_HARNESSES must match; answered from the declaration (as a
    declared-hooks load does), the records are equal, and no plugin module is imported."""
    checked = []
    for ep, module, package, found in entry_modules():
        harnesses = plugins.package_tables(module)[2].get(plugins.HARNESS_HOOK)
        if "agent_link_register_harnesses" not in found:
            assert harnesses is None, f"{ep.name} declares harnesses it does not register"
            continue
        assert harnesses is not None, f"{package.__name__} declares no AGENT_LINK_HARNESSES for {module}"
        real: list[Any] = []
        found["agent_link_register_harnesses"][0](real.append)
        entry = plugins.Entry(ep.name, None, package.__name__)
        entry.records = {plugins.HARNESS_HOOK: harnesses}
        declared: list[Any] = []
        plugins.declared_impl(None, entry, plugins.HARNESS_HOOK)(declared.append)  # type: ignore[arg-type]
        assert declared == real, ep.name
        checked.append(ep.name)
    assert {"codex", "claude", "opencode", "machines", "filehost"} <= set(checked)


def make_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, modules: dict[str, tuple[str, str | None]],
              extra: dict[str, str] | None = None) -> dict[str, str]:
    """Install one plugin per ``{name: (plugin.py source, declaration or None)}`` under
    unique package names, ``extra[name]`` appended to its ``__init__.py`` (``{module}``: the
    entry module's name); returns ``{name: package}``."""
    site = tmp_path / "site"
    packages = {}
    for name, (source, declared) in modules.items():
        package = f"agent_link_decl{next(_serial)}_{name}"
        init = f"AGENT_LINK_HOOKS = {{'{package}.plugin': {declared}}}\n" if declared is not None else ""
        init += (extra or {}).get(name, "").replace("{module}", f"{package}.plugin")
        install_dist(site, package, {"__init__.py": init, "plugin.py": source}, entry_name=name,
                     entry_module=f"{package}.plugin")
        packages[name] = package
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    return packages


def env_for(*names: str) -> dict[str, str]:
    return {**os.environ, discovery.LOAD_ONLY_ENV: ",".join(names)}


OBSERVER = '''
from agent_link_core import hookimpl

SEEN = []


@hookimpl{options}
def agent_link_sessions_listed(sessions):
    SEEN.append("{name}")
    {body}
'''


def observer(name: str, body: str = "return None", options: str = "") -> str:
    return OBSERVER.format(name=name, body=body, options=options)


HEALTH_ONLY = '''
from agent_link_core import hookimpl


@hookimpl
def agent_link_health(app):
    return "quiet", {}
'''


def test_a_call_imports_only_the_plugins_that_declare_its_hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkgs = make_site(tmp_path, monkeypatch, {
        "seer": (observer("seer"), "('agent_link_sessions_listed',)"),
        "quiet": (HEALTH_ONLY, "('agent_link_health',)"),
    })
    hooks = plugins.load_plugins(env_for("seer", "quiet"), declared=True)
    assert sorted(hooks.loaded) == ["quiet", "seer"]
    assert f"{pkgs['seer']}.plugin" not in sys.modules and f"{pkgs['quiet']}.plugin" not in sys.modules
    hooks.call("agent_link_sessions_listed", sessions=[{"address": "test:a", "title": "a"}])
    assert sys.modules[f"{pkgs['seer']}.plugin"].SEEN == ["seer"]
    assert f"{pkgs['quiet']}.plugin" not in sys.modules  # declares no sessions_listed: never imported
    assert hooks.boundary.report() == []
    assert set(hooks.hook_view()) >= {"seer", "quiet"}  # every plugin, imported for the view
    assert f"{pkgs['quiet']}.plugin" in sys.modules


@pytest.mark.parametrize("body", ["raise RuntimeError('boom')", "raise SystemExit(3)"])
def test_a_declared_plugin_that_fails_harms_only_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    pkgs = make_site(tmp_path, monkeypatch, {
        "bad": (observer("bad", body), "('agent_link_sessions_listed',)"),
        "good": (observer("good"), "('agent_link_sessions_listed',)"),
    })
    hooks = plugins.load_plugins(env_for("bad", "good"), declared=True)
    hooks.call("agent_link_sessions_listed", sessions=[])
    assert sys.modules[f"{pkgs['good']}.plugin"].SEEN == ["good"]
    assert [(p["plugin"], p["hook"]) for p in hooks.boundary.report()] == [("bad", "agent_link_sessions_listed")]


def test_a_plugin_whose_import_exits_is_left_out_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkgs = make_site(tmp_path, monkeypatch, {
        "broken": ("raise SystemExit('no')\n", "('agent_link_sessions_listed',)"),
        "good": (observer("good"), "('agent_link_sessions_listed',)"),
    })
    hooks = plugins.load_plugins(env_for("broken", "good"), declared=True)
    hooks.call("agent_link_sessions_listed", sessions=[])
    hooks.call("agent_link_sessions_listed", sessions=[])
    assert sys.modules[f"{pkgs['good']}.plugin"].SEEN == ["good", "good"]
    assert "broken" in hooks.failed and hooks.loaded == ["good"]
    assert [(p["plugin"], p["hook"], p["disabled"]) for p in hooks.boundary.report()] == [("broken", "load", True)]


def test_declared_calls_keep_pluggys_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """tryfirst, trylast and registration order give the same call order as pluggy's."""
    names = {"one": "(tryfirst=True)", "two": "", "three": "(trylast=True)", "four": "", "five": "(tryfirst=True)"}
    order: list[str] = []
    monkeypatch.setattr(sys, "agent_link_declared_order", order, raising=False)
    pkgs = make_site(tmp_path, monkeypatch, {
        name: (observer(name, "import sys; sys.agent_link_declared_order.append(" + repr(name) + ")", options),
               "('agent_link_sessions_listed',)")
        for name, options in names.items()})
    plugins.load_plugins(env_for(*names), declared=True).call("agent_link_sessions_listed", sessions=[])
    declared_order = list(order)
    order.clear()
    plugins.load_plugins(env_for(*names)).call("agent_link_sessions_listed", sessions=[])
    assert declared_order == order  # registration order is the entry points' (discovery's) order
    assert set(order[:2]) == {"one", "five"} and set(order[2:4]) == {"two", "four"} and order[4] == "three"
    assert all(f"{p}.plugin" in sys.modules for p in pkgs.values())


def test_a_declaration_that_differs_from_the_code_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkgs = make_site(tmp_path, monkeypatch, {
        "drifted": (observer("drifted"), "('agent_link_sessions_listed', 'agent_link_health')"),
    })
    hooks = plugins.load_plugins(env_for("drifted"), declared=True)
    hooks.call("agent_link_sessions_listed", sessions=[])
    assert sys.modules[f"{pkgs['drifted']}.plugin"].SEEN == ["drifted"]  # the code wins
    [problem] = hooks.boundary.report()
    assert problem["plugin"] == "drifted" and problem["hook"] == "load" and not problem["disabled"]
    assert "declares hooks" in problem["error"] and "AGENT_LINK_HOOKS" in problem["fix"]


def test_a_misspelt_hook_leaves_the_plugin_out_as_registration_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = observer("typo") + "\n\n@hookimpl\ndef agent_link_sesions_listed(sessions):\n    return None\n"
    make_site(tmp_path, monkeypatch, {"typo": (source, "('agent_link_sessions_listed', 'agent_link_sesions_listed')")})
    hooks = plugins.load_plugins(env_for("typo"), declared=True)
    hooks.call("agent_link_sessions_listed", sessions=[])
    assert "typo" in hooks.failed
    assert "agent_link_sesions_listed" in hooks.boundary.report()[0]["error"]


def test_an_undeclared_plugin_is_imported_to_read_its_hooks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkgs = make_site(tmp_path, monkeypatch, {"plain": (observer("plain"), None)})
    hooks = plugins.load_plugins(env_for("plain"), declared=True)
    assert f"{pkgs['plain']}.plugin" in sys.modules
    hooks.call("agent_link_sessions_listed", sessions=[])
    assert sys.modules[f"{pkgs['plain']}.plugin"].SEEN == ["plain"]


WRAPPER = '''
from agent_link_core import hookimpl

SEEN = []


@hookimpl(wrapper=True)
def agent_link_sessions_listed(sessions):
    SEEN.append("before")
    result = yield
    SEEN.append("after")
    return result
'''


def test_a_wrapper_is_refused_when_its_plugin_is_imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Wrappers are not supported: the plugin is left out and reported; the call goes on without it."""
    pkgs = make_site(tmp_path, monkeypatch, {"wrap": (WRAPPER, "('agent_link_sessions_listed',)"),
                                             "inner": (observer("inner"), "('agent_link_sessions_listed',)")})
    hooks = plugins.load_plugins(env_for("wrap", "inner"), declared=True)
    hooks.call("agent_link_sessions_listed", sessions=[])
    assert sys.modules[f"{pkgs['wrap']}.plugin"].SEEN == []
    assert sys.modules[f"{pkgs['inner']}.plugin"].SEEN == ["inner"]
    assert [(p["plugin"], p["hook"], p["error"]) for p in hooks.boundary.report()] == [
        ("wrap", "load", "agent_link_sessions_listed is a hook wrapper; wrappers are not supported")]
    assert hooks.loaded == ["inner"] and "wrap" in hooks.failed


PROBE = '''
import json, sys
from agent_link_core import plugins
hooks = plugins.load_plugins(declared=True)
hooks.settings(); hooks.migrations(); hooks.harnesses()
print(json.dumps({"pluggy": "pluggy" in sys.modules, "projects": "agent_link_projects.plugin" in sys.modules,
                  "settings": "agent_link_settings.plugin" in sys.modules, "problems": hooks.boundary.report(),
                  "imported": sorted(m for m in sys.modules if m.startswith("agent_link_") and m.endswith(".plugin"))}))
'''


@pytest.mark.installed_plugins
def test_the_hooks_a_cli_command_calls_import_no_pluggy(tmp_path: Path) -> None:
    """Every installed plugin: the hooks opening an App calls (settings, migrations,
    harnesses) run without pluggy and, all declared as data, import no plugin's entry module."""
    env = {k: v for k, v in os.environ.items() if k != discovery.LOAD_ONLY_ENV}
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    seen: dict[str, Any] = json.loads(done.stdout)
    assert seen == {"pluggy": False, "projects": False, "settings": False, "problems": [], "imported": []}


def test_load_all_reports_a_plugin_no_call_imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``agent-link plugins`` and ``agent-link health`` do first: every plugin imported,
    so one that cannot be is reported whatever hooks it declares."""
    make_site(tmp_path, monkeypatch, {"broken": ("raise ImportError('gone')\n", "('agent_link_health',)"),
                                      "good": (observer("good"), "('agent_link_sessions_listed',)")})
    hooks = plugins.load_plugins(env_for("broken", "good"), declared=True)
    hooks.call("agent_link_sessions_listed", sessions=[])
    assert sorted(hooks.loaded) == ["broken", "good"] and hooks.failed == {}  # not imported yet
    hooks.load_all()
    assert hooks.loaded == ["good"] and "gone" in hooks.failed["broken"]
    assert "good" in hooks.hook_view()


SETTINGS_AND_SCHEMA = '''
from agent_link_core import hookimpl
from agent_link_core.config import Setting
from agent_link_core.store import Migration


@hookimpl
def agent_link_register_settings(register):
    register(Setting("AGENT_LINK_DECL_LIMIT", "int", 5, minimum=1, doc="a limit"))


@hookimpl
def agent_link_schema():
    return [Migration("{name}", 1, "CREATE TABLE decl_{name} (id INTEGER)"),
            Migration("{name}", 2, "CREATE TABLE decl_{name}_notes (note TEXT)")]
'''

DECLARATION = '''
AGENT_LINK_SETTINGS = {{"{{module}}": ({{"name": "AGENT_LINK_DECL_LIMIT", "kind": "int", "default": 5, "minimum": 1, "doc": "a limit"}},)}}
AGENT_LINK_SCHEMA = {{"{{module}}": {{"{name}": {versions}}}}}
'''


def declared_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, versions: str = "(1, 2)") -> str:
    return make_site(tmp_path, monkeypatch, {name: (SETTINGS_AND_SCHEMA.format(name=name), "('agent_link_register_settings', 'agent_link_schema')")},
                     {name: DECLARATION.format(name=name, versions=versions)})[name]


def tables(db: Path) -> set[str]:
    """``owner#version`` of every migration ``db`` has."""
    with sqlite3.connect(db) as conn:
        return {r[0] for r in conn.execute("SELECT owner || '#' || version FROM schema_migrations")}


def test_declared_settings_and_migrations_import_the_plugin_only_for_a_database_that_lacks_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_link_core.app import App

    package = declared_site(tmp_path, monkeypatch, "decl")
    env = {**env_for("decl"), "AGENT_LINK_STATE_DIR": str(tmp_path / "state"), "AGENT_LINK_DECL_LIMIT": "7"}
    app = App.create(env, hooks=plugins.load_plugins(env, declared=True))  # fresh: the SQL is needed
    assert f"{package}.plugin" in sys.modules and {"decl#1", "decl#2"} <= tables(Path(app.config.db_path))
    assert app.config.get("AGENT_LINK_DECL_LIMIT") == 7 and app.hooks.boundary.report() == []
    app.close()
    del sys.modules[f"{package}.plugin"]
    hooks = plugins.load_plugins(env, declared=True)
    app = App.create(env, hooks=hooks)  # up to date: read from the declaration alone
    assert f"{package}.plugin" not in sys.modules
    assert app.config.get("AGENT_LINK_DECL_LIMIT") == 7 and hooks.boundary.report() == []
    db = Path(app.config.db_path)
    app.close()
    with sqlite3.connect(db) as conn:  # an older state dir: made before the plugin's version 2
        conn.execute("DELETE FROM schema_migrations WHERE owner = 'decl' AND version = 2")
        conn.execute("DROP TABLE decl_decl_notes")
    app = App.create(env, hooks=plugins.load_plugins(env, declared=True))
    assert f"{package}.plugin" in sys.modules and "decl#2" in tables(db)
    assert app.store.conn.execute("SELECT count(*) FROM decl_decl_notes").fetchone()[0] == 0
    app.close()


def test_a_declared_setting_refuses_a_bad_value_as_a_registered_one_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_link_core.app import App
    from agent_link_core.errors import AgentLinkError

    declared_site(tmp_path, monkeypatch, "declbad")
    env = {**env_for("declbad"), "AGENT_LINK_STATE_DIR": str(tmp_path / "state"), "AGENT_LINK_DECL_LIMIT": "0"}
    with pytest.raises(AgentLinkError) as caught:
        App.create(env, hooks=plugins.load_plugins(env, declared=True)).close()
    assert "AGENT_LINK_DECL_LIMIT" in caught.value.message


def test_a_declared_migration_the_code_lacks_is_reported_and_the_plugin_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_link_core.app import App

    declared_site(tmp_path, monkeypatch, "decldrift", versions="(1, 2, 3)")
    env = {**env_for("decldrift"), "AGENT_LINK_STATE_DIR": str(tmp_path / "state")}
    app = App.create(env, hooks=plugins.load_plugins(env, declared=True))
    problems = [(p["plugin"], p["hook"], p["disabled"]) for p in app.hooks.boundary.report()]
    assert ("decldrift", "agent_link_schema", True) in problems
    assert any("declares migrations" in p["error"] for p in app.hooks.boundary.report())
    assert "decldrift#3" not in tables(Path(app.config.db_path))
    app.close()


def test_a_malformed_settings_declaration_harms_only_its_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_site(tmp_path, monkeypatch, {"declodd": (SETTINGS_AND_SCHEMA.format(name="declodd"), "('agent_link_register_settings',)")},
              {"declodd": 'AGENT_LINK_SETTINGS = {"{module}": ({"name": "AGENT_LINK_DECL_LIMIT", "kind": "int", "maxi": 3},)}\n'})
    hooks = plugins.load_plugins(env_for("declodd"), declared=True)
    assert [s.name for s in hooks.settings()] == []
    assert [(p["plugin"], p["hook"], p["disabled"]) for p in hooks.boundary.report()] == [("declodd", "agent_link_register_settings", True)]


def test_a_malformed_harness_declaration_harms_only_its_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkgs = make_site(tmp_path, monkeypatch, {
        "declhx": (observer("declhx"), "('agent_link_register_harnesses',)"),
        "declhy": (observer("declhy"), "('agent_link_register_harnesses',)")},
        {"declhx": 'AGENT_LINK_HARNESSES = {"{module}": ({"name": "declhx", "target": "x.y:Z", "colour": 3},)}\n',
         "declhy": 'AGENT_LINK_HARNESSES = {"{module}": ({"name": "declhy", "target": "x.y:Z", "caller_variables": ("DECLHY",)},)}\n'})
    hooks = plugins.load_plugins(env_for("declhx", "declhy"), declared=True)
    assert list(hooks.harnesses()) == ["declhy"]  # answered by the declaration: neither module imported
    assert not any(f"{p}.plugin" in sys.modules for p in pkgs.values())
    assert [(p["plugin"], p["hook"], p["disabled"]) for p in hooks.boundary.report()] == [("declhx", "agent_link_register_harnesses", True)]
