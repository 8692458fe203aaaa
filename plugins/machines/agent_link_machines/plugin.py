"""The hook implementations of the machines plugin (entry point ``machines``).

Every agent-link process of a machine imports this module; with ``AGENT_LINK_ENGINE_URL``
unset every hook returns at once and the machine works alone, as without the plugin. With it
set, the hooks only touch the local database and the relay's files (no network):

* ``agent_link_record_event`` writes what another machine must learn (a message to one of
  its sessions, the resolution or delivery of a message that came from one) into the
  outbox table, in the same transaction as the change, so nothing acknowledged is lost
  between the commit and the engine; the relay (:mod:`agent_link_machines.relay`) sends it;
* ``agent_link_resolve_address`` pins a plain address listed by another machine to that
  machine (stored with the message as ``metadata.machines.to``, plus that machine's role
  rules as ``metadata.roleRules`` when the address holds a role there, which the roles plugin
  here applies: :func:`agent_link_machines.common.role_rules`), and a ``role:<name>`` that
  only another machine's session holds to that machine and holder,
  ``agent_link_resolve_elsewhere`` does the same for a session of a harness installed here
  too (a Codex thread on another machine), which the local harness then leaves alone;
* the ``machines`` harness lists the other machines' sessions (:mod:`.harness`);
* ``agent_link_session_roles`` adds the roles other machines' sessions hold there;
* ``agent_link_before_send`` warns, send by send, while ``AGENT_LINK_MACHINE`` is not a
  machine name (the mail stays here meanwhile), and of a plain address served on several
  machines (which one gets the message);
* ``agent_link_render_envelopes`` names the machine a message came from;
* ``agent_link_health`` shows the link;
* ``agent_link_server_tasks``: every MCP server keeps one relay running for its state dir
  (:mod:`.autostart`), unless ``AGENT_LINK_MACHINES_AUTOSTART`` is off; ``agent_link_on_event``
  starts one, when none runs, after a change that wrote the outbox (the CLI alone).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable

from agent_link_core import hookimpl
from agent_link_core.contribute import migrations, registers
from agent_link_core.harness_decl import HarnessDeclaration
from agent_link_core.json_files import dumps
from agent_link_core.store import Migration, now_ms

from agent_link_machines.common import (AUTOSTART_SETTING, MACHINE_SETTING, NAME, SETTINGS, URL_SETTING, machine_name, remote_addresses,
                                        served_here, shared_addresses)

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Mapping
    from typing import Any
    import click

    from agent_link_core.records import EnvelopeContribution, Event, OutgoingMessage
    from agent_link_core.app import App

MIGRATIONS = (
    Migration(NAME, 1, """
        CREATE TABLE machines_outbox (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            record_id TEXT NOT NULL UNIQUE, -- the engine's Nats-Msg-Id: one record, one id
            machine TEXT NOT NULL,          -- the machine it is for
            payload TEXT NOT NULL,          -- JSON (agent_link_machines.records)
            created_at INTEGER NOT NULL,    -- epoch ms
            sent_at INTEGER                 -- epoch ms the engine acknowledged it; NULL: still to send
        );
        CREATE INDEX machines_outbox_unsent ON machines_outbox (seq) WHERE sent_at IS NULL;
    """),
    Migration(NAME, 2, """
        -- local mail the relay sent on to the machine that listed its address later
        -- (agent_link_machines.records.forward_stranded): only that machine may answer it
        CREATE TABLE machines_forwarded (
            message_id TEXT PRIMARY KEY,
            machine TEXT NOT NULL,          -- the machine it was sent on to
            at INTEGER NOT NULL             -- epoch ms
        );
    """),
)

agent_link_register_settings = registers(SETTINGS)
agent_link_schema = migrations(MIGRATIONS)


#: ``event.notes`` key: this event wrote the outbox (agent_link_record_event -> agent_link_on_event)
OUTBOX_NOTE = "machines.outbox"
#: ``event.notes`` key: the outbox had no unsent row before this event's: the relay may be idle
WAKE_NOTE = "machines.wake"
#: ``event.notes`` key: a send stored as local mail to an address not served here (agent_link_on_event)
UNROUTED_NOTE = "machines.unrouted"


def _configured(app: Any) -> bool:
    return bool(app.config.get(URL_SETTING))


#: the ``machines`` harness as the core reads it without its code: built when a command lists
#: or resolves sessions (it never names the caller and delivers nothing itself)
HARNESS = HarnessDeclaration(NAME, "agent_link_machines.harness:MachinesHarness")


@hookimpl
def agent_link_register_harnesses(register: Callable[[HarnessDeclaration], None]) -> None:
    """The ``machines`` harness (declared: :data:`HARNESS`)."""
    register(HARNESS)


@hookimpl
def agent_link_register_commands(cli: click.Group) -> None:
    """``agent-link machines run|status|release``: declared here, imported when run."""
    from agent_link_core.contribute import command

    cli.add_command(command("machines", "agent_link_machines.cli:machines",
                            "Agents on several machines: run this machine's relay to the engine, show the link."))


@hookimpl
def agent_link_record_event(event: Event, conn: sqlite3.Connection, app: App) -> None:
    if not _configured(app) or event.message_id is None or event.kind not in ("sent", "resolved", "delivered"):
        return
    # the row a send is storing comes from the mailbox without a query (get_row)
    row = app.mailbox.get_row(event.message_id)
    if row is None:
        return
    if '"machines"' not in (row["metadata"] or ""):
        # neither pinned to nor arrived from another machine (metadata.machines): a resolution
        # or delivery stays here, and so does a send that answers nothing to an address no
        # other machine lists; decided without parsing the metadata (one own-mail send)
        if event.kind != "sent":
            return
        if not row["reply_to"] and row["recipient"] not in remote_addresses(app.config):
            _note_unrouted(event, conn, app, row)
            return
    from agent_link_machines.records import outgoing_records

    for record_id, machine, payload in outgoing_records(event.kind, event.message_id, event.data, conn, app.config, row):
        if OUTBOX_NOTE not in event.notes:
            # Rows still unsent before this one: the relay has not yet marked them sent, which
            # it can only do after this transaction (the write lock), and it reads the outbox
            # again after marking, so it finds this row without a wake-up. Else wake it.
            event.notes[WAKE_NOTE] = conn.execute("SELECT 1 FROM machines_outbox WHERE sent_at IS NULL LIMIT 1").fetchone() is None
        conn.execute(
            "INSERT OR IGNORE INTO machines_outbox (record_id, machine, payload, created_at) VALUES (?, ?, ?, ?)",
            (record_id, machine, dumps(payload, ensure_ascii=False), now_ms()),
        )
        event.notes[OUTBOX_NOTE] = True
    if event.kind == "sent" and OUTBOX_NOTE not in event.notes and '"machines"' not in (row["metadata"] or ""):
        _note_unrouted(event, conn, app, row)


def _note_unrouted(event: Event, conn: sqlite3.Connection, app: App, row: sqlite3.Row) -> None:
    """Note local mail to an address nobody serves here (:data:`UNROUTED_NOTE`): another
    machine may list it (or soon will), and only a relay finds out and sends it on
    (Relay.forward_stranded). Only autostart acts on the note (agent_link_on_event): without
    it, the query is not made."""
    if app.config.get(AUTOSTART_SETTING) and not served_here(conn, app.config, row["recipient"]):
        event.notes[UNROUTED_NOTE] = True


@hookimpl
def agent_link_on_event(event: Event, app: App) -> None:
    """Once a change that wrote the outbox is committed: wake the relay's outbox loop when
    the outbox had nothing unsent before (it waits on
    :func:`agent_link_machines.common.outbox_signal`, not on every commit of the database;
    while it is still sending it reads the outbox again anyway: a burst costs one wake-up,
    not one per send) and, with autostart on, start a relay if none runs
    (:func:`agent_link_machines.autostart.nudge_relay`: mail from the CLI alone goes out).
    A send stored as local mail to an address nobody serves here starts one too: its relay
    sends it on once the directory shows the address on another machine."""
    notes = event.notes
    if not notes:  # most events: nothing this plugin noted (agent_link_record_event)
        return
    if notes.get(UNROUTED_NOTE):
        if app.config.get(AUTOSTART_SETTING):
            from agent_link_machines.autostart import nudge_relay

            nudge_relay(app.config)
        return
    if not notes.get(OUTBOX_NOTE):
        return
    if notes.get(WAKE_NOTE):
        from agent_link_core.wake import notify
        from agent_link_machines.common import outbox_signal

        notify(outbox_signal(app.config))
    if app.config.get(AUTOSTART_SETTING):
        from agent_link_machines.autostart import nudge_relay

        nudge_relay(app.config)


#: the warning code of a send while ``AGENT_LINK_MACHINE`` is not a machine name
BAD_NAME_WARNING = "machines_bad_name"
#: the warning code of a send to a plain address served on several machines
SHARED_WARNING = "machines_address_shared"


@hookimpl
def agent_link_before_send(message: OutgoingMessage, app: App) -> list[dict[str, Any]] | None:
    """With the engine configured, one warning line (or none) for a send:

    * :data:`BAD_NAME_WARNING` while ``AGENT_LINK_MACHINE`` is not a machine name (the relay
      cannot start under that name, so the link is down). The send goes on: the message is
      stored here, and once the name is fixed the relay sends it on if another machine lists
      its recipient (:func:`agent_link_machines.records.forward_stranded`);
    * :data:`SHARED_WARNING` when the recipient, a plain address, is served on another
      machine and here too (the message stays here: local mail wins) or on several other
      machines (it goes to the one :func:`agent_link_machines.common.machine_of` picks: where
      that address was active last); ``details``: ``address``, ``machines`` serving it,
      ``deliveredOn``. A plain address names one agent: the sender learns the team reused one."""
    if not _configured(app):
        return None
    try:
        own = machine_name(app.config)  # a good name is checked once per process (lru_cache)
    except ValueError as exc:
        return [{"code": BAD_NAME_WARNING,
                 "message": f"{exc}: this machine is off the link; the message is kept here and goes to another machine "
                            "listing its recipient once the name is fixed.",
                 "details": {"setting": MACHINE_SETTING, "value": app.config.get(MACHINE_SETTING)}}]
    address = message.recipient
    chosen = remote_addresses(app.config).get(address)
    if chosen is None:
        return None
    pinned = (message.metadata.get("machines") or {}).get("to")
    others = shared_addresses(app.config).get(address) or [chosen]
    if pinned is None and served_here(app.store.conn, app.config, address):
        serving, on = sorted({own, *others}), own
    elif len(others) > 1 and pinned == chosen:
        serving, on = others, chosen
    else:
        return None
    return [{"code": SHARED_WARNING,
             "message": f"{address} is served on several machines ({', '.join(serving)}): this message goes to the one on {on}"
                        + (" (this machine)" if on == own else ", where it was active last")
                        + "; give each agent its own address.",
             "details": {"address": address, "machines": serving, "deliveredOn": on}}]


@hookimpl(tryfirst=True)  # before the roles plugin, which refuses a role nobody holds here
def agent_link_resolve_address(address: str, app: App) -> dict[str, Any] | None:
    if not _configured(app):
        return None
    if address.startswith("role:"):
        return _role_elsewhere(address, app)
    machine = remote_addresses(app.config).get(address)  # no other machine lists it: local mail, no query
    if machine is None:
        return None
    # served on this machine too (agent_link_presence): local mail
    if served_here(app.store.conn, app.config, address):
        return None
    return {"address": address, "via": None, "metadata": _pinned(app, machine, address), "served": True}


def _pinned(app: App, machine: str, address: str) -> dict[str, Any]:
    """The metadata of a message to ``address``, a session of ``machine``: pinned there, and
    with that machine's role rules when the session holds a role there (the roles plugin here
    applies them before anything is stored, as that machine would: :func:`.common.role_rules`)."""
    from agent_link_machines.common import ROLE_RULES_KEY, role_rules

    metadata: dict[str, Any] = {"machines": {"to": machine}}
    rules = role_rules(app.config, machine, address)
    if rules is not None:
        metadata[ROLE_RULES_KEY] = rules
    return metadata


def _role_elsewhere(address: str, app: App) -> dict[str, Any] | None:
    """``role:<name>`` held by a session of another machine and by none here: pinned to that
    machine as a send to the holder would be, with the role in the metadata as the roles
    plugin stores it (the envelope there names the role). A role held here stays the roles
    plugin's (None).

    :raises AgentLinkError: ``ambiguous`` when other machines list several holders.
    """
    from agent_link_machines.common import local_roles, role_elsewhere

    name = address[5:]
    remote = role_elsewhere(app.config, name)
    if not remote or local_roles(app).get(name):
        return None
    if len(remote) > 1:
        from agent_link_core.errors import AgentLinkError

        raise AgentLinkError("ambiguous", f"Several machines list holders of {address}.",
                             {"query": address, "candidates": [{"address": h, "machine": m} for m, h in remote]},
                             hint="Send to one of the candidates, or have the user keep a single holder of the role.")
    [(machine, holder)] = remote
    from agent_link_core.addresses import address_scheme

    # "machine" (agent_link_roles.api.REMOTE_HOLDER_KEY): the roles plugin here attaches no
    # procedure; the holder's machine attaches its own when the message arrives there
    metadata: dict[str, Any] = {"role": {"name": name, "holder": holder, "machine": machine}, "machines": {"to": machine}}
    if address_scheme(holder) in app.harnesses:
        metadata["elsewhere"] = True  # a session of a harness installed here too: that harness leaves it alone
    return {"address": holder, "via": address, "metadata": metadata, "served": True}


@hookimpl
def agent_link_session_roles(addresses: list[str], app: App) -> dict[str, list[str]] | None:
    """The roles other machines say the listed sessions hold there (their directory entries),
    so a listing here shows the roles of another machine's sessions too; None when the engine
    is not configured."""
    if not _configured(app):
        return None
    from agent_link_machines.common import roles_of_others

    wanted = set(addresses)
    held: dict[str, list[str]] = {}
    for roles in roles_of_others(app.config).values():
        for name, holders in roles.items():
            for holder in holders:
                if holder in wanted:
                    held.setdefault(holder, []).append(name)
    return {address: sorted(set(names)) for address, names in held.items()}


@hookimpl
def agent_link_resolve_elsewhere(address: str, app: App) -> dict[str, Any] | None:
    """A session of a harness installed here that another machine lists (a Codex thread, a
    Claude Code session over there): pinned to that machine; the relay carries it and that
    machine's harness delivers it."""
    if not _configured(app):
        return None
    from agent_link_machines.common import listed_session

    found = listed_session(app.config, address)
    if found is None:
        return None
    machine, view = found
    return {"metadata": _pinned(app, machine, address), "session": view}


@hookimpl
def agent_link_render_envelopes(messages: tuple[Mapping[str, Any], ...]) -> dict[str, EnvelopeContribution] | None:
    origins = {m["id"]: origin for m in messages if (origin := ((m.get("metadata") or {}).get("machines") or {}).get("origin"))}
    if not origins:
        return None
    from agent_link_core.envelope import render_element
    from agent_link_core.records import EnvelopeContribution

    # fromVerified is what the sending machine attested; this says which machine that was
    return {mid: EnvelopeContribution(elements=[render_element("machine", [("from", str(origin))])]) for mid, origin in origins.items()}


@hookimpl
def agent_link_health(app: App) -> tuple[str, dict[str, Any]]:
    from agent_link_machines.status import health_section

    return NAME, health_section(app)


@hookimpl
def agent_link_server_tasks(app: App) -> list[Callable[[], Awaitable[None]]] | None:
    """With the engine configured and autostart on: keep this state dir's relay running
    while the server runs (:func:`agent_link_machines.autostart.keep_relay`)."""
    if not _configured(app) or not app.config.get(AUTOSTART_SETTING):
        return None
    from agent_link_machines.autostart import keep_relay

    return [lambda: keep_relay(app)]
