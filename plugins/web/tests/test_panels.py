"""The panel hook: plugins add sections to the views people read, as data, never markup."""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path
from typing import Any

import pytest

from agent_link_core import hookimpl
from agent_link_core.app import App
from agent_link_web.panels import Panel, PanelLink, PanelView, panels

#: every plugin but this one, which specifies the hook
ALL_PLUGINS = " ".join(sorted(ep.name for ep in importlib.metadata.entry_points(group="agent_link") if ep.name != "web"))


def jobs_view(app: App) -> PanelView:
    return PanelView(["job", "message"], [["j1", PanelLink("open", "01J0000000000000000000AAAA")]],
                     agent_labels={"team:bob": ["role:reviewer"]})


class JobsPlugin:
    @hookimpl
    def agent_link_register_panels(self, register: Any) -> None:
        register(Panel("jobs", "Jobs", jobs_view, order=20))
        register(Panel("alpha", "Alpha", lambda app: PanelView(["x"]), order=20))
        register(Panel("early", "Early", lambda app: PanelView(["x"]), order=1))


class Clash:
    @hookimpl
    def agent_link_register_panels(self, register: Any) -> None:
        register(Panel("jobs", "Other jobs", jobs_view))


def make(*plugins: Any) -> App:
    return App.create({**os.environ, "AGENT_LINK_DISABLE_PLUGINS": ALL_PLUGINS}, extra_plugins=plugins)


def test_panels_come_sorted_by_order_then_name(isolated_env: Path) -> None:
    app = make(JobsPlugin())
    try:
        found = panels(app)
        assert [p.name for p in found] == ["early", "alpha", "jobs"]
        view = found[-1].render(app)
        assert isinstance(view, PanelView) and view.agent_labels == {"team:bob": ["role:reviewer"]}
    finally:
        app.close()


def test_duplicate_panel_names_name_both_plugins(isolated_env: Path) -> None:
    app = make(JobsPlugin(), Clash())
    try:
        assert [p.name for p in panels(app)] == ["early", "alpha", "jobs"]  # the later plugin is refused, not both
        (problem,) = app.hooks.boundary.report()
        assert problem["plugin"] == "Clash" and "'jobs', which plugin 'JobsPlugin' already registered" in problem["error"]
    finally:
        app.close()


@pytest.mark.parametrize("name", ["Jobs", "1st", "a b", "x" * 49, "", "<script>"])
def test_panel_names_are_url_safe(name: str) -> None:
    with pytest.raises(ValueError):
        Panel(name, "t", jobs_view)


class NotAPanel:
    @hookimpl
    def agent_link_register_panels(self, register: Any) -> None:
        register({"name": "raw", "title": "Raw", "render": None})


def test_a_record_that_is_not_a_panel_leaves_its_plugin_out(isolated_env: Path) -> None:
    app = make(JobsPlugin(), NotAPanel())
    try:
        assert [p.name for p in panels(app)] == ["early", "alpha", "jobs"]
        (problem,) = app.hooks.boundary.report()
        assert problem["plugin"] == "NotAPanel" and "not a Panel" in problem["error"]
        assert "agent_link_web.panels.Panel" in problem["fix"]
    finally:
        app.close()
