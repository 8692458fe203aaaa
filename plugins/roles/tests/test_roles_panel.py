"""The Roles section of the web page: holders, project assignments, labels beside agents."""

from __future__ import annotations

from typing import Any

import pytest

from agent_link_core.app import App

pytest.importorskip("agent_link_web")  # the panel's types and its one consumer are the web plugin's
from agent_link_web.panels import panels


@pytest.mark.anyio
async def test_roles_panel_lists_holders_and_labels_them(app: App, run_tool: Any) -> None:
    panel = next(p for p in panels(app) if p.name == "roles")
    empty = panel.render(app)
    assert empty.rows == [] and empty.empty == "No roles are assigned."
    await run_tool(app, "set_agent_role", {"role": "builder", "agent": "test:bob"})
    await run_tool(app, "set_agent_role", {"role": "orchestrator", "agent": "test:carol", "projectRoot": "/work/app"})
    view = panel.render(app)
    assert [row[:2] for row in view.rows] == [["role:builder", "test:bob"], ["role:orchestrator", "nobody"],
                                              ["role:orchestrator", "test:carol"]]
    assert view.agent_labels == {"test:bob": ["role:builder"], "test:carol": ["role:orchestrator (/work/app)"]}
