"""Entry point of the agent-link receipts plugin, registered under the ``agent_link`` group.

Hooks:

* ``agent_link_before_send``: stores what the receipt of a message needs with the message
  (``metadata.receipt``: purpose, tags, cleanup recommendation, origin, tool), or
  ``{"record": false}`` when the call's ``receipt.record`` is false; the send result gets
  ``receipt: {record, recorded, id}``;
* ``agent_link_on_event``: writes one receipt per event (see
  :mod:`agent_link_receipts.build`); a failure is logged by the core and never undoes the
  change it reports;
* ``agent_link_register_panels``: the Receipts section of the web page;
* the list tool, the ``receipts`` CLI group, settings, schema and the ``receipts`` health section.

Receipts are written by the process that makes the change; the host hooks' fast path loads no
plugins, so reminders recorded by a host hook get no receipt.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import click

from agent_link_core import hookimpl
from agent_link_core.contribute import migrations, registers
from agent_link_core.mailbox import Event, Mailbox, OutgoingMessage, SendContext
from agent_link_core.model import Caller, address_scheme, is_address

from agent_link_receipts import cli as receipts_cli
from agent_link_receipts.build import LIFECYCLE_KINDS, event_key, harness_receipt, message_receipt, send_fields
from agent_link_receipts.context import INFER_SETTING, LOG_SETTING, MIGRATIONS, SETTINGS
from agent_link_receipts.ledger import append_log, insert_receipts
from agent_link_receipts.origin import compute_origin
from agent_link_receipts.panel import PANEL
from agent_link_receipts.tools import RECEIPT_TOOLS

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App

log = logging.getLogger(__name__)


agent_link_register_settings = registers(SETTINGS)
agent_link_schema = migrations(MIGRATIONS)
agent_link_register_tools = registers(RECEIPT_TOOLS)


agent_link_register_panels = registers([PANEL])


@hookimpl
def agent_link_register_commands(cli: click.Group) -> None:
    receipts_cli.register(cli)


@hookimpl
def agent_link_before_send(message: OutgoingMessage, context: SendContext, app: App) -> list[dict[str, Any]] | None:
    given = context.arguments.get("receipt") or {}
    if given.get("record") is False:
        message.metadata["receipt"] = {"record": False}
        context.result["receipt"] = {"record": False, "recorded": False, "id": None}
        return None
    fields = send_fields(context.arguments)
    fields["origin"] = compute_origin(given, message.sender, context.meta, app.env,
                                      infer_from_env=bool(app.config.get(INFER_SETTING)))
    fields["tool"] = context.tool
    message.metadata["receipt"] = fields
    # Settled by the "sent" event: "recorded" stays false if writing the receipt fails.
    # Completed by the "sent" event once the receipt is recorded.
    context.result["receipt"] = {"record": True, "recorded": False, "id": None}
    return None


@hookimpl
def agent_link_on_event(event: Event, app: App) -> None:
    host = app.config.get("AGENT_LINK_HOST") or (address_scheme(event.actor) if is_address(event.actor) else None)
    row = None
    if event.message_id is not None and (event.kind == "sent" or event.kind in LIFECYCLE_KINDS):
        row = app.mailbox.get_row(event.message_id)
    kinds = {name: h.session_kind or name for name, h in app.harnesses.items()}
    if row is None and "caller" in event.data:
        event = _with_origin(event, app)
    receipt = message_receipt(event, Mailbox.row_dict(row), host, kinds) if row is not None else harness_receipt(event, host, kinds)
    if receipt is None:
        return
    stored = insert_receipts(app.store, [(receipt, event_key(event, receipt))])
    if stored and event.result is not None and isinstance(event.result.get("receipt"), dict):
        # a send in progress, or a harness action (launch, archive) waiting for its receipt id
        event.result["receipt"].update(recorded=True, id=receipt["id"])
    log_path = app.config.get(LOG_SETTING)
    if stored and log_path:
        try:
            append_log(log_path, stored)
        except OSError:  # the database already holds the receipt; the copy is a convenience
            log.exception("could not append to the receipt log %s", log_path)


def _with_origin(event: Event, app: App) -> Event:
    """A harness event that passed the ``caller`` (and ``meta``) of its tool call instead of an
    origin: compute the origin as a send's (same sources, same labels)."""
    data = dict(event.data)
    caller, meta = data.pop("caller"), data.pop("meta", None) or {}
    if data.get("origin") is None and isinstance(caller, Caller):
        data["origin"] = compute_origin(data.get("receipt") or {}, caller, meta, app.env,
                                        infer_from_env=bool(app.config.get(INFER_SETTING)))
    return Event(event.kind, event.message_id, event.at_ms, event.actor, data, event.result)


@hookimpl
def agent_link_health(app: App) -> tuple[str, dict[str, Any]]:
    count = app.store.conn.execute("SELECT COUNT(*) FROM receipts").fetchone()[0]
    return "receipts", {
        "path": str(app.store.path),
        "format": "sqlite",
        "version": 1,
        "count": int(count),
        "log": app.config.get(LOG_SETTING),
        "logSource": app.config.sources.get(LOG_SETTING, "default"),
        "inferOrigin": bool(app.config.get(INFER_SETTING)),
    }
