"""Registration without pluggy's manager (agent_link_core.lazy.module_hooks, read by
agent_link_core.plugins.Hooks) finds every implementation pluggy itself would find,
bound as pluggy binds it and called with the arguments pluggy would pass; a wrapper is refused."""

from __future__ import annotations

import functools
import types
from typing import Any

import pluggy
import pytest

from agent_link_core import hookimpl, hookspecs, lazy
from agent_link_core.lazy import PROJECT
from agent_link_core.plugins import plugins_of

pluggy_mark = pluggy.HookimplMarker(PROJECT)


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


def logged(function: Any) -> Any:
    """A decorator as plugins write them (``functools.wraps``): pluggy passes the arguments of the function it wraps."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    return wrapper


class Base:
    @hookimpl(tryfirst=True)
    def agent_link_on_event(self, event: object) -> None:
        return None


class Shapes(Base):
    """Hooks as methods, inherited, static and class methods (marked above or below the
    decorator, by agent-link's marker or pluggy's), a decorated method, one set on the
    instance, and a property that must never run."""

    def __init__(self) -> None:
        self.agent_link_resolve_elsewhere = hookimpl(lambda address, app: None)

    @hookimpl  # type: ignore[misc]
    @staticmethod
    def agent_link_health() -> tuple[str, dict[str, bool]]:
        return "static", {"ok": True}

    @classmethod
    @pluggy_mark(trylast=True)
    def agent_link_session_roles(cls, addresses: list[str]) -> None:
        return None

    @pluggy_mark
    @logged
    def agent_link_schema(self) -> list[Any]:
        return []

    @property
    def agent_link_sessions_listed(self) -> Any:
        raise AssertionError("a property is never read for its hook")


class Slotted(Base):
    __slots__ = ("agent_link_sessions_listed",)


@pytest.mark.parametrize("make", [module_plugin, Shapes, lambda: Shapes, Slotted], ids=["module", "object", "class", "slots"])
def test_every_plugin_shape_gets_the_hooks_pluggys_own_manager_gets(make: Any) -> None:
    plugin = make()
    plain = pluggy.PluginManager(PROJECT)
    plain.add_hookspecs(hookspecs)
    plain.register(plugin, name="fake")
    expected = {caller.name: caller.get_hookimpls()[0] for caller in plain.get_hookcallers(plugin) or []}
    found = lazy.module_hooks(plugin)
    assert sorted(found) == sorted(expected)
    for hook, impl in expected.items():
        function, opts = found[hook]
        assert function == impl.function and lazy.argnames(function) == impl.argnames, hook
        assert (opts["tryfirst"], opts["trylast"]) == (impl.tryfirst, impl.trylast), hook
    hooks = plugins_of({"AGENT_LINK_LOAD_PLUGINS": ""}, (("fake", make()),))
    assert hooks.boundary.report() == []
    assert sorted(hooks.hook_view()["fake"]) == sorted({*expected, "load"})


def test_a_static_hook_of_an_object_plugin_is_called() -> None:
    hooks = plugins_of({"AGENT_LINK_LOAD_PLUGINS": ""}, (("shapes", Shapes()),))
    assert hooks.health_sections()["static"] == {"ok": True}
    assert hooks.boundary.report() == []


@pytest.mark.parametrize("marker", [hookimpl(wrapper=True), pluggy_mark(hookwrapper=True)], ids=["wrapper", "hookwrapper"])
def test_a_hook_wrapper_is_refused_naming_the_plugin(marker: Any) -> None:
    """Wrappers are not supported: the plugin is left out and reported; the others are called."""

    class Wraps:
        @marker
        def agent_link_health(self) -> Any:
            return (yield)

    hooks = plugins_of({"AGENT_LINK_LOAD_PLUGINS": ""}, (("wraps", Wraps()), ("holder", Holder())))
    assert hooks.health_sections() == {"bound": {"ok": True}}
    [problem] = hooks.boundary.report()
    assert (problem["plugin"], problem["hook"], problem["disabled"]) == ("wraps", "load", True)
    assert problem["error"] == "agent_link_health is a hook wrapper; wrappers are not supported"
    assert "AGENT_LINK_DISABLE_PLUGINS=wraps" in problem["fix"]
    assert "wraps" in hooks.failed and hooks.loaded == ["holder"]


def test_a_name_or_a_plugin_registered_twice_is_refused() -> None:
    holder = Holder()
    hooks = plugins_of({"AGENT_LINK_LOAD_PLUGINS": ""}, (("one", holder), ("two", holder), ("one", Holder())))
    assert [(p["plugin"], p["hook"]) for p in hooks.boundary.report()] == [("two", "load"), ("one", "load")]
    assert hooks.health_sections() == {} and hooks.loaded == []
