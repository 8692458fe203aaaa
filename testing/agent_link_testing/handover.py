"""A message handed to another recipient the way the roles plugin's handover does it
(plugins/roles/agent_link_roles/handover.py), through the mailbox's public seam
(:meth:`~agent_link_core.mailbox.Mailbox.record`, :meth:`~agent_link_core.mailbox.Mailbox.publish`):
for suites of observers of the ``released`` event (receipts, search) that run without the roles plugin."""

from __future__ import annotations

from agent_link_core.app import App
from agent_link_core.store import now_ms


def hand_over(app: App, message_id: str, to: str, actor: str) -> bool:
    """Give ``message_id`` to ``to`` (undelivered again) and record ``released`` by ``actor``; True."""
    with app.store.write() as conn:
        before = conn.execute("SELECT recipient FROM messages WHERE id = ?", (message_id,)).fetchone()[0]
        conn.execute("UPDATE messages SET recipient = ?, delivered_at = NULL, delivered_via = NULL WHERE id = ?", (to, message_id))
        moved = {"from": before, "to": to}
        staged = app.mailbox.record(conn, message_id, "released", now_ms(), actor, moved, observed=moved)
    app.mailbox.publish(staged)
    return True
