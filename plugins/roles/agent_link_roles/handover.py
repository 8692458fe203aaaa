"""Role handover: open mail sent to a role follows the role to its new holder.

A reply or action message sent to ``role:<name>`` that is still open moves to the role's
current holder through :func:`reassign` (the
reminder count carries over, so the cap is not reset; the previous holder then gets
``wrong_recipient`` if it tries to resolve it). fyi messages never move, resolved messages
stay with their resolver, and a cleared or ambiguous role leaves its mail where it is.

Handover runs whenever ``role:<name>`` is resolved and whenever a role tool reads the table, so
a hand edit of roles.json takes effect at the next send to a role or role tool call.
``role_holders`` remembers the holder handover was last applied for, so the check is one small
query when nothing changed.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from agent_link_core.errors import AgentLinkError
from agent_link_core.store import now_ms

from agent_link_roles.procedures import claim_text
from agent_link_roles.table import RoleTable

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App
    from agent_link_core.mailbox import Mailbox


def apply_handover(app: App, table: RoleTable, actor: str, *, wait: bool = True) -> dict[str, list[str]]:
    """Move open role mail to each role's current holder where the holder changed.

    :param table: the role table just read.
    :param actor: who caused it (recorded on the ``released`` event).
    :param wait: False on read paths (listing or resolving roles): when another process
        holds the write lock, handover stops there instead of waiting; the roles it did not
        finish are not recorded in ``role_holders``, so the next send to a role or role tool
        call that gets the lock finishes them (a message moves at most once).
    :returns: ``{role name: [moved message ids]}`` for roles whose mail moved.
    :raises AgentLinkError: ``state_busy`` only with ``wait`` (past the busy timeout).
    """
    conn = app.store.conn
    recorded = {r["role"]: r["holder"] for r in conn.execute("SELECT role, holder FROM role_holders")}
    moved: dict[str, list[str]] = {}
    try:
        for name in sorted(set(table.roles) | set(recorded)):
            role = table.roles.get(name)
            holder = role.address if role is not None else None
            if name in recorded and recorded[name] == holder:
                continue
            if holder is not None:
                for mid in _open_held_elsewhere(app, f"role:{name}", holder):
                    if reassign(app.mailbox, mid, holder, actor, wait=wait):
                        moved.setdefault(name, []).append(mid)
                        _claim_for_new_holder(app, mid, name, holder, wait)
            with app.store.write(wait=wait) as w:
                w.execute(
                    "INSERT INTO role_holders (role, holder, updated_at) VALUES (?, ?, ?)"
                    " ON CONFLICT (role) DO UPDATE SET holder = excluded.holder, updated_at = excluded.updated_at",
                    (name, holder, now_ms()),
                )
    except AgentLinkError as exc:
        if wait or exc.code != "state_busy":
            raise
    return moved


def reassign(mailbox: Mailbox, message_id: str, new_recipient: str, actor: str, *, wait: bool = True) -> bool:
    """Move the open message ``message_id`` to ``new_recipient`` (undelivered for it, its reminder count kept), recording
    a ``released`` event (``{"from", "to"}``) by ``actor``: True if moved; False when it is absent, resolved or already there.

    :param wait: False (a read path): ``state_busy`` at once while another process holds the write lock.
    """
    at = now_ms()
    with mailbox.store.write(wait=wait) as conn:
        row = conn.execute("SELECT recipient FROM messages WHERE id = ?", (message_id,)).fetchone()
        if row is None or row["recipient"] == new_recipient or conn.execute(
                "SELECT 1 FROM resolutions WHERE message_id = ?", (message_id,)).fetchone():
            return False
        conn.execute("UPDATE messages SET recipient = ?, delivered_at = NULL, delivered_via = NULL, open = 1 WHERE id = ?",
                     (new_recipient, message_id))
        moved = {"from": row["recipient"], "to": new_recipient}
        staged = mailbox.record(conn, message_id, "released", at, actor, moved, observed=moved)
    mailbox.publish(staged)
    return True


def _open_held_elsewhere(app: App, to: str, holder: str) -> list[str]:
    """Ids of open reply/action messages addressed to ``to`` whose recipient is not ``holder``, oldest first."""
    return [r["id"] for r in app.store.conn.execute(
        "SELECT id FROM messages WHERE to_addr = ? AND open = 1 AND anticipation != 'fyi' AND recipient != ?"
        " ORDER BY sent_at, id",
        (to, holder),
    )]


def _claim_for_new_holder(app: App, message_id: str, name: str, holder: str, wait: bool) -> None:
    # A holder that never saw this procedure version gets its text with the moved message.
    row = app.mailbox.get_row(message_id)
    procedure = json.loads(row["metadata"] or "{}").get("role", {}).get("procedure")
    if procedure and procedure.get("sha256"):
        claim_text(app.store, name, holder, procedure["sha256"], message_id, wait=wait)
