"""Receipt storage: insert, filtered listing (newest first), export, and the JSONL copy.

Receipts live in the ``receipts`` table of the state database, one row per receipt with the
filterable fields in indexed columns and the whole receipt as JSON. Listing is newest first
(by ``createdAt``: a receipt repaired later keeps its place in time) and stops at the limit, so a filter on an indexed column stays fast on
hundreds of thousands of receipts; the text query scans the case-folded ``search_text``.

When ``AGENT_LINK_RECEIPT_LOG`` is set, each new receipt is also appended to that file as one
JSON line, with a single ``O_APPEND`` write (0600, folder 0700), for tools that tail a log.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator

from agent_link_core.lazy import Struct
from agent_link_core.store import Store, ensure_private_dir
from agent_link_core.mailbox import Visibility

from agent_link_receipts.build import search_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

FILTER_COLUMNS = {
    "target": "target_address",
    "targetThreadId": "target_id",
    "targetSessionId": "target_id",
    "originThreadId": "origin_thread_id",
    "action": "action",
    "kind": "kind",
    "targetKind": "target_kind",
    "host": "host",
    "messageId": "message_id",
}


def insert_receipts(store: Store, items: Iterable[tuple[dict[str, Any], str | None]]) -> list[dict[str, Any]]:
    """Store receipts in one transaction.

    :param items: ``(receipt, event key or None)``; a receipt whose key is already stored is
        skipped (another process reported the same event).
    :returns: the receipts actually stored.
    """
    stored: list[dict[str, Any]] = []
    with store.write() as conn:
        for receipt, key in items:
            target = receipt.get("target") or {}
            origin = receipt.get("origin") or {}
            cur = conn.execute(
                "INSERT OR IGNORE INTO receipts (id, event_key, action, kind, host, message_id, target_address,"
                " target_id, target_kind, origin_thread_id, search_text, data, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    receipt["id"], key, receipt["action"], receipt.get("kind"), receipt.get("host"),
                    receipt.get("messageId"), target.get("address"), target.get("id"), target.get("harness") or target.get("kind"),
                    origin.get("threadId"), search_text(receipt), json.dumps(receipt, ensure_ascii=False), receipt.get("createdAt") or "",
                ),
            )
            if cur.rowcount == 1:
                stored.append(receipt)
    return stored


class Page(Struct, frozen=True):
    """One listing: ``receipts`` newest first, and how many receipts exist in all."""

    receipts: list[dict[str, Any]]
    total: int


def visible_clause(visibility: Visibility) -> tuple[str, list[Any]]:
    """An SQL condition over ``receipts`` keeping what ``visibility`` lets the caller read.

    A receipt about a stored message follows the message (the core's rule: its sender or
    recipient); one about no stored message (a launch, an archive) belongs to its actor and
    its target.
    """
    if visibility.everything:
        return "1 = 1", []
    seen, params = visibility.sql("m")
    return (
        f"(message_id IN (SELECT m.id FROM messages m WHERE {seen}) OR (message_id IS NULL OR message_id NOT IN (SELECT k.id FROM messages k))"
        " AND (target_address = ? OR json_extract(data, '$.actor') = ?))",
        [*params, visibility.address or "", visibility.address or ""],
    )


def list_receipts(store: Store, filters: dict[str, Any], limit: int, visibility: Visibility | None = None) -> Page:
    """Receipts matching every given filter, newest first, at most ``limit``.

    :param filters: keys of :data:`FILTER_COLUMNS` (exact match) and ``query`` (a
        case-insensitive substring of the searched fields); absent or None means no filter.
    :param visibility: the caller's :class:`~agent_link_core.mailbox.Visibility`: only
        receipts it may read are listed and counted; None (internal use) lists all.
    """
    clauses: list[str] = []
    params: list[Any] = []
    if visibility is not None:
        rule, rule_params = visible_clause(visibility)
        clauses.append(rule)
        params.extend(rule_params)
    seen_where = " WHERE " + clauses[0] if clauses else ""
    seen_params = list(params)
    for name, column in FILTER_COLUMNS.items():
        value = filters.get(name)
        if value is None:
            continue
        if name == "targetKind":
            # the harness name (column) or the session kind a receipt shows (codex_thread, ...)
            clauses.append("(target_kind = ? OR json_extract(data, '$.target.kind') = ?)")
            params.extend([value, value])
            continue
        clauses.append(f"{column} = ?")
        params.append(value)
    if filters.get("query"):
        clauses.append("instr(search_text, ?) > 0")
        params.append(str(filters["query"]).casefold())
    where = " WHERE " + " AND ".join(clauses) if clauses else ""
    rows = store.conn.execute(f"SELECT data FROM receipts{where} ORDER BY created_at DESC, seq DESC LIMIT ?", (*params, limit)).fetchall()
    total = store.conn.execute(f"SELECT COUNT(*) FROM receipts{seen_where}", seen_params).fetchone()[0]
    return Page([json.loads(r["data"]) for r in rows], int(total))


def export_receipts(store: Store, batch: int = 1000, visibility: Visibility | None = None) -> Iterator[dict[str, Any]]:
    """Every receipt the caller may read (all with ``visibility`` None), oldest first (``createdAt``), read
    in batches (for ``agent-link receipts export``)."""
    rule, rule_params = visible_clause(visibility) if visibility is not None else ("1 = 1", [])
    last: tuple[str, int] = ("", 0)
    while True:
        rows = store.conn.execute(
            f"SELECT created_at, seq, data FROM receipts WHERE (created_at, seq) > (?, ?) AND {rule} ORDER BY created_at, seq LIMIT ?",
            (*last, *rule_params, batch),
        ).fetchall()
        if not rows:
            return
        for row in rows:
            yield json.loads(row["data"])
        last = (rows[-1]["created_at"], rows[-1]["seq"])


def append_log(path: str, receipts: Iterable[dict[str, Any]]) -> None:
    """Append receipts to the JSONL copy, each as one line in one ``write`` call.

    :raises OSError: when the file cannot be written (the caller logs it; the database
        already holds the receipt).
    """
    ensure_private_dir(os.path.dirname(path))
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        for receipt in receipts:
            os.write(fd, (json.dumps(receipt, ensure_ascii=False) + "\n").encode("utf-8"))
    finally:
        os.close(fd)
