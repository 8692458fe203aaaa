"""One receipt from one event (format version 1).

A receipt is a JSON object::

    {"version": 1, "id": "agent-link-receipt-<createdAt, ':' and '.' as '-'>-<uuid4>",
     "createdAt": "<ISO 8601>", "action": "...", "kind": "..." | null, "host": "..." | null,
     "purpose": ..., "cleanupRecommendation": "unspecified" | ..., "tags": [...],
     "origin": {...see origin.py...}, "actor": "<address>",
     "target": {"address", "kind" (the harness's session kind: codex_thread, claude_session, or
                the harness name), "harness", "id", "addressedTo"?, "via"?} | null,
     "messageId", "inReplyTo", "anticipation", "messagePreview", "delivery", "evidence",
     "via", "roleProcedure", ...kind-specific fields}

Actions: a new message is ``message_thread`` (Codex target), ``message_claude_session``
(Claude target) or ``message_agent`` (any other harness); a reply is ``reply_message``; a
lifecycle event of a message is ``message_status`` with ``kind`` ``delivery``, ``handover``,
``acknowledgement``, ``resolution``, ``reminder`` or ``status``; harness events are
``launch_thread``, ``archive_thread``, ``fork_thread`` (kind ``fork``), ``reconcile_fork``
(kind ``reconcile``); any other event kind is recorded under its own name.

Lifecycle receipts of a message carry the purpose, tags, cleanup recommendation and origin
given when it was sent. The preview is the first 700 characters of the body, escaped like
envelope text: it is another agent's words, untrusted.

Harness plugins reporting their own events (launched, archived, forked, switches) put
``target`` (an address or ``{address, ...}``), the tool's ``receipt`` argument and any
``kind``/``evidence`` in ``event.data``; the rest of ``data`` is kept under ``details``.
"""

from __future__ import annotations

import os

from agent_link_core.envelope import escape_text
from agent_link_core.mailbox import iso
from agent_link_core.records import Event
from agent_link_core.model import address_scheme, is_address

from agent_link_receipts.origin import MAX_NOTE_CHARS, clip

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

RECEIPT_VERSION = 1
PREVIEW_CHARS = 700
MAX_TAGS = 20
MAX_TAG_CHARS = 60
DEFAULT_CLEANUP = "unspecified"
MESSAGE_ACTIONS = {"codex": "message_thread", "claude": "message_claude_session"}
LIFECYCLE_KINDS = {
    "delivered": "delivery", "released": "handover", "acknowledged": "acknowledgement",
    "resolved": "resolution", "reminded": "reminder", "status_changed": "status",
}
HARNESS_ACTIONS = {"launched": "launch_thread", "archived": "archive_thread", "forked": "fork_thread", "reconciled": "reconcile_fork"}
HARNESS_KINDS = {"forked": "fork", "reconciled": "reconcile"}
#: override switches granted on an existing thread, reported by harness plugins as events of these kinds
SWITCH_KINDS = {"model_switch": "model-switch", "effort_change": "effort-change", "cwd_change": "cwd-change"}
#: every ``action`` a receipt can have (the list tool's enum)
ACTIONS = ("launch_thread", "message_thread", "archive_thread", "message_claude_session", "message_agent", "reply_message",
           "message_status", "model_switch", "effort_change", "cwd_change", "fork_thread", "reconcile_fork")
#: every ``kind`` a receipt can have (the list tool's enum)
KINDS = ("fork", "reconcile", "model-switch", "effort-change", "cwd-change", *LIFECYCLE_KINDS.values())


def receipt_id(created_at: str) -> str:
    """``agent-link-receipt-<createdAt with ':' and '.' replaced by '-'>-<uuid4>``."""
    # a random (version 4) UUID as uuid.uuid4() writes it, without importing uuid (and platform) on every send
    h = os.urandom(16).hex()
    return f"agent-link-receipt-{created_at.replace(':', '-').replace('.', '-')}-{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


def clean_tags(values: object) -> list[str]:
    """Tags as given, trimmed, without duplicates, at most 20 of at most 60 characters each."""
    if not isinstance(values, (list, tuple)):
        return []
    tags = [t for t in (clip(v, MAX_TAG_CHARS) for v in values) if t]
    return list(dict.fromkeys(tags))[:MAX_TAGS]


def send_fields(arguments: dict[str, Any]) -> dict[str, Any]:
    """The receipt fields a send stores with its message, from the tool's ``receipt`` argument."""
    given = arguments.get("receipt") or {}
    return {
        "purpose": clip(given.get("purpose"), MAX_NOTE_CHARS),
        "cleanupRecommendation": clip(given.get("cleanupRecommendation"), MAX_TAG_CHARS),
        "tags": clean_tags(given.get("tags")),
    }


def _target(address: str | None, kinds: dict[str, str] | None = None, **extra: Any) -> dict[str, Any] | None:
    """``{address, kind, harness, id, ...extra}``; ``kinds`` maps a harness name to its
    session kind (``Harness.session_kind``), the harness name being the fallback."""
    if not address:
        return None
    valid = is_address(address)
    harness = address_scheme(address) if valid else None
    out: dict[str, Any] = {
        "address": address,
        "kind": (kinds or {}).get(harness or "") or harness,
        "harness": harness,
        "id": address.split(":", 1)[1] if valid else None,
    }
    out.update({k: v for k, v in extra.items() if v is not None})
    return out


def _skeleton(event: Event, host: str | None, action: str, kind: str | None) -> dict[str, Any]:
    created = iso(event.at_ms) or ""
    return {
        "version": RECEIPT_VERSION,
        "id": receipt_id(created),
        "createdAt": created,
        "action": action,
        "kind": kind,
        "host": host,
        "actor": event.actor,
    }


def message_receipt(event: Event, row: dict[str, Any], host: str | None, kinds: dict[str, str] | None = None) -> dict[str, Any] | None:
    """The receipt of an event about a stored message; None when its send said
    ``receipt.record: false``.

    :param row: the message as :meth:`~agent_link_core.mailbox.Mailbox.row_dict` gives it.
    :param kinds: harness name → session kind, for ``target.kind``.
    """
    meta = row["metadata"]
    stored = meta.get("receipt") or {}
    if stored.get("record") is False:
        return None
    if event.kind == "sent":
        action = "reply_message" if row["reply_to"] else MESSAGE_ACTIONS.get(address_scheme(row["recipient"]), "message_agent")
        kind = None
    else:
        action, kind = "message_status", LIFECYCLE_KINDS.get(event.kind, event.kind)
    receipt = _skeleton(event, host, action, kind)
    role = meta.get("role") or {}
    procedure = role.get("procedure") or None
    receipt.update({
        "purpose": stored.get("purpose"),
        "cleanupRecommendation": stored.get("cleanupRecommendation") or DEFAULT_CLEANUP,
        "tags": list(dict.fromkeys([*(stored.get("tags") or []), *(meta.get("tags") or [])])),
        "origin": stored.get("origin"),
        "tool": stored.get("tool"),
        "target": _target(row["recipient"], kinds, addressedTo=row["to"] if row["to"] != row["recipient"] else None, via=meta.get("via")),
        "messageId": row["id"],
        "from": row["from"],
        "inReplyTo": row["reply_to"],
        "anticipation": row["anticipation"],
        "messagePreview": escape_text(row["body"][:PREVIEW_CHARS]),
        "via": meta.get("via"),
        "roleProcedure": {"name": procedure["name"], "version": procedure["version"]} if procedure else None,
        "delivery": "queued" if event.kind == "sent" else ("delivered" if row["first_delivered_at"] else "queued"),
        "evidence": {},
    })
    data = event.data
    if event.kind == "delivered":
        receipt["delivery"] = "delivered"
        receipt["evidence"] = {"via": data.get("via"), **(data.get("evidence") or {})}
    elif event.kind == "released":
        receipt["handover"] = {"from": data.get("from"), "to": data.get("to")}
    elif event.kind == "resolved":
        receipt["resolution"] = {"kind": data.get("kind"), "late": data.get("late"), "by": event.actor}
        receipt["status"] = data.get("status")
    elif event.kind == "reminded":
        receipt["reminder"] = {"n": data.get("n"), "via": data.get("via")}
    elif event.kind == "status_changed":
        receipt["status"] = data.get("status")
    elif event.kind != "sent" and data:
        receipt["details"] = data
    return receipt


def harness_receipt(event: Event, host: str | None, kinds: dict[str, str] | None = None) -> dict[str, Any] | None:
    """The receipt of an event that names no stored message (launch, archive, fork, switch...);
    None when ``event.data["receipt"]["record"]`` is false.

    ``event.data["origin"]`` (as :func:`agent_link_receipts.origin.compute_origin` gives it)
    is the provenance; a harness that has none to give passes ``receipt`` (the tool argument)
    and ``caller`` (a :class:`~agent_link_core.model.Caller`) plus ``meta`` and ``env``, and the
    plugin computes it.
    """
    data = dict(event.data)
    given = data.pop("receipt", None) or {}
    if given.get("record") is False:
        return None
    target = data.pop("target", None)
    if isinstance(target, str):
        target = _target(target, kinds)
    elif isinstance(target, dict):
        target = {**(_target(target.get("address"), kinds) or {}), **target}
    kind = data.pop("kind", None) or HARNESS_KINDS.get(event.kind) or SWITCH_KINDS.get(event.kind)
    receipt = _skeleton(event, host, HARNESS_ACTIONS.get(event.kind, event.kind), kind)
    fields = send_fields({"receipt": given})
    receipt.update({
        "purpose": fields["purpose"],
        "cleanupRecommendation": fields["cleanupRecommendation"] or DEFAULT_CLEANUP,
        "tags": fields["tags"],
        "origin": data.pop("origin", None),
        "target": target,
        "messageId": event.message_id,
        "evidence": data.pop("evidence", {}),
    })
    if data:
        receipt["details"] = data
    return receipt


def search_text(receipt: dict[str, Any]) -> str:
    """The case-folded text the ``query`` filter searches: id, action, kind, purpose, tags,
    note, preview, actor, message ids, origin and target fields."""
    parts: list[str] = []
    for key in ("id", "action", "kind", "purpose", "messagePreview", "actor", "messageId", "inReplyTo", "via", "from"):
        value = receipt.get(key)
        if isinstance(value, str):
            parts.append(value)
    parts.extend(receipt.get("tags") or [])
    for block in ("origin", "target"):
        for value in (receipt.get(block) or {}).values():
            if isinstance(value, str):
                parts.append(value)
    return "\n".join(parts).casefold()


def event_key(event: Event, receipt: dict[str, Any]) -> str | None:
    """A key for events another process could report again (the status a reader noticed,
    one reminder number, one resolution, one send); None for the rest."""
    if event.message_id is None:
        return None
    if event.kind == "status_changed":
        return f"status:{event.message_id}:{receipt.get('status')}"
    if event.kind == "reminded":
        return f"reminded:{event.message_id}:{event.data.get('n')}"
    if event.kind in ("sent", "resolved"):
        return f"{event.kind}:{event.message_id}"
    return None
