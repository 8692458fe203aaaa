"""The import itself: ``agent-link import-legacy`` folds the original Agent Link's files into
the database (docs/legacy.md).

The importers' contract (:class:`~agent_link_legacy.contract.LegacyImporter`, the context and
the outcome they fill) is :mod:`agent_link_legacy.contract`; this module holds the importer of the original's own
mailbox (:class:`MailboxImporter`, which harness plugins reuse for their host's older paths)
and :func:`import_legacy`, which drives every plugin's importers:

* everything runs in one write transaction, each importer in a savepoint of it, so an
  importer that raises is undone alone and reported, and ``--dry-run`` is the same run rolled
  back at the end (its counts are exact);
* records keep their original ids, so a record met again is *already present*, never a
  duplicate: a second run changes nothing;
* the original files are only read, never written, moved or deleted;
* each file read in full is recorded (path, size, mtime) in ``legacy_imports``, which
  ``agent-link health`` shows as ``legacyState``.
"""

from __future__ import annotations

import json
import os
import sqlite3
from typing import TYPE_CHECKING, Any, Callable

from agent_link_core.addresses import ANTICIPATIONS, EXTERNAL, is_address
from agent_link_core.envelope import MAX_BODY_BYTES
from agent_link_core.errors import AgentLinkError
from agent_link_legacy.contract import (
    RESOLUTION_KINDS,
    SENDER_SOURCES,
    LegacyContext,
    LegacyImporter,
    LegacyOutcome,
    existing,
    importers,
    ulid_upper,
)
from agent_link_core.store import now_ms

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App


# -- the mailbox ---------------------------------------------------------------------------


class MailboxImporter(LegacyImporter):
    """The original's JSONL mailbox: messages with their delivery, resolution and reminders.

    :param name: the importer's name (``mailbox`` for the core's; a plugin adding older
        paths registers its own instance under another name).
    :param paths: ``ctx -> [path, ...]`` of the mailbox files it reads.
    :param order: see :attr:`LegacyImporter.order`.

    Folding follows the original (docs/legacy.md): messages by id, the first copy wins;
    ``delivered``/``released``/``acknowledged``/``resolved``/``reminded`` events in file
    order; reminder claim files beside the mailbox add reminders the events lack. Rows are
    written straight into the core's tables, without events to observers: importing is not
    sending, so no receipt or push follows.
    """

    def __init__(self, name: str, paths: Callable[[LegacyContext], list[str]], order: int = 50) -> None:
        self.name = name
        self.order = order
        self._paths = paths

    def paths(self, ctx: LegacyContext) -> list[str]:
        return self._paths(ctx)

    def own_paths(self, ctx: LegacyContext) -> list[str]:
        # AGENT_LINK_MAILBOX_PATH named the original's JSONL mailbox; here it names the database
        return [ctx.app.config.db_path]

    def run(self, ctx: LegacyContext, outcome: LegacyOutcome) -> None:
        own = {os.path.realpath(p) for p in self.own_paths(ctx)}
        for path in existing(self.paths(ctx)):
            if os.path.realpath(path) in own:
                outcome.notes.append(f"{path} is agent-link's own database, not a mailbox of the original; skipped.")
                continue
            try:
                self._import_file(ctx, path, outcome)
            except OSError as exc:
                outcome.bad(path, None, f"cannot be read: {exc.strerror or exc}")
                continue
            outcome.files.append(path)

    def _import_file(self, ctx: LegacyContext, path: str, outcome: LegacyOutcome) -> None:
        conn = ctx.conn
        rows: dict[str, dict[str, Any]] = {}
        seen: set[str] = set()
        lines: dict[str, int] = {}
        events: list[tuple[int, dict[str, Any]]] = []
        for lineno, obj in ctx.read_jsonl(path, outcome):
            kind = obj.get("type")
            if kind == "message":
                try:
                    row = message_row(ctx, obj)
                except ValueError as exc:
                    outcome.bad(path, lineno, str(exc))
                    continue
                if row["id"] in seen:
                    outcome.count("duplicateLines")  # the first copy wins
                    continue
                seen.add(row["id"])
                # stored before, or by an earlier file of this run: present either way, so a
                # first run and a second one count it alike
                if row["id"] in ctx.new_messages or conn.execute("SELECT 1 FROM messages WHERE id = ?", (row["id"],)).fetchone():
                    outcome.present += 1
                    continue
                rows[row["id"]] = row
                lines[row["id"]] = lineno
            elif kind in ("delivered", "acknowledged", "released", "resolved", "reminded"):
                events.append((lineno, obj))
            else:
                outcome.bad(path, lineno, f"unknown event type {kind!r}")
        folded = {mid: _Fold(row) for mid, row in rows.items()}
        for mid in ctx.new_messages:  # stored by an earlier file of this run: its events may be here
            if mid not in folded:
                stored = conn.execute("SELECT * FROM messages WHERE id = ?", (mid,)).fetchone()
                if stored is not None:
                    folded[mid] = _Fold(dict(stored), stored=True)
        for lineno, obj in events:
            event_mid = ulid_upper(obj.get("messageId"))
            target = folded.get(event_mid) if event_mid is not None else None
            if target is None:
                outcome.count("eventsSkipped")  # a message stored before this run, or never seen
                continue
            try:
                target.apply(ctx, obj)
            except ValueError as exc:
                outcome.bad(path, lineno, str(exc))
                continue
            outcome.count("events")
        _claim_reminders(path, folded)
        for fold in folded.values():
            try:
                with ctx.app.store.write():  # a savepoint: a message SQLite refuses is left out alone
                    fold.write(conn)
            except (sqlite3.Error, ValueError) as exc:
                outcome.bad(path, None, f"message {fold.row['id']} could not be stored: {exc}")
                continue
            if not fold.stored:
                ctx.new_messages.add(fold.row["id"])
                outcome.imported += 1
                if fold.row["body_bytes"] > MAX_BODY_BYTES:
                    outcome.flag(path, lines.get(fold.row["id"]), "bodiesCutOnReading",
                                 f"message {fold.row['id']}: imported, but its body of {fold.row['body_bytes']} bytes is cut to"
                                 f" {MAX_BODY_BYTES} bytes on reading")


def _ms(value: object) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and abs(value) < 1e15 else None


def message_row(ctx: LegacyContext, event: dict[str, Any]) -> dict[str, Any]:
    """A ``messages`` row from the original's ``message`` event.

    :raises ValueError: the message has no valid id, body or recipient (the line is bad).
    """
    import hashlib

    msg = event.get("message")
    if not isinstance(msg, dict):
        raise ValueError("a message event without its message object")
    mid = ulid_upper(msg.get("id"))
    if mid is None:
        raise ValueError(f"message id {msg.get('id')!r} is not a ULID")
    body = msg.get("body")
    if not isinstance(body, str):
        raise ValueError(f"message {mid} has no text body")
    recipient = ctx.address(msg.get("to_session_id"), msg.get("to_session_kind"))
    if recipient is None or recipient == EXTERNAL:
        raise ValueError(f"message {mid}: recipient {msg.get('to_session_id')!r} is not a session agent-link can address")
    sender = ctx.address(msg.get("from_session_id"), msg.get("from_session_kind")) or EXTERNAL
    try:
        meta = json.loads(msg["metadata_json"]) if isinstance(msg.get("metadata_json"), str) else {}
    except ValueError:
        meta = {}
    meta = meta if isinstance(meta, dict) else {}
    claimed = meta.get("sender", {}).get("source") if isinstance(meta.get("sender"), dict) else None
    source = claimed if claimed in SENDER_SOURCES else "fallback"
    # nothing proves now which process wrote an imported message (agent_link_core.identity)
    meta["sender"] = {"source": source, "verified": False}
    meta["imported"] = {"from": "legacy-mailbox"}
    role = meta.get("role") if isinstance(meta.get("role"), dict) else {}
    to_addr = role["via"] if isinstance(role.get("via"), str) and role["via"].startswith("role:") and is_address(role["via"]) else recipient
    anticipation = msg.get("anticipation") if msg.get("anticipation") in ANTICIPATIONS else "fyi"
    sent_at = _ms(msg.get("sent_at"))
    sent_at = sent_at if sent_at is not None else (_ms(event.get("at")) or 0)
    raw_reply = msg.get("reply_to_message_id")
    reply_to = ulid_upper(raw_reply) or raw_reply if isinstance(raw_reply, str) else None
    reply_by = _ms(msg.get("reply_by"))
    blob = json.dumps([sender, to_addr, body, anticipation, reply_by, reply_to], ensure_ascii=False, sort_keys=True)
    return {
        "id": mid, "from_addr": sender, "from_source": source, "to_addr": to_addr, "recipient": recipient,
        "body": body, "body_bytes": len(body.encode("utf-8", "surrogatepass")),
        "content_hash": hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest(),
        "metadata": meta, "sent_at": sent_at, "anticipation": anticipation, "reply_by": reply_by, "reply_to": reply_to,
        "raw_to": msg.get("to_session_id"),
    }


class _Fold:
    """One message's state while its events are applied (docs/legacy.md, folding)."""

    def __init__(self, row: dict[str, Any], *, stored: bool = False) -> None:
        self.row = row
        self.stored = stored
        self.deliveries: list[tuple[str | None, int]] = []
        self.first_delivered_at = row.get("first_delivered_at")
        self.delivered_at = row.get("delivered_at")
        self.delivered_via = row.get("delivered_via")
        self.acknowledged_at = row.get("acknowledged_at")
        self.resolution: dict[str, Any] | None = None
        self.reminders: dict[int, tuple[int, str | None, str | None]] = {}
        self.events: list[tuple[str, int, str | None, str | None, dict[str, Any]]] = []

    def apply(self, ctx: LegacyContext, event: dict[str, Any]) -> None:
        kind = event["type"]
        at = _ms(event.get("at"))
        if at is None:
            raise ValueError(f"{kind} event without a time")
        to = ctx.address(event.get("to")) if event.get("to") is not None else None
        if kind == "delivered":
            via = event.get("via") if isinstance(event.get("via"), str) else "legacy"
            self.deliveries.append((to, at))
            self.delivered_at, self.delivered_via = at, via
            if self.first_delivered_at is None:
                self.first_delivered_at = at
            self.events.append(("delivered", at, to or self.row["recipient"], via, {"imported": True}))
        elif kind == "acknowledged":
            self.acknowledged_at = at
        elif kind == "released":
            for i in range(len(self.deliveries) - 1, -1, -1):
                if self.deliveries[i][0] == to:
                    del self.deliveries[i]
                    break
            if not self.deliveries:
                self.delivered_at = None
                if not self.reminders:
                    self.first_delivered_at = None
            else:
                self.delivered_at = self.deliveries[-1][1]
            self.events.append(("released", at, to, None, {"imported": True}))
        elif kind == "resolved":
            # the first trusted resolution wins: a valid kind, by the stored recipient
            if self.resolution is None and event.get("kind") in RESOLUTION_KINDS and event.get("by") == self.row.get("raw_to", event.get("by")):
                by = ctx.address(event.get("byAddress")) or ctx.address(event.get("by")) or self.row["recipient"]
                raw_reply = event.get("replyMessageId")
                reply = ulid_upper(raw_reply) or raw_reply if isinstance(raw_reply, str) else None
                self.resolution = {"kind": event["kind"], "by": by, "at": at, "late": 1 if event.get("late") is True else 0,
                                   "reply": reply}
                self.events.append(("resolved", at, by, None, {"kind": event["kind"], "imported": True}))
        elif kind == "reminded":
            n = event.get("n")
            if isinstance(n, int) and not isinstance(n, bool) and n > 0 and n not in self.reminders:
                self.reminders[n] = (at, event.get("via") if isinstance(event.get("via"), str) else None, to)

    def write(self, conn: sqlite3.Connection) -> None:
        r = self.row
        mid = r["id"]
        if not self.stored:
            conn.execute(
                "INSERT INTO messages (id, from_addr, from_source, to_addr, recipient, body, body_bytes, content_hash,"
                " metadata, sent_at, anticipation, reply_by, reply_to, open) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)",
                (mid, r["from_addr"], r["from_source"], r["to_addr"], r["recipient"], r["body"], r["body_bytes"],
                 r["content_hash"], json.dumps(r["metadata"], ensure_ascii=False), r["sent_at"], r["anticipation"],
                 r["reply_by"], r["reply_to"]),
            )
            conn.execute("INSERT INTO message_events (message_id, kind, at, actor, via, data) VALUES (?, 'sent', ?, ?, NULL, ?)",
                         (mid, r["sent_at"], r["from_addr"], json.dumps({"to": r["recipient"], "imported": True})))
        for kind, at, actor, via, data in self.events:
            conn.execute("INSERT INTO message_events (message_id, kind, at, actor, via, data) VALUES (?, ?, ?, ?, ?, ?)",
                         (mid, kind, at, actor, via, json.dumps(data)))
        res = self.resolution
        if res is not None:
            conn.execute("INSERT OR IGNORE INTO resolutions (message_id, kind, by_addr, at, late, reason, reply_message_id)"
                         " VALUES (?, ?, ?, ?, ?, NULL, ?)", (mid, res["kind"], res["by"], res["at"], res["late"], res["reply"]))
        for n, (at, via, to) in sorted(self.reminders.items()):
            conn.execute("INSERT OR IGNORE INTO reminders (message_id, n, at, via, to_addr) VALUES (?, ?, ?, ?, ?)",
                         (mid, n, at, via, to or r["recipient"]))
        resolved = conn.execute("SELECT 1 FROM resolutions WHERE message_id = ?", (mid,)).fetchone() is not None
        delivered = self.delivered_at if self.delivered_at is not None else (res["at"] if res is not None else None)
        first = self.first_delivered_at if self.first_delivered_at is not None else delivered
        still_open = 0 if delivered is not None and (r["anticipation"] == "fyi" or resolved) else 1
        conn.execute("UPDATE messages SET delivered_at = ?, first_delivered_at = ?, delivered_via = ?, acknowledged_at = ?,"
                     " open = ? WHERE id = ?",
                     (delivered, first, self.delivered_via if delivered is not None else None, self.acknowledged_at, still_open, mid))


def _claim_reminders(mailbox_path: str, folded: dict[str, _Fold]) -> None:
    """Reminders recorded only as claim files ``<mailbox>.claims/reminder-<id>-<n>`` (the
    original's source of truth for them), at the file's mtime."""
    import re

    folder = mailbox_path + ".claims"
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        m = re.fullmatch(r"reminder-([0-9A-Za-z]{26})-(\d{1,3})", name)
        fold = folded.get(m.group(1).upper()) if m else None
        if fold is None or m is None:
            continue
        n = int(m.group(2))
        if n > 0 and n not in fold.reminders:
            try:
                at = int(os.stat(os.path.join(folder, name)).st_mtime * 1000)
            except OSError:
                continue
            fold.reminders[n] = (at, None, None)


def core_mailbox_paths(ctx: LegacyContext) -> list[str]:
    """The original's own mailbox: ``<state dir>/mailbox.jsonl``."""
    return [os.path.join(ctx.source_dir, "mailbox.jsonl")]


# -- the driver ----------------------------------------------------------------------------


class _DryRun(Exception):
    """Rolls the whole import back after counting (``--dry-run``)."""


def import_legacy(app: App, *, dry_run: bool = False, source_dir: str | None = None) -> dict[str, Any]:
    """Import the original's state found in ``source_dir`` (default: the state dir).

    Each importer runs in a savepoint of the one write transaction, under :class:`_Guard`:
    it may not end that transaction or its savepoint. It fails (its writes undone, the others
    kept) when it raises anything but ``KeyboardInterrupt``, tries to, or leaves an outcome
    that is not counts (:func:`_outcome_problem`).

    :returns: ``{dryRun, sourceDir, importers: [LegacyOutcome.as_dict()], failed: [names],
        totals: {imported, alreadyPresent, unreadable}}``.
    :raises AgentLinkError: ``invalid_arguments`` when ``source_dir`` is given but empty or
        not a directory; what the store raises (``state_busy``, ``state_io_error``).
    """
    if source_dir is not None and not source_dir.strip():
        raise AgentLinkError("invalid_arguments", "--from names no directory (an empty path)",
                             details={"errors": [{"path": "from", "message": "empty"}]})
    source = os.path.abspath(os.path.expanduser(source_dir or app.config.state_dir))
    if source_dir is not None and not os.path.isdir(source):
        raise AgentLinkError("invalid_arguments", f"--from {source}: no such directory",
                             details={"errors": [{"path": "from", "message": "not a directory"}]})
    plugged = importers(app)
    outcomes: list[LegacyOutcome] = []
    try:
        with app.store.write() as conn:
            ctx = LegacyContext(app, source, conn, [i for _, i in plugged], dry_run=dry_run)
            for plugin, importer in plugged:
                outcome = LegacyOutcome(importer.name)
                outcomes.append(outcome)
                try:
                    with app.store.write():  # a savepoint: a failing importer is undone alone
                        guard = _Guard(app.store._savepoints)
                        conn.set_authorizer(guard)
                        try:
                            importer.run(ctx, outcome)
                        finally:
                            conn.set_authorizer(None)
                        if guard.refused:
                            raise _ImporterFailed(f"it tried to end the import's transaction ({guard.refused}); importers"
                                                  " write inside it and never commit, roll back or release it")
                        problem = _outcome_problem(outcome)
                        if problem:
                            raise _ImporterFailed(f"it left an outcome that is not counts: {problem}")
                except KeyboardInterrupt:
                    raise
                except BaseException as exc:  # noqa: BLE001 - any failure (SystemExit too) is this importer's, reported
                    if not conn.in_transaction:  # the guard was taken off and the run's transaction ended
                        raise AgentLinkError(
                            "internal_error", f"the {importer.name} legacy importer ({plugin} plugin) ended the import's"
                            " transaction; what was written before that is kept, the rest was not imported",
                            hint=f"Leave out the {plugin} plugin (AGENT_LINK_DISABLE_PLUGINS) and run import-legacy again.",
                        ) from exc
                    reason = str(exc) if isinstance(exc, _ImporterFailed) else f"{type(exc).__name__}: {exc}"
                    _reset(outcome)
                    outcome.error = reason[:300]
                    outcome.notes.append(f"Nothing of this kind was imported (the {plugin} plugin's importer failed).")
                    continue
                if not dry_run:
                    _record_files(conn, importer.name, outcome)
            if dry_run:
                raise _DryRun
    except _DryRun:
        pass
    views = [o.as_dict() for o in outcomes]
    return {
        "dryRun": dry_run,
        "sourceDir": source,
        "importers": views,
        "failed": [o.name for o in outcomes if o.error is not None],
        "totals": {key: sum(v[key] for v in views) for key in ("imported", "alreadyPresent", "unreadable")},
    }


class _ImporterFailed(Exception):
    """An importer broke the rules of :func:`import_legacy` (its message is the reason)."""


class _Guard:
    """An SQLite authorizer (``Connection.set_authorizer``) for the time an importer runs: it
    refuses ``BEGIN``/``COMMIT``/``ROLLBACK`` (which would end the run's transaction, so a dry
    run would write) and every savepoint operation except on the store's own nested
    savepoints (``agent_link_<n>``, ``n`` above ``depth``, which ``store.write()`` inside an
    importer makes).

    :param depth: the number of the importer's own savepoint.
    """

    def __init__(self, depth: int) -> None:
        self.depth = depth
        self.refused: str | None = None  # the first statement refused, for the report

    def __call__(self, action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None) -> int:
        if action == sqlite3.SQLITE_TRANSACTION:
            return self._refuse(str(arg1))
        if action == sqlite3.SQLITE_SAVEPOINT:
            name = arg2 or ""
            number = name[len("agent_link_"):] if name.startswith("agent_link_") else ""
            if not (number.isdigit() and int(number) > self.depth):
                return self._refuse(f"{arg1} {name}".strip())
        return sqlite3.SQLITE_OK

    def _refuse(self, what: str) -> int:
        self.refused = self.refused or what
        return sqlite3.SQLITE_DENY


def _outcome_problem(outcome: LegacyOutcome) -> str | None:
    """What is wrong with the outcome an importer left, or None: counts must be ints >= 0,
    ``details`` a dict of them, ``files``/``notes`` lists of strings, ``bad_lines`` a list."""

    def count(value: object) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0

    for attr in ("imported", "present", "unreadable"):
        if not count(getattr(outcome, attr, None)):
            return f"{attr} = {getattr(outcome, attr, None)!r}"[:200]
    details = outcome.details
    if not isinstance(details, dict) or not all(isinstance(k, str) and count(v) for k, v in details.items()):
        return f"details = {details!r}"[:200]
    for attr in ("files", "notes"):
        value = getattr(outcome, attr, None)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return f"{attr} = {value!r}"[:200]
    for attr in ("bad_lines", "flagged"):
        value = getattr(outcome, attr, None)
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            return f"{attr} = {value!r}"[:200]
    return None


def _reset(outcome: LegacyOutcome) -> None:
    """Clear what a failed importer counted: its writes were undone."""
    fresh = LegacyOutcome(outcome.name)
    outcome.__dict__.clear()
    outcome.__dict__.update(fresh.__dict__)


def _record_files(conn: sqlite3.Connection, name: str, outcome: LegacyOutcome) -> None:
    counts = json.dumps({"imported": outcome.imported, "alreadyPresent": outcome.present, "unreadable": outcome.unreadable})
    for path in outcome.files:
        if outcome.nothing_read(path):  # health must not call it imported
            continue
        try:
            st = os.stat(path)
        except OSError:
            continue
        conn.execute("INSERT OR IGNORE INTO legacy_imports (importer, path, size, mtime_ns, imported_at, counts)"
                     " VALUES (?, ?, ?, ?, ?, ?)", (name, path, st.st_size, st.st_mtime_ns, now_ms(), counts))
