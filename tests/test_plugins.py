"""Plugin loading from entry points: disabled names, broken plugins, duplicates."""

from __future__ import annotations

import importlib.metadata
from typing import Any

import pytest

from agent_link_core import plugins as plugins_mod
from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError
from agent_link_core.harness import Harness
from agent_link_core.plugins import Hooks, build_plugin_manager, disabled_plugin_names


def fake_entry_points(*pairs: tuple[str, str]) -> Any:
    eps = [importlib.metadata.EntryPoint(name=n, value=v, group="agent_link") for n, v in pairs]
    return lambda group: [ep for ep in eps if ep.group == group]


def test_installed_plugins_load_and_can_be_disabled() -> None:
    _, report = build_plugin_manager(env={})
    assert {"codex", "claude", "roles", "receipts"} <= set(report.loaded)
    _, report = build_plugin_manager(env={"AGENT_LINK_DISABLE_PLUGINS": "codex, roles"})
    assert "codex" not in report.loaded and "roles" not in report.loaded
    assert report.blocked == ["codex", "roles"]


def test_disabled_names_parse_commas_and_spaces() -> None:
    assert disabled_plugin_names({"AGENT_LINK_DISABLE_PLUGINS": " a,b  c ,"}) == {"a", "b", "c"}


def test_broken_plugin_is_reported_and_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plugins_mod.importlib.metadata, "entry_points",
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


def test_duplicate_harness_names_fail_naming_both() -> None:
    from agent_link_core import hookimpl

    class One:
        @hookimpl
        def agent_link_register_harnesses(self, register: Any) -> None:
            h = Harness()
            h.name = "dup"
            register(h)

    pm, _ = build_plugin_manager(env={"AGENT_LINK_DISABLE_PLUGINS": "codex claude roles receipts"}, extra_plugins=(One(), One()))
    with pytest.raises(AgentLinkError) as e:
        Hooks(pm).harnesses()
    assert "registered by both" in e.value.message


def test_misspelled_hookimpl_is_rejected() -> None:
    from agent_link_core import hookimpl
    from pluggy import PluginValidationError

    class Typo:
        @hookimpl
        def agent_link_on_evnt(self, event: Any) -> None:
            return None

    with pytest.raises(PluginValidationError):
        build_plugin_manager(env={}, extra_plugins=(Typo(),))
