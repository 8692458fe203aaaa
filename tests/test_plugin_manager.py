"""The plugin manager's shortcut past a module's names that cannot be hooks keeps every
implementation pluggy itself would find (agent_link_core.plugins._PluginManager)."""

from __future__ import annotations

import types

import pluggy

from agent_link_core import hookimpl, hookspecs
from agent_link_core.plugins import build_plugin_manager


class Holder:
    @hookimpl
    def agent_link_health(self) -> tuple[str, dict[str, bool]]:
        return "bound", {"ok": True}


def module_plugin() -> types.ModuleType:
    """A module whose hooks are a function, a bound method and a staticmethod, beside names
    that are no hooks (a class, a module, a constant, an unmarked function)."""
    mod = types.ModuleType("agent_link_fake_module")

    @hookimpl
    def agent_link_on_event(event: object) -> None:
        return None

    mod.agent_link_on_event = agent_link_on_event  # type: ignore[attr-defined]
    mod.agent_link_health = Holder().agent_link_health  # type: ignore[attr-defined]
    mod.agent_link_session_roles = staticmethod(hookimpl(lambda addresses: None))  # type: ignore[attr-defined]
    mod.Holder = Holder  # type: ignore[attr-defined]
    mod.pluggy = pluggy  # type: ignore[attr-defined]
    mod.LIMIT = 3  # type: ignore[attr-defined]
    mod.helper = lambda: None  # type: ignore[attr-defined]
    return mod


def test_a_module_plugin_gets_the_same_hooks_as_with_pluggys_own_manager() -> None:
    plugin = module_plugin()
    plain = pluggy.PluginManager(hookspecs.PROJECT)
    plain.add_hookspecs(hookspecs)
    plain.register(plugin, name="fake")
    expected = sorted(h.name for h in plain.get_hookcallers(plugin) or [])
    assert expected == ["agent_link_health", "agent_link_on_event", "agent_link_session_roles"]
    pm, _ = build_plugin_manager(env={"AGENT_LINK_LOAD_PLUGINS": ""}, extra_plugins=(("fake", module_plugin()),))
    ours = pm.get_plugin("fake")
    assert sorted(h.name for h in pm.get_hookcallers(ours) or []) == expected
