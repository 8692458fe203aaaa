"""Give the ``agent-link`` CLI of a test (``build_cli()`` run by click's ``CliRunner``) extra
plugins or an App of the test's own.

The CLI loads its plugins once per invocation with :func:`agent_link_core.plugins.load_plugins`
(its commands are looked up before the database opens) and the App it opens reuses them, so
both are replaced here.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent_link_core import plugins
from agent_link_core.app import App


def add_cli_plugins(monkeypatch: pytest.MonkeyPatch, *extra: Any) -> None:
    """Every CLI invocation of the test, and every :meth:`App.create` of its own, loads the
    installed plugins plus ``extra`` (plugin objects, or ``(name, object)`` pairs as
    :meth:`App.create`'s ``extra_plugins``)."""
    load, create = plugins.load_plugins, App.create
    monkeypatch.setattr(plugins, "load_plugins", lambda env=None, extra_plugins=(), declared=False: load(env, (*extra_plugins, *extra)))
    monkeypatch.setattr(App, "create", classmethod(
        lambda cls, env=None, extra_plugins=(), **options: create(env, (*extra_plugins, *extra), **options)))


def use_app_in_cli(monkeypatch: pytest.MonkeyPatch, app: App) -> None:
    """Every CLI invocation of the test uses ``app`` (its plugins and database) and leaves
    it open for the test to close."""
    monkeypatch.setattr(plugins, "load_plugins", lambda env=None, extra_plugins=(), declared=False: app.hooks)
    monkeypatch.setattr(App, "create", classmethod(lambda cls, *a, **k: app))
    monkeypatch.setattr(app, "close", lambda: None)
