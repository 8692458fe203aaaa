"""agent-session-intercom's version-2 envelope, for scripts and threads written against it.

A message sent with ``agent-link send --envelope intercom-v2`` reaches the Codex thread as
intercom's model-visible text: the header line ``[agent-session-intercom/v2]``, a newline,
then one JSON object::

    {"protocol": "agent-session-intercom", "version": 2, "messageId": "<uuid>",
     "sentAt": "<ISO 8601>", "expiresAt": "<ISO 8601, later>", "correlationId": "...",
     "sender": {"kind": "codex-agent", "threadId": "<t>", "address": <codex-thread address>,
                "project": {"name": "<project>"}, "label": "..."},
     "replyTo": <the sender's address>, "target": <codex-thread address>,
     "content": {"type": "text", "text": "<message text>"}}

where a codex-thread address is ``{"scheme": "codex-thread", "endpointId": "ep_...",
"threadId": "..."}``. The shape is the one agent-session-intercom 1.0.0 documents in its
README (https://www.npmjs.com/package/agent-session-intercom); ``correlationId`` and
``label`` are optional. agent-link's message id (a ULID) is sent as the UUID with the same
128 bits, so a script's own UUID comes back unchanged.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import datetime
from typing import Any

from agent_link_core.errors import AgentLinkError, invalid_arguments

HEADER = "[agent-session-intercom/v2]"
FORMAT = "intercom-v2"
ENDPOINT_RE = re.compile(r"^ep_[0-9a-z]{8,40}\Z")
THREAD_RE = re.compile(r"^[A-Za-z0-9_.-]{1,128}\Z")
# Without a TTL the envelope still needs an expiry later than sentAt: one day.
DEFAULT_EXPIRY_MS = 24 * 3600 * 1000


def thread_address(endpoint_id: str, thread_id: str) -> dict[str, str]:
    """A canonical codex-thread address."""
    return {"scheme": "codex-thread", "endpointId": endpoint_id, "threadId": thread_id}


def _problems(envelope: Any) -> list[dict[str, Any]]:
    errors: list[dict[str, Any]] = []

    def bad(path: str, expected: str) -> None:
        errors.append({"path": path, "rule": "intercom_v2", "expected": expected})

    def address(value: Any, path: str) -> None:
        if not (isinstance(value, dict) and set(value) == {"scheme", "endpointId", "threadId"}
                and value["scheme"] == "codex-thread" and isinstance(value["endpointId"], str)
                and ENDPOINT_RE.match(value["endpointId"]) and isinstance(value["threadId"], str)
                and THREAD_RE.match(value["threadId"])):
            bad(path, "a codex-thread address {scheme, endpointId: ep_..., threadId}")

    def text(value: Any, path: str) -> bool:
        if not (isinstance(value, str) and value.strip()):
            bad(path, "a non-empty string")
            return False
        return True

    if not isinstance(envelope, dict):
        return [{"path": "", "rule": "intercom_v2", "expected": "a JSON object"}]
    if envelope.get("protocol") != "agent-session-intercom":
        bad("protocol", '"agent-session-intercom"')
    if envelope.get("version") != 2:
        bad("version", "2")
    try:
        uuid.UUID(str(envelope.get("messageId")))
    except ValueError:
        bad("messageId", "a UUID")
    times = []
    for key in ("sentAt", "expiresAt"):
        value = envelope.get(key)
        try:
            parsed = datetime.fromisoformat(str(value))  # Python 3.11 reads a trailing Z
            if parsed.tzinfo is None:
                raise ValueError
            times.append(parsed)
        except ValueError:
            bad(key, "an ISO 8601 time with a zone")
    if len(times) == 2 and times[1] <= times[0]:
        bad("expiresAt", "a time later than sentAt")
    if "correlationId" in envelope:
        text(envelope["correlationId"], "correlationId")
    sender = envelope.get("sender")
    if not isinstance(sender, dict):
        bad("sender", "an object")
    else:
        if sender.get("kind") != "codex-agent":
            bad("sender.kind", '"codex-agent"')
        text(sender.get("threadId"), "sender.threadId")
        address(sender.get("address"), "sender.address")
        if isinstance(sender.get("address"), dict) and sender["address"].get("threadId") != sender.get("threadId"):
            bad("sender.threadId", "the thread of sender.address")
        project = sender.get("project")
        if isinstance(project, dict):
            text(project.get("name"), "sender.project.name")
        else:
            bad("sender.project", "an object with a name")
        if "label" in sender:
            text(sender["label"], "sender.label")
        if envelope.get("replyTo") != sender.get("address"):
            bad("replyTo", "exactly sender.address")
    address(envelope.get("target"), "target")
    content = envelope.get("content")
    if isinstance(content, dict) and content.get("type") == "text":
        text(content.get("text"), "content.text")
    else:
        bad("content", '{"type": "text", "text": "..."}')
    return errors


def validate_envelope_v2(envelope: Any) -> dict[str, Any]:
    """Check an envelope against the v2 rules (UUID id, ISO times with expiry later than
    sentAt, canonical addresses, ``replyTo`` equal to ``sender.address``, non-empty text and
    metadata) and return it.

    :raises AgentLinkError: ``invalid_arguments``, one entry (rule ``intercom_v2``) per
        broken rule, ``path`` naming the field (``sender.address``, ``expiresAt`` ...).
    """
    problems = _problems(envelope)
    if problems:
        raise invalid_arguments(problems, "The intercom v2 envelope is not valid.")
    return envelope


def serialize_envelope_v2(envelope: dict[str, Any]) -> str:
    """The model-visible text of a v2 envelope: :data:`HEADER`, a newline, the JSON.

    :raises AgentLinkError: ``invalid_arguments`` as :func:`validate_envelope_v2`.
    """
    validate_envelope_v2(envelope)
    return HEADER + "\n" + json.dumps(envelope, ensure_ascii=False)


def parse_envelope_v2(text: str) -> dict[str, Any]:
    """The envelope in a v2 model-visible text (the inverse of :func:`serialize_envelope_v2`).

    :raises AgentLinkError: ``invalid_arguments`` when the header is missing, the JSON does
        not parse, or the envelope breaks a v2 rule.
    """
    head, sep, body = (text or "").partition("\n")
    if head.strip() != HEADER or not sep:
        raise invalid_arguments([{"path": "", "rule": "intercom_v2", "expected": f"{HEADER} on the first line"}],
                                "This is not an intercom v2 message.")
    try:
        envelope = json.loads(body)
    except ValueError:
        raise invalid_arguments([{"path": "", "rule": "intercom_v2", "expected": "one JSON object after the header"}],
                                "The intercom v2 message has no readable JSON.") from None
    return validate_envelope_v2(envelope)


def build_envelope_v2(message: dict[str, Any], *, sender_endpoint: str, target_endpoint: str) -> dict[str, Any]:
    """The v2 envelope of a stored message (:meth:`Mailbox.row_dict` form) from a Codex
    thread to a Codex thread, on the given endpoints.

    :raises AgentLinkError: ``invalid_arguments`` when the result breaks a v2 rule (e.g. a
        sender that is not a Codex thread).
    """
    from ulid import ULID

    from agent_link_core.mailbox import iso

    meta = message.get("metadata") or {}
    fingerprint = meta.get("fingerprint") or {}
    sender_thread = str(message["from_addr"]).split(":", 1)[-1]
    target_thread = str(message["recipient"]).split(":", 1)[-1]
    expires = meta.get("expiresAt") or message.get("reply_by") or message["sent_at"] + DEFAULT_EXPIRY_MS
    sender_address = thread_address(sender_endpoint, sender_thread)
    sender: dict[str, Any] = {"kind": "codex-agent", "threadId": sender_thread, "address": sender_address,
                              "project": {"name": fingerprint.get("senderProject") or "agent-link"}}
    if fingerprint.get("senderLabel"):
        sender["label"] = fingerprint["senderLabel"]
    envelope: dict[str, Any] = {
        "protocol": "agent-session-intercom", "version": 2,
        "messageId": str(ULID.from_str(message["id"]).to_uuid()),
        "sentAt": iso(message["sent_at"]), "expiresAt": iso(int(expires)),
    }
    if fingerprint.get("correlationId"):
        envelope["correlationId"] = fingerprint["correlationId"]
    elif message.get("reply_to"):  # an answer correlates with the message it answers, as intercom's reply does
        envelope["correlationId"] = str(ULID.from_str(message["reply_to"]).to_uuid())
    envelope.update({"sender": sender, "replyTo": dict(sender_address), "target": thread_address(target_endpoint, target_thread),
                     "content": {"type": "text", "text": message["body"]}})
    return validate_envelope_v2(envelope)


def check_sendable(sender: str, recipient: str, envelope_format: str = FORMAT, is_reply: bool = False) -> None:
    """Refuse a send in ``envelope_format`` that cannot form a valid envelope: only a Codex thread shows one (v2), rule
    ``unsupported`` (``is_reply``: the recipient is the sender of the message answered), and only from a Codex thread.

    :raises AgentLinkError: ``invalid_arguments`` (path ``envelope``).
    """
    if envelope_format != FORMAT or not recipient.startswith("codex:"):
        raise invalid_arguments([{"path": "envelope", "rule": "unsupported", "expected":
                                  f"{'a message from a sender' if is_reply else 'a target'} whose harness can show {envelope_format}"}])
    if not (sender.startswith("codex:") and recipient.startswith("codex:")):
        raise AgentLinkError(
            "invalid_arguments", "The intercom v2 envelope goes from one Codex thread to another.",
            {"errors": [{"path": "envelope", "rule": "intercom_v2", "expected": "a Codex thread sender and target"}]},
            hint="Send from inside a Codex thread (or with --from-thread) to a codex:<thread> target, or without --envelope intercom-v2.",
        )
