"""The receipts plugin imports the original's receipt logs under their own ids (docs/legacy.md)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent_link_core.app import App
from agent_link_legacy.engine import import_legacy
from agent_link_testing.legacy_files import receipt, write_lines
from agent_link_testing.plugin_suites import app_factory


@pytest.fixture
def make_app(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., App]]:
    with app_factory(monkeypatch) as make:
        yield make


def test_receipts_of_both_logs_are_imported_once(isolated_env: Path, make_app: Callable[..., App]) -> None:
    older = write_lines(isolated_env.parent / ".codex" / "agent-link-receipts.jsonl", [
        receipt("agent-link-receipt-a", "message", target={"threadId": "t-1", "kind": "codex_thread"}),
    ])
    current = write_lines(isolated_env / "receipts.jsonl", [
        receipt("agent-link-receipt-a", "message"),  # also in the older log: the first copy wins
        receipt("agent-link-receipt-b", "launch", target={"address": "team:bob", "kind": "team"}, message_id="01HF0000000000000000000001"),
        '{"version": 1, "action": "message"}',
        "garbage",
    ])
    app = make_app()
    report = import_legacy(app)
    item = next(i for i in report["importers"] if i["name"] == "receipts")
    assert (item["imported"], item["alreadyPresent"], item["unreadable"]) == (2, 1, 2)
    assert item["files"] == [str(older), str(current)]
    assert [(b["line"], b["error"]) for b in item["badLines"]] == [(3, "a receipt without a usable id"), (4, item["badLines"][1]["error"])]
    rows = {r["id"]: r for r in app.store.conn.execute("SELECT * FROM receipts")}
    assert rows["agent-link-receipt-a"]["target_address"] == "codex:t-1"
    assert rows["agent-link-receipt-b"]["message_id"] == "01HF0000000000000000000001"
    assert rows["agent-link-receipt-b"]["target_kind"] == "team"
    before = sorted(tuple(r) for r in app.store.conn.execute("SELECT * FROM receipts"))
    again = next(i for i in import_legacy(app)["importers"] if i["name"] == "receipts")
    assert (again["imported"], again["alreadyPresent"]) == (0, 3)
    assert sorted(tuple(r) for r in app.store.conn.execute("SELECT * FROM receipts")) == before


def test_the_log_the_original_was_pointed_at_is_read_too(isolated_env: Path, tmp_path: Path, make_app: Callable[..., App]) -> None:
    log = write_lines(tmp_path / "elsewhere" / "receipts.jsonl", [receipt("agent-link-receipt-c", "archive")])
    app = make_app(AGENT_LINK_RECEIPT_LOG=str(log))
    item = next(i for i in import_legacy(app)["importers"] if i["name"] == "receipts")
    assert item["files"] == [str(log)] and item["imported"] == 1


@pytest.mark.anyio
async def test_the_log_this_plugin_appends_to_is_never_pending_in_health(tmp_path: Path, make_app: Callable[..., App]) -> None:
    """AGENT_LINK_RECEIPT_LOG is where this plugin appends its own receipts: a send changes it,
    so health must not count it as an original waiting (before an import or after one)."""
    from agent_link_core.model import Caller

    log = tmp_path / "logs" / "receipts.jsonl"
    app = make_app(AGENT_LINK_RECEIPT_LOG=str(log))
    await app.send(caller=Caller("test:alice", "config", "test"), to="test:bob", body="one")
    legacy = app.health()["sections"]["legacyState"]
    assert [(f["path"], f.get("writtenByAgentLink")) for f in legacy["files"]] == [(str(log), True)] and legacy["pending"] == 0
    item = next(i for i in import_legacy(app)["importers"] if i["name"] == "receipts")
    assert (item["imported"], item["alreadyPresent"]) == (0, 1)  # its own receipt is stored already
    await app.send(caller=Caller("test:alice", "config", "test"), to="test:bob", body="two")
    assert app.health()["sections"]["legacyState"]["pending"] == 0
