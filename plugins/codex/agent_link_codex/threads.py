"""Codex threads as agent-link sessions: what a thread object (an app-server's answer or a
rollout summary) and an MCP call's ``_meta`` say, read the same way by the harness, its tools
and the plugins that build on it (forks)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agent_link_hostkit.callmeta import meta_text
from agent_link_hostkit.titles import RAW_TITLE_CHARS, envelope_title, retitled
from agent_link_core.envelope import iso_ms
from agent_link_core.harness import Delivery
from agent_link_core.model import Session

if TYPE_CHECKING:  # annotations only
    from agent_link_codex.service import Link

ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,128}\Z")
META_NAMESPACES = ("openai/codex", "codex")
#: ``_meta`` keys of a sender named on the command line (``agent_link_core.identity.named_sender``).
NAMED_SENDER_KEYS = frozenset({"threadId", "endpointId"})
THREAD_KEYS = ("callerThreadId", "caller.thread.id", "threadId", "thread_id", "codexThreadId", "thread.id", "originThreadId")
TURN_KEYS = ("callerTurnId", "caller.turn.id", "turnId", "turn_id", "codexTurnId", "turn.id", "originTurnId",
             "x-codex-turn-metadata.turn_id")
CALL_KEYS = ("callerToolCallId", "caller.toolCall.id", "callId", "toolCallId", "tool_call_id", "originToolCallId")
#: Interactive thread kinds listed by default (exec runs and sub-agents only on request).
DEFAULT_KINDS = ("cli", "vscode", "appServer", "unknown")


def meta_value(meta: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    """The first usable value for ``keys`` in ``_meta`` (top level, then the Codex namespaces)."""
    return meta_text(meta, keys, META_NAMESPACES)


def source_kind(thread: Mapping[str, Any]) -> str:
    """A thread's source as one word (``vscode``, ``exec``, ``subAgent``, ...)."""
    source = thread.get("source")
    if isinstance(source, str):
        return source
    if isinstance(source, Mapping) and source:
        return str(next(iter(source)))
    return "unknown"


def surface_of(kind: str) -> tuple[str, ...]:
    """The agent-link surface of a Codex source kind."""
    return ("cli",) if kind in ("cli", "exec") else ("app",)


def status_of(thread: Mapping[str, Any]) -> str:
    """``thread.status.type`` (idle, active, notLoaded, ...), or ``unknown``."""
    status = thread.get("status")
    if isinstance(status, Mapping) and isinstance(status.get("type"), str):
        return status["type"]
    return "unknown"


def is_archived_thread(thread: Mapping[str, Any]) -> bool:
    """Archived threads live in ``archived_sessions`` (Codex 0.169.0 has no archived flag)."""
    if thread.get("archived") is True:
        return True
    path = thread.get("path")
    return isinstance(path, str) and "/archived_sessions/" in path.replace(os.sep, "/")


def session_from_thread(thread: Mapping[str, Any], link: Link | None, *, loaded: bool | None = None) -> Session:
    """A Codex thread object (app-server or rollout summary) as an agent-link Session."""
    from agent_link_codex.delivery import VIA

    tid = str(thread["id"])
    status = status_of(thread)
    archived = is_archived_thread(thread)
    # A transcript read from disk (no app-server answered) says nothing about whether anyone
    # has the thread loaded: never present it as live.
    transcript_only = link is None and (bool(thread.get("localOnly")) or (thread.get("status") or {}).get("source") == "local-jsonl")
    is_loaded = False if transcript_only else loaded if loaded is not None else status not in ("notLoaded", "unknown")
    title = thread.get("name") or thread.get("preview")
    preview = thread.get("preview")
    raw_title = title if isinstance(title, str) else None
    if isinstance(title, str) and envelope_title(title) is not None:
        # a thread agent-link started is named after its envelope: the Session shows sender and
        # first words, from the whole first message when Codex cut its name short
        title = preview.strip() if isinstance(preview, str) and envelope_title(preview) is not None and len(preview) > len(title) else title
    elif isinstance(title, str):
        title = title.strip().splitlines()[0][:120] if title.strip() else None
    activity = thread.get("recencyAt") or thread.get("updatedAt")
    kind = source_kind(thread)
    extra: dict[str, Any] = {"threadId": tid, "status": status, "source": kind}
    if link is not None:
        extra["endpoint"] = link.endpoint.id
        extra["endpointAddress"] = f"{link.endpoint.id}:{tid}"  # the ep_...:<thread> form send accepts
    if thread.get("localOnly"):
        extra["localOnly"] = True
    if raw_title is not None and envelope_title(raw_title) is not None:
        extra["rawTitle"] = raw_title[:RAW_TITLE_CHARS]
    shown, extra = retitled(title if isinstance(title, str) else None, extra)
    return Session(
        address=f"codex:{tid}", harness="codex", id=tid, title=shown,
        cwd=thread.get("cwd") if isinstance(thread.get("cwd"), str) else None, surface=surface_of(kind),
        loaded=is_loaded, archived=archived, last_activity_ms=int(activity) * 1000 if isinstance(activity, (int, float)) else None,
        receive={"push": None if archived or transcript_only else VIA, "nudge": "codex-hook", "pull": True}, extra=extra,
    )


def stored_verified(message: Mapping[str, Any]) -> bool:
    """The verdict stored with a message (``metadata.sender.verified``, set once by
    :func:`agent_link_core.identity.prove_sender`); never recomputed from its source."""
    meta = message.get("metadata")
    sender = meta.get("sender") if isinstance(meta, Mapping) else None
    return isinstance(sender, Mapping) and sender.get("verified") is True


def send_facets(message: Mapping[str, Any], delivery: Delivery) -> dict[str, Any]:
    """The separate facts of a send to a thread (reference §5.3): ``runtimeState`` (was it
    loaded, its status before, the endpoint, whether it was resumed), ``archiveState`` (a push
    to an archived thread is refused, so ``active``), ``desktopVisibility`` (agent-link cannot
    see the desktop app: ``unknown``, or ``held_elsewhere`` when another process holds the
    thread), ``peerMessage`` (the envelope's header) and ``turn`` (the turn started or steered,
    else null)."""
    fields = delivery.fields
    target = fields.get("target") or {}
    action = str(fields.get("action") or "")
    held = any(w.get("code") == "codex_desktop_push_disabled" for w in delivery.warnings)
    steered = "steered" in action
    started = action.endswith("started_turn")
    turn_id = fields.get("turnId") or (delivery.evidence or {}).get("turnId")
    sender = str(message.get("from") or message.get("sender") or "")
    return {
        "runtimeState": {"previousStatus": target.get("previousStatus"), "loaded": target.get("previousStatus") not in (None, "notLoaded"),
                         "resumed": action.startswith("resumed+"), "endpoint": target.get("endpoint"),
                         "state": delivery.state},
        "archiveState": "active",
        "desktopVisibility": {"status": "held_elsewhere" if held else "unknown",
                              "note": "A started or steered turn proves the app-server took the message, not that the thread "
                                      "is visible, selected or unarchived in the Codex desktop app."},
        "peerMessage": {"messageId": message.get("id"), "from": sender or None,
                        "fromHarness": sender.split(":", 1)[0] if ":" in sender else None,
                        "fromVerified": bool(sender) and stored_verified(message),
                        "sentAt": iso_ms(message["sent_at"]) if isinstance(message.get("sent_at"), int) else None, "enveloped": True},
        "turn": {"turnId": turn_id, "action": "steered" if steered else "started", "status": "inProgress"}
        if (steered or started) and turn_id else None,
    }


def source_kinds(include_exec: bool, include_subagents: bool) -> tuple[str, ...]:
    """The ``sourceKinds`` to list: interactive kinds, plus exec and sub-agents on request."""
    from agent_link_codex.service import SOURCE_KINDS

    kinds = list(DEFAULT_KINDS)
    if include_exec:
        kinds.append("exec")
    if include_subagents:
        kinds += [k for k in SOURCE_KINDS if k.startswith("subAgent")]
    return tuple(kinds)
