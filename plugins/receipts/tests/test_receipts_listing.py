"""Listing receipts: every filter, the text query, newest first, and speed on 100,000 receipts."""

from __future__ import annotations

import time
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_receipts.build import receipt_id
from agent_link_receipts.ledger import insert_receipts, list_receipts


def receipt(n: int, **fields: Any) -> dict[str, Any]:
    created = f"2026-01-01T00:00:{n % 60:02d}.000Z"
    base: dict[str, Any] = {
        "version": 1, "id": receipt_id(created), "createdAt": created, "action": "message_agent", "kind": None,
        "host": "claude", "purpose": f"job {n}", "tags": [], "messageId": None,
        "origin": {"threadId": f"origin-{n % 10}"}, "target": {"address": f"codex:t{n % 100}", "kind": "codex", "id": f"t{n % 100}"},
        "messagePreview": f"preview number {n}",
    }
    base.update(fields)
    return base


def seed(app: App) -> None:
    insert_receipts(app.store, [
        (receipt(1, purpose="Deploy the Éclair service", tags=["release"]), None),
        (receipt(2, action="reply_message", host="codex", target={"address": "claude:s1", "kind": "claude", "id": "s1"}), None),
        (receipt(3, action="message_status", kind="resolution", messageId="01K6Z8Q1M3P6Q8R0S2T4V6W8XA"), None),
        (receipt(4, action="fork_thread", kind="fork", origin={"threadId": "orig-x"}), None),
    ])


@pytest.mark.parametrize(
    ("filters", "purposes"),
    [
        ({}, ["job 4", "job 3", "job 2", "Deploy the Éclair service"]),
        ({"action": "reply_message"}, ["job 2"]),
        ({"kind": "fork"}, ["job 4"]),
        ({"host": "codex"}, ["job 2"]),
        ({"targetKind": "claude"}, ["job 2"]),
        ({"target": "codex:t3"}, ["job 3"]),
        ({"targetThreadId": "t1"}, ["Deploy the Éclair service"]),
        ({"targetSessionId": "s1"}, ["job 2"]),
        ({"originThreadId": "orig-x"}, ["job 4"]),
        ({"messageId": "01K6Z8Q1M3P6Q8R0S2T4V6W8XA"}, ["job 3"]),
        ({"query": "ÉCLAIR"}, ["Deploy the Éclair service"]),
        ({"query": "release"}, ["Deploy the Éclair service"]),
        ({"query": "PREVIEW NUMBER 3"}, ["job 3"]),
        ({"query": "orig-x"}, ["job 4"]),
        ({"action": "message_agent", "host": "codex"}, []),
    ],
)
def test_filters(app: App, filters: dict[str, Any], purposes: list[str]) -> None:
    seed(app)
    page = list_receipts(app.store, filters, 50)
    assert [r["purpose"] for r in page.receipts] == purposes
    assert page.total == 4


def test_limit_keeps_the_newest(app: App) -> None:
    seed(app)
    assert [r["purpose"] for r in list_receipts(app.store, {}, 2).receipts] == ["job 4", "job 3"]


@pytest.mark.anyio
async def test_the_tool_echoes_filters(make_app: Any, run_tool: Any) -> None:
    app = make_app(AGENT_LINK_INSPECT_ALL="1")
    seed(app)
    out = await run_tool(app, "list_agent_link_receipts", {"action": "fork_thread", "limit": 5, "scope": "all"})
    assert out["ok"] and out["filters"] == {"action": "fork_thread"} and out["scannedReceipts"] == 4
    mine = await run_tool(app, "list_agent_link_receipts", {"action": "fork_thread"})  # none of these are alice's
    assert mine["ok"] and mine["data"] == [] and mine["scannedReceipts"] == 0
    assert out["path"] == str(app.store.path) and out["log"] is None
    bad = await run_tool(app, "list_agent_link_receipts", {"limit": 501})
    assert bad["error"]["code"] == "invalid_arguments"


SEED_100K = """
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 99999)
INSERT INTO receipts (id, action, host, target_address, target_id, target_kind, origin_thread_id, search_text, data)
SELECT 'r-' || i, CASE WHEN i % 1000 = 0 THEN 'fork_thread' ELSE 'message_agent' END, 'claude',
       'codex:t' || (i % 100), 't' || (i % 100), 'codex', 'origin-' || (i % 10),
       'job ' || i || char(10) || 'preview number ' || i,
       json_object('id', 'r-' || i, 'purpose', 'job ' || i, 'target', json_object('address', 'codex:t' || (i % 100)))
FROM n
"""


def test_fast_on_a_hundred_thousand_receipts(app: App) -> None:
    with app.store.write() as conn:  # bulk seeding in SQL: the listing, not the inserting, is timed
        conn.execute(SEED_100K)
    for column in ("target_address", "target_id", "origin_thread_id", "message_id"):
        plan = " ".join(str(r[-1]) for r in app.store.conn.execute(
            f"EXPLAIN QUERY PLAN SELECT data FROM receipts WHERE {column} = ? ORDER BY seq DESC LIMIT 50", ("x",)))
        assert "USING INDEX" in plan and "TEMP B-TREE" not in plan, plan  # indexed, and no sort step
    started = time.perf_counter()
    newest = list_receipts(app.store, {}, 50)
    by_target = list_receipts(app.store, {"target": "codex:t42"}, 500)
    by_origin = list_receipts(app.store, {"originThreadId": "origin-7", "host": "claude"}, 50)
    rare = list_receipts(app.store, {"action": "fork_thread"}, 500)  # few matches, no index: walks seq
    filtered_s = time.perf_counter() - started
    started = time.perf_counter()
    miss = list_receipts(app.store, {"query": "no such words anywhere"}, 50)  # scans every receipt
    hit = list_receipts(app.store, {"query": "PREVIEW NUMBER 99999"}, 50)
    scan_s = time.perf_counter() - started
    assert newest.total == 100_000 and newest.receipts[0]["purpose"] == "job 99999"
    assert len(by_target.receipts) == 500 and {r["target"]["address"] for r in by_target.receipts} == {"codex:t42"}
    assert len(by_origin.receipts) == 50 and len(rare.receipts) == 100
    assert miss.receipts == [] and [r["purpose"] for r in hit.receipts] == ["job 99999"]
    # Generous bounds for a loaded machine; typically a few ms filtered and tens of ms scanning.
    assert filtered_s < 1.0, filtered_s
    assert scan_s < 2.0, scan_s


def test_receipt_id_ends_in_a_random_version_4_uuid() -> None:
    import uuid

    ids = {receipt_id("2026-01-01T00:00:00.000Z") for _ in range(200)}
    assert len(ids) == 200
    for made in ids:
        assert made.startswith("agent-link-receipt-2026-01-01T00-00-00-000Z-")
        tail = uuid.UUID(made[-36:])
        assert (tail.version, tail.variant, str(tail)) == (4, uuid.RFC_4122, made[-36:])


def test_listed_and_exported_in_time_order_not_insertion_order(app: App) -> None:
    """A receipt repaired later (written by a read after a process without plugins recorded the event) is inserted after
    newer ones: ``agent-link receipts`` listed 20:29:25 above 20:32:36. Listing is newest first by time, export oldest first."""
    from agent_link_receipts.ledger import export_receipts

    later, earlier = "2026-01-01T20:32:36.000Z", "2026-01-01T20:29:25.000Z"
    insert_receipts(app.store, [(receipt(1, createdAt=later, id=receipt_id(later), purpose="later"), None)])
    insert_receipts(app.store, [(receipt(2, createdAt=earlier, id=receipt_id(earlier), purpose="repaired"), None)])
    assert [r["purpose"] for r in list_receipts(app.store, {}, 10).receipts] == ["later", "repaired"]
    assert [r["purpose"] for r in list_receipts(app.store, {"host": "claude"}, 1).receipts] == ["later"]
    assert [r["purpose"] for r in export_receipts(app.store, batch=1)] == ["repaired", "later"]
