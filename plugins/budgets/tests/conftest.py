"""Fixtures for the budgets plugin's tests: only this plugin loads (and the plugins a test adds), and ``read``, an
inbox read fitted to a budget the test gives."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agent_link_budgets import fit
from agent_link_core import reading
from agent_link_core.app import App
from agent_link_core.harness import OutputBudget
from agent_link_core.model import Caller

Read = Callable[..., dict[str, Any]]


@pytest.fixture(autouse=True)
def only_budgets(isolated_env: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "budgets")


@pytest.fixture
def read(monkeypatch: pytest.MonkeyPatch) -> Read:
    """``read(app, caller, budget, **kwargs)``: :func:`agent_link_core.reading.inbox` (``kwargs``: its own) fitted by
    this plugin to ``budget`` instead of the caller's host's; None: no answer, everything unpaged."""

    def inbox(app: App, caller: Caller, budget: OutputBudget | None, **kwargs: Any) -> dict[str, Any]:
        with monkeypatch.context() as patched:
            if budget is None:
                patched.setattr(fit, "fit", lambda draft, budget: None)
            else:
                patched.setattr(fit, "caller_budget", lambda app, caller: budget)
            return reading.inbox(app, caller, **kwargs)

    return inbox
