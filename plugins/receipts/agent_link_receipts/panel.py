"""The receipts section of the people's views (the ``agent-link web`` page)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_link_core.model import is_ulid
from agent_link_web.panels import Cell, Panel, PanelLink, PanelView, panel_viewer
from agent_link_receipts.ledger import list_receipts

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App

SHOWN = 15


def render(app: App) -> PanelView:
    """The newest receipts of the mail the reader may see, each linking to its message's
    conversation."""
    page = list_receipts(app.store, {}, SHOWN, panel_viewer())
    rows: list[list[Cell]] = []
    for r in page.receipts:
        target: Any = r.get("target") or {}
        message_id = r.get("messageId")
        rows.append([
            r.get("createdAt"), str(r.get("action")) + (f" ({r['kind']})" if r.get("kind") else ""), r.get("actor"),
            target.get("address") if isinstance(target, dict) else None,
            PanelLink(message_id[:10] + "…", message_id) if isinstance(message_id, str) and is_ulid(message_id) else None,
        ])
    note = f"{page.total} receipts in all; `agent-link receipts` lists and exports them." if page.total > SHOWN else None
    return PanelView(["at", "action", "actor", "target", "message"], rows, empty="No receipts yet.", note=note)


PANEL = Panel("receipts", "Receipts", render, order=50)
#: what ``agent_link_register_panels`` registers (named by the entry module, imported when panels are listed)
PANELS = (PANEL,)
