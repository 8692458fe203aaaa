"""Entry point of the agent-link receipts plugin, registered under the ``agent_link`` group.

Hooks:

* ``agent_link_before_send``: stores what the receipt of a message needs with the message
  (``metadata.receipt``: purpose, tags, cleanup recommendation, origin, tool), or
  ``{"record": false}`` when the call's ``receipt.record`` is false; the send result gets
  ``receipt: {record, recorded, id}``;
* ``agent_link_record_event``: writes one receipt per event (see
  :mod:`agent_link_receipts.build`) in the transaction of the change it records, so a crash
  never leaves a message without its receipt; a failure is logged by the core and never
  undoes the change;
* ``agent_link_on_event``: after the commit, appends the new receipts to the JSONL copy
  (``AGENT_LINK_RECEIPT_LOG``); a path it cannot write is one warning line, never a traceback;
* ``agent_link_register_panels``: the Receipts section of the web page;
* the list tool, the ``receipts`` CLI group, settings, schema and the ``receipts`` health section.

Receipts are written by the process that makes the change. The host hooks' fast path loads no
plugins: the receipts of reminders it records are written from ``message_events`` before
receipts are next read (:mod:`agent_link_receipts.recording`).
"""

from __future__ import annotations


from agent_link_core import hookimpl
from agent_link_core.contribute import migrations, registers
from agent_link_core.lazy import LazyLogger

from agent_link_receipts.context import INFER_SETTING, LOG_SETTING, MIGRATIONS, SETTINGS

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any
    import click
    from agent_link_core.app import App
    from agent_link_core.records import Event, OutgoingMessage, SendContext

log = LazyLogger(__name__)


agent_link_register_settings = registers(SETTINGS)
agent_link_schema = migrations(MIGRATIONS)
#: the list tool and the web page's Receipts section: their modules load when they are listed
agent_link_register_tools = registers("agent_link_receipts.tools:RECEIPT_TOOLS")
agent_link_register_panels = registers("agent_link_receipts.panel:PANELS", optionalhook=True)  # the web plugin's hook


@hookimpl
def agent_link_register_commands(cli: click.Group) -> None:
    from agent_link_core.contribute import command

    cli.add_command(command("receipts", "agent_link_receipts.cli:command_group",
                            "List audit receipts of what you sent or received, newest first.", reader=True))


@hookimpl
def agent_link_before_send(message: OutgoingMessage, context: SendContext, app: App) -> list[dict[str, Any]] | None:
    given = context.arguments.get("receipt") or {}
    if given.get("record") is False:
        message.metadata["receipt"] = {"record": False}
        context.result["receipt"] = {"record": False, "recorded": False, "id": None}
        return None
    from agent_link_receipts.build import send_fields
    from agent_link_receipts.origin import compute_origin

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
def agent_link_record_event(event: Event, app: App) -> None:
    # In the transaction of the change: a crash can never leave a message without its receipt.
    from agent_link_receipts.recording import record

    stored = record(app, event)
    if stored and event.result is not None and isinstance(event.result.get("receipt"), dict):
        # a send in progress, or a harness action (launch, archive) waiting for its receipt id
        event.result["receipt"].update(recorded=True, id=stored[0]["id"])
    event.notes["receipts"] = stored


@hookimpl
def agent_link_on_event(event: Event, app: App) -> None:
    # After the commit: the optional JSONL copy of what the transaction stored. An event that
    # no transaction staged (a harness reporting a launch) gets its receipt now.
    if "receipts" not in event.notes:
        agent_link_record_event(event, app)
    stored = event.notes.get("receipts")
    log_path = app.config.get(LOG_SETTING)
    if stored and log_path:
        from agent_link_receipts.ledger import append_log

        try:
            append_log(log_path, stored)
        except OSError as exc:  # the database already holds the receipt; the copy is a convenience
            log.warning("agent-link: could not append to the receipt log %s (%s): %s; fix or unset %s",
                        log_path, LOG_SETTING, exc.strerror or exc, LOG_SETTING)


@hookimpl
def agent_link_health(app: App) -> tuple[str, dict[str, Any]]:
    from agent_link_receipts.recording import repair

    repair(app)
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


@hookimpl(optionalhook=True)  # the legacy plugin's hook
def agent_link_register_legacy_importers(register: Any) -> None:
    """The original's receipt logs (``agent-link import-legacy``)."""
    from agent_link_receipts.legacy import ReceiptsImporter

    register(ReceiptsImporter())
