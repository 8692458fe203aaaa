"""Writing receipts: one per event, in the transaction of the change, and the repair of
receipts a process without plugins could not write.

The host hooks' fast path loads no plugins, so a reminder it records has a ``message_events``
row but no receipt. :func:`repair` writes those from ``message_events`` (only kinds with an
event key, so a receipt is never written twice) before receipts are read: listing, export and
health always see every receipt.
"""

from __future__ import annotations

import json

from agent_link_core.errors import AgentLinkError
from agent_link_core.lazy import LazyLogger
from agent_link_core.mailbox import STATUS_BY_KIND, Mailbox
from agent_link_core.records import Event
from agent_link_core.store import disk_full
from agent_link_core.model import Caller, address_scheme, is_address

from agent_link_receipts.build import LIFECYCLE_KINDS, event_key, harness_receipt, message_receipt
from agent_link_receipts.context import INFER_SETTING
from agent_link_receipts.ledger import insert_receipts
from agent_link_receipts.origin import compute_origin

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any
    from agent_link_core.app import App

log = LazyLogger(__name__)

# Event kinds whose receipts carry an event key (see build.event_key): safe to write again.
REPAIRABLE_KINDS = ("sent", "resolved", "reminded", "status_changed")


def record(app: App, event: Event) -> list[dict[str, Any]]:
    """Build and store the receipt of ``event`` (in the caller's transaction when there is
    one); returns what was stored (nothing for ``receipt.record: false`` or a duplicate)."""
    host = app.config.get("AGENT_LINK_HOST") or (address_scheme(event.actor) if event.actor and is_address(event.actor) else None)
    row = None
    if event.message_id is not None and (event.kind == "sent" or event.kind in LIFECYCLE_KINDS):
        row = app.mailbox.get_row(event.message_id)  # the same connection: sees an uncommitted row
    kinds = {name: h.session_kind or name for name, h in app.harnesses.declared().items()}  # none built for this
    if row is None and "caller" in event.data:
        event = _with_origin(event, app)
    receipt = message_receipt(event, Mailbox.row_dict(row), host, kinds) if row is not None else harness_receipt(event, host, kinds)
    if receipt is None:
        return []
    return insert_receipts(app.store, [(receipt, event_key(event, receipt))])


def _with_origin(event: Event, app: App) -> Event:
    """A harness event that passed the ``caller`` (and ``meta``) of its tool call instead of an
    origin: compute the origin as a send's (same sources, same labels)."""
    data = dict(event.data)
    caller, meta = data.pop("caller"), data.pop("meta", None) or {}
    if data.get("origin") is None and isinstance(caller, Caller):
        data["origin"] = compute_origin(data.get("receipt") or {}, caller, meta, app.env,
                                        infer_from_env=bool(app.config.get(INFER_SETTING)))
    return Event(event.kind, event.message_id, event.at_ms, event.actor, data, event.result)


def _event_from_row(row: Any) -> Event:
    data = json.loads(row["data"] or "{}")
    if row["kind"] == "reminded":
        data["via"] = row["via"]
    elif row["kind"] == "resolved":
        data["status"] = STATUS_BY_KIND.get(data.get("kind"), data.get("kind"))
    return Event(row["kind"], row["message_id"], row["at"], row["actor"], data)


def repair(app: App) -> int:
    """Write the receipts missing for ``message_events`` since the last repair; returns how
    many were written. A database that refuses writes (busy, damaged, opened read-only) is left
    for later: the repair does not wait for another process's write lock. Opened read-only or
    on a full disk (health reports why), it is not tried."""
    if app.read_only is not None:
        return 0
    conn = app.store.conn
    last = conn.execute("SELECT last_seq FROM receipts_repair WHERE id = 1").fetchone()
    newest = app.mailbox.last_event_seq()
    if last is None or newest <= last[0] or disk_full(app.store.path):
        return 0
    written = 0
    try:
        with app.store.write(wait=False) as tx:  # called by reads: never wait on a writer
            for row in conn.execute(  # what a process without plugins recorded, oldest first
                    f"SELECT * FROM message_events WHERE seq > ? AND seq <= ? AND kind IN ({', '.join('?' * len(REPAIRABLE_KINDS))})"
                    " ORDER BY seq", (last[0], newest, *REPAIRABLE_KINDS)):
                written += len(record(app, _event_from_row(row)))
            tx.execute("UPDATE receipts_repair SET last_seq = MAX(last_seq, ?) WHERE id = 1", (newest,))
    except AgentLinkError as exc:
        log.warning("agent-link: receipts not repaired now: %s", exc.message)
    return written
