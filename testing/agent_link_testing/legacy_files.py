"""Files in the original Agent Link's formats (docs/legacy.md), for the import-legacy tests.

Each builder returns one JSON object as the original wrote it; :func:`write_lines` writes
them one per line (a ``str`` item is written as it is, for bad lines).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

T0 = 1_700_000_000_000  # epoch ms of the fixtures' first event


def message(mid: str, frm: str, to: str, body: str, *, at: int = T0, anticipation: str = "reply",
            from_kind: str | None = None, to_kind: str | None = None, reply_to: str | None = None,
            metadata: dict[str, Any] | None = None, reply_by: int | None = None) -> dict[str, Any]:
    """A ``message`` event (``*_session_kind`` left out when None, as older lines did)."""
    msg: dict[str, Any] = {
        "id": mid, "from_session_id": frm, "to_session_id": to, "body": body,
        "metadata_json": json.dumps(metadata) if metadata is not None else None, "sent_at": at,
        "delivered_at": None, "acknowledged_at": None, "reply_to_message_id": reply_to,
        "anticipation": anticipation, "reply_by": reply_by,
    }
    if from_kind is not None:
        msg["from_session_kind"] = from_kind
    if to_kind is not None:
        msg["to_session_kind"] = to_kind
    return {"type": "message", "at": at, "message": msg}


def state(event_type: str, mid: str, at: int, **fields: Any) -> dict[str, Any]:
    """A state event: ``delivered``, ``acknowledged``, ``released``, ``resolved``, ``reminded``
    (a resolution's own ``kind`` goes in ``fields``)."""
    return {"type": event_type, "at": at, "messageId": mid, **fields}


def receipt(rid: str, action: str, *, target: dict[str, Any] | None = None, message_id: str | None = None,
            created: str = "2023-11-14T22:13:20.000Z") -> dict[str, Any]:
    """A version-1 receipt line."""
    return {"version": 1, "id": rid, "createdAt": created, "action": action, "host": "codex", "purpose": "test",
            "cleanupRecommendation": "unspecified", "tags": ["t"], "origin": {"threadId": None, "source": "not_supplied"},
            "target": target, "messagePreview": "hello", "finalResponse": None, "delivery": "queued", "evidence": {},
            "replyConfirmation": None, "appServer": None, **({"messageId": message_id} if message_id else {})}


def fork_event(kind: str, job_id: str, at: int, **fields: Any) -> dict[str, Any]:
    """A fork log event."""
    return {"type": kind, "jobId": job_id, "at": at, **fields}


def write_lines(path: Path, items: list[Any]) -> Path:
    """Write ``items`` one per line (dicts as JSON, strings as they are); returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((json.dumps(i) if not isinstance(i, str) else i) + "\n" for i in items), encoding="utf-8")
    return path
