"""The Receipts section of the web page: newest receipts of the reader's mail, linked to their
conversations."""

from __future__ import annotations

from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_core.model import Caller

pytest.importorskip("agent_link_web")  # the panel's types and its one consumer are the web plugin's
from agent_link_web.panels import PanelLink, drawing_for, panels


@pytest.mark.anyio
async def test_receipts_panel_shows_newest_first_with_links(app: App, run_tool: Any) -> None:
    panel = next(p for p in panels(app) if p.name == "receipts")
    with drawing_for(app.mailbox.visible_to("test:bob")):
        assert panel.render(app).rows == []
        sent = await run_tool(app, "message_agent", {"to": "test:bob", "message": "hello <b>bob</b>"})
        view = panel.render(app)
    assert view.columns == ["at", "action", "actor", "target", "message"]
    first = view.rows[0]
    assert first[1] == "message_agent" and first[2] == "test:alice" and first[3] == "test:bob"
    assert first[4] == PanelLink(sent["messageId"][:10] + "…", sent["messageId"])


@pytest.mark.anyio
async def test_receipts_panel_shows_a_reader_only_the_receipts_of_their_mail(app: App, run_tool: Any) -> None:
    panel = next(p for p in panels(app) if p.name == "receipts")
    await run_tool(app, "message_agent", {"to": "test:bob", "message": "hello bob"})
    mine = await app.send(caller=Caller("test:carol", "config", "test"), to="user:ana", body="for ana", anticipation="fyi")
    with drawing_for(app.mailbox.visible_to("user:ana")):
        shown = panel.render(app)
    assert [row[4] for row in shown.rows] == [PanelLink(mine.message["id"][:10] + "…", mine.message["id"])]
    assert panel.render(app).rows == []  # drawn for nobody: nothing of the mail
