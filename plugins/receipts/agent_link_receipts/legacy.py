"""Importing the original's receipt log (``agent-link import-legacy``, docs/legacy.md).

The original appended one receipt per line to ``<state dir>/receipts.jsonl`` (and, in older
versions, ``$CODEX_HOME/agent-link-receipts.jsonl``). Each line is stored as a receipt under
its own id, so a receipt is never stored twice; its fields are kept as they were, with
``imported: {"from": "legacy-receipts"}`` added and ``target.harness`` / ``target.id`` filled
from the target's address or its ``kind``.
"""

from __future__ import annotations

import json
import os
import sqlite3
from typing import Any

from agent_link_core.addresses import address_scheme, is_address
from agent_link_legacy.contract import LegacyContext, LegacyImporter, LegacyOutcome, existing

from agent_link_receipts.build import search_text
from agent_link_receipts.context import LOG_SETTING

# the original's session kinds, as the harness that owns such sessions here
KIND_HARNESS = {"codex_thread": "codex", "claude_session": "claude"}
MAX_ID_CHARS = 200


class ReceiptsImporter(LegacyImporter):
    """The receipts plugin's importer (name ``receipts``)."""

    name = "receipts"
    order = 40

    def paths(self, ctx: LegacyContext) -> list[str]:
        codex_home = ctx.app.env.get("CODEX_HOME") or os.path.join(ctx.home, ".codex")
        # the older location first: the original read it before the current one
        paths = [os.path.join(codex_home, "agent-link-receipts.jsonl"), os.path.join(ctx.source_dir, "receipts.jsonl")]
        log = ctx.app.config.get(LOG_SETTING)  # the original wrote its log there when set (this plugin appends a copy)
        return [*paths, log] if isinstance(log, str) and log else paths

    def own_paths(self, ctx: LegacyContext) -> list[str]:
        # this plugin appends every receipt it makes to the log the setting names
        log = ctx.app.config.get(LOG_SETTING)
        return [log] if isinstance(log, str) and log else []

    def run(self, ctx: LegacyContext, outcome: LegacyOutcome) -> None:
        for path in existing(self.paths(ctx)):
            try:
                for lineno, receipt in ctx.read_jsonl(path, outcome):
                    problem = _problem(receipt)
                    if problem:
                        outcome.bad(path, lineno, problem)
                        continue
                    try:
                        _store(ctx, _adapted(ctx, receipt), outcome)
                    except (sqlite3.Error, ValueError, TypeError) as exc:  # one odd receipt is left out alone
                        outcome.bad(path, lineno, f"receipt could not be stored: {exc}")
            except OSError as exc:
                outcome.bad(path, None, f"cannot be read: {exc.strerror or exc}")
                continue
            outcome.files.append(path)


def _problem(receipt: dict[str, Any]) -> str | None:
    rid, action = receipt.get("id"), receipt.get("action")
    if not isinstance(rid, str) or not rid or len(rid) > MAX_ID_CHARS:
        return "a receipt without a usable id"
    if not isinstance(action, str) or not action:
        return f"receipt {rid} has no action"
    for block in ("target", "origin"):
        if receipt.get(block) is not None and not isinstance(receipt.get(block), dict):
            return f"receipt {rid}: {block} is not an object"
    return None


def _adapted(ctx: LegacyContext, receipt: dict[str, Any]) -> dict[str, Any]:
    """The receipt with ``target.address``/``harness``/``id`` in this plugin's terms."""
    out = dict(receipt)
    target = dict(receipt.get("target") or {})
    if target:
        kind = target.get("kind")
        harness = KIND_HARNESS.get(kind) if isinstance(kind, str) else None
        address = target.get("address")
        if not is_address(address):
            bare = target.get("threadId") or target.get("sessionId")
            address = ctx.address(bare, harness) if bare else None
        if isinstance(address, str) and is_address(address):
            target["address"] = address
            target["harness"] = address_scheme(address)
            target["id"] = address.split(":", 1)[1]
        out["target"] = target
    out["imported"] = {"from": "legacy-receipts"}
    return out


def _store(ctx: LegacyContext, receipt: dict[str, Any], outcome: LegacyOutcome) -> None:
    target = receipt.get("target") or {}
    origin = receipt.get("origin") or {}
    cur = ctx.conn.execute(
        "INSERT OR IGNORE INTO receipts (id, event_key, action, kind, host, message_id, target_address, target_id,"
        " target_kind, origin_thread_id, search_text, data, created_at) VALUES (?, NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (receipt["id"], receipt["action"], _text(receipt.get("kind")), _text(receipt.get("host")), _text(receipt.get("messageId")),
         _text(target.get("address")), _text(target.get("id")), _text(target.get("harness") or target.get("kind")),
         _text(origin.get("threadId")), search_text(receipt), json.dumps(receipt, ensure_ascii=False), _text(receipt.get("createdAt")) or ""),
    )
    if cur.rowcount == 1:
        outcome.imported += 1
    else:
        outcome.present += 1


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
