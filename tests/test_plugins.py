"""Plugin loading from entry points: disabled names, broken plugins, duplicates."""

from __future__ import annotations

import importlib.metadata
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_core.harness import Harness
from agent_link_core.discovery import chosen
from agent_link_core.plugins import plugins_of
from agent_link_core.tools.core_tools import CORE_TOOLS


def fake_entry_points(*pairs: tuple[str, str]) -> Any:
    eps = [importlib.metadata.EntryPoint(name=n, value=v, group="agent_link") for n, v in pairs]
    return lambda group: [ep for ep in eps if ep.group == group]


@pytest.mark.installed_plugins
def test_installed_plugins_load_and_can_be_disabled() -> None:
    report = plugins_of({})
    assert {"codex", "claude", "roles", "receipts"} <= set(report.loaded)
    report = plugins_of({"AGENT_LINK_DISABLE_PLUGINS": "codex, roles"})
    assert "codex" not in report.loaded and "roles" not in report.loaded
    assert report.blocked == ["codex", "roles"]


@pytest.mark.installed_plugins("presence")
def test_a_test_loads_only_the_installed_plugins_it_names() -> None:
    import os

    assert os.environ["AGENT_LINK_LOAD_PLUGINS"] == "presence"  # tests/conftest.py, for agent-link processes too
    loaded = set(plugins_of(dict(os.environ)).loaded)
    assert "presence" in loaded and "codex" not in loaded


def test_disabled_names_parse_commas_and_spaces() -> None:
    assert chosen({"AGENT_LINK_DISABLE_PLUGINS": " a,b  c ,"}) == ({"a", "b", "c"}, None)
    assert chosen({"AGENT_LINK_LOAD_PLUGINS": "x, y"}) == (set(), {"x", "y"})


@pytest.mark.installed_plugins
def test_broken_plugin_is_reported_and_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        fake_entry_points(("broken", "agent_link_no_such_module_xyz"), ("fine", "agent_link_core.errors")))
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "")
    app = App.create()
    try:
        health = app.health()
        assert "broken" in health["plugins"]["failed"]
        assert "ModuleNotFoundError" in health["plugins"]["failed"]["broken"]
        assert health["plugins"]["loaded"] == ["fine"]
        assert "agent_link_health" in app.hooks.tools()  # the core still works
    finally:
        app.close()


def test_duplicate_harness_names_refuse_the_second_naming_both() -> None:
    from agent_link_core import hookimpl

    class One:
        @hookimpl
        def agent_link_register_harnesses(self, register: Any) -> None:
            h = Harness()
            h.name = "dup"
            register(h)

    hooks = plugins_of({"AGENT_LINK_LOAD_PLUGINS": ""}, (("first", One()), ("second", One())))
    report = hooks
    assert list(hooks.harnesses()) == ["dup"]
    (problem,) = hooks.boundary.report()
    refused = problem["plugin"]
    kept = ({"first", "second"} - {refused}).pop()
    assert f"which plugin {kept!r} already registered" in problem["error"]
    assert f"AGENT_LINK_DISABLE_PLUGINS={refused}" in problem["fix"]
    assert refused in report.failed and refused not in report.loaded and kept in report.loaded


def test_misspelled_hookimpl_is_reported_and_left_out() -> None:
    from agent_link_core import hookimpl

    class Typo:
        @hookimpl
        def agent_link_on_evnt(self, event: Any) -> None:
            return None

    hooks = plugins_of({"AGENT_LINK_LOAD_PLUGINS": ""}, (("typo", Typo()),))
    report = hooks
    assert "typo" in report.failed and "agent_link_on_evnt" in report.failed["typo"]
    assert list(hooks.hook_view()["typo"]) == ["load"]  # registered for no hook: only its failed load was timed
    assert "AGENT_LINK_DISABLE_PLUGINS=typo" in hooks.boundary.report()[0]["fix"]


def test_core_tests_load_no_installed_plugin() -> None:
    """Hermetic: whatever is installed (the example plugin, a user's own), a core test's App
    has only the core and the plugins the test names."""
    assert importlib.metadata.entry_points(group="agent_link")  # something is installed
    app = App.create()
    try:
        assert app.harnesses == {} and app.hooks.loaded == []
        assert {spec.name for spec in CORE_TOOLS} <= set(app.hooks.tools())
        assert {app.hooks.owner("tool", name) for name in app.hooks.tools()} == {"agent_link_core.default_plugins"}
    finally:
        app.close()


def test_load_only_names_the_plugins_to_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        fake_entry_points(("one", "agent_link_core.errors"), ("two", "agent_link_core.addresses")))
    assert plugins_of({"AGENT_LINK_LOAD_PLUGINS": "two"}).loaded == ["two"]
    assert plugins_of({}).loaded == ["one", "two"]


@pytest.mark.parametrize(("name", "ok"), [
    ("codex", True), ("a", True), ("a-1", True), ("a" * 32, True), ("a" * 33, False), ("", False), ("1a", False),
    ("-a", False), ("Ab", False), ("a_b", False), ("abc\n", False), ("é", False), (None, False), (3, False),
])
def test_a_harness_name_is_its_address_scheme(name: object, ok: bool) -> None:
    """1-32 of a-z 0-9 -, starting with a letter; a trailing line break too is refused (``$`` let it pass)."""
    from agent_link_core.boundary import Refused
    from agent_link_core.harness_decl import HarnessDeclaration, check_harness

    declared = HarnessDeclaration(name=name, target="pkg.mod:Cls")  # type: ignore[arg-type]
    if ok:
        check_harness(declared)
    else:
        with pytest.raises(Refused, match="registered a harness named"):
            check_harness(declared)


@pytest.mark.parametrize("name", ["ping\n", "Ping", "1ping", "p" * 65, ""])
def test_a_tool_name_with_a_trailing_line_break_or_outside_snake_case_is_refused(name: str) -> None:
    """Every ``^...$`` identifier check became ``^...\\Z``: ``$`` also matches before a final line break."""
    from agent_link_core.boundary import Refused
    from agent_link_core.tools.registry import ToolSpec, check_tool

    async def handler(app: Any, arguments: Any, call: Any) -> dict[str, Any]:
        return {"ok": True}

    with pytest.raises(Refused, match="registered a tool named"):
        check_tool(ToolSpec(name=name, description="d", input_schema={"type": "object"}, output_fields={}, handler=handler))


@pytest.mark.parametrize(("name", "aliases", "ok"), [
    ("AGENT_LINK_X", (), True), ("AGENT_LINK_" + "A" * 64, ("OLD_NAME", "X"), True), ("AGENT_LINK_", (), False),
    ("AGENT_LINK_" + "A" * 65, (), False), ("AGENT_LINK_x", (), False), ("AGENT_LINK_X\n", (), False), ("OTHER_X", (), False),
    ("AGENT_LINK_X", ("_OLD",), False), ("AGENT_LINK_X", ("1OLD",), False), ("AGENT_LINK_X", ("A" * 82,), False),
    ("AGENT_LINK_X", ("old",), False), ("AGENT_LINK_X", ("",), False),
])
def test_a_plugin_setting_is_named_as_an_environment_variable(name: str, aliases: tuple[str, ...], ok: bool) -> None:
    """``AGENT_LINK_`` and 1-64 of A-Z 0-9 _; aliases an upper-case variable name of at most 81 characters."""
    from agent_link_core.boundary import Refused
    from agent_link_core.config import Setting, check_setting

    setting = Setting(name, "str", "", aliases=aliases)
    if ok:
        check_setting(setting, frozenset())
    else:
        with pytest.raises(Refused):
            check_setting(setting, frozenset())
