"""Pushing a stored message into an opencode session, once, on evidence.

The message row already exists (the core stores it first). Then:

1. find the session on the configured servers; archived -> ``archived``, unknown -> ``not_found``;
2. look at the session's messages (``GET /session/{id}/message``): a user message whose text
   part is the envelope of this message id (``<agent-link-message id="<id>"``) means an earlier
   push landed, and nothing is pushed again;
3. take the push claim (one row per message in ``opencode_pushes``, :mod:`agent_link_opencode.schema`): a second process or call
   never pushes the same message while the first push is open or after it landed;
4. ``POST /session/{id}/prompt_async {"parts": [{"type": "text", "text": envelope}]}`` (opencode
   answers 204 and stores the user message; into a busy session it waits behind the running
   turn and reaches the model with its next request);
5. poll the session's messages until the user message holding the envelope shows, and judge
   from the messages before it (the session's own record, not a status read a moment earlier):

   * the session was idle (every earlier assistant message completed, none of the earlier
     prompts still waiting): the message starts a turn, ``delivered``;
   * it was busy (an earlier assistant message not completed, or an earlier prompt not yet
     answered): ``accepted`` (``accepted_queued_in_session``), and delivered once the model was
     handed it: an assistant message whose ``parentID`` is that user message, or the session
     idle again (:meth:`Pusher.recheck`);
   * it never shows: ``unknown`` (rechecked later, never pushed blindly again);

6. together with the push, ``GET /session/{id}``: the session as it was when the push was sent
   (``evidence.sessionArchived``). opencode stores and runs a prompt pushed into an archived
   session, and the event that says a session was archived may come after a send read the
   session from memory (:mod:`agent_link_opencode.watch`): this tells such a send
   (``OpencodeHarness._archived_after``). An archive during the push's own flight races with it,
   as one right after it would. Asked together with the push, it is answered before the push is
   confirmed: no wait added (asked after the push, it cost the benchmark 15-50 ms at load 12, and
   the event stream carries a push's own events 50-110 ms late).

Only a push that verifiably never reached the server (connection refused) is ``retryable``;
its claim is given back.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from agent_link_core.harness import Delivery
from agent_link_core.store import Store, now_ms

from agent_link_opencode.client import ServerError

VIA = "opencode-prompt"
#: how long a push waits for the session to show the pushed user message (ms)
CONFIRM_MS = 10_000
CONFIRM_POLL_S = 0.05
ACCEPTED_STATE = "accepted_queued_in_session"
ACCEPTED_NOTE = "accepted, queued in the opencode session behind its running turn"

def envelope_prefix(message_id: str) -> str:
    """The start of every envelope (and oversized notice) of ``message_id`` as pushed."""
    return f'<agent-link-message id="{message_id}"'


def find_pushed(messages: list[Any], message_id: str) -> dict[str, Any] | None:
    """The user message of a ``GET /session/{id}/message`` answer whose text part holds the
    envelope of ``message_id``, as ``{"id", "answered", "queued"}``; None when absent.

    ``answered``: an assistant message names it as ``parentID`` (the model was handed it);
    ``queued``: it arrived while the session was busy (an earlier assistant message is not
    completed, or the message just before it is another prompt still waiting).
    """
    prefix = envelope_prefix(message_id)
    for index, entry in enumerate(messages):
        info = entry.get("info") if isinstance(entry, dict) else None
        if not isinstance(info, dict) or info.get("role") != "user":
            continue
        parts = entry.get("parts") if isinstance(entry.get("parts"), list) else []
        if any(isinstance(p, dict) and p.get("type") == "text" and str(p.get("text", "")).lstrip().startswith(prefix) for p in parts):
            infos = [m["info"] for m in messages if isinstance(m, dict) and isinstance(m.get("info"), dict)]
            before = [m["info"] for m in messages[:index] if isinstance(m, dict) and isinstance(m.get("info"), dict)]
            answered = any(i.get("role") == "assistant" and i.get("parentID") == info.get("id") for i in infos)
            running = any(i.get("role") == "assistant" and "completed" not in (i.get("time") or {}) for i in before)
            queued = running or bool(before and before[-1].get("role") == "user")
            return {"id": info.get("id"), "answered": answered, "queued": queued}
    return None


class PushClaims:
    """The ``opencode_pushes`` table: one push claim per message."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def get(self, message_id: str) -> Any:
        """The claim row of ``message_id`` (``sqlite3.Row``), or None."""
        return self.store.conn.execute("SELECT * FROM opencode_pushes WHERE message_id = ?", (message_id,)).fetchone()

    def claim(self, message_id: str, session_id: str, server: str) -> bool:
        """Claim the push of ``message_id``: True for the one caller that wins (a new row, or
        a row whose earlier push verifiably failed)."""
        at = now_ms()
        with self.store.write() as conn:
            cur = conn.execute(
                "INSERT OR IGNORE INTO opencode_pushes (message_id, session_id, server, state, owner_pid, claimed_at, updated_at)"
                " VALUES (?, ?, ?, 'pushing', ?, ?, ?)",
                (message_id, session_id, server, os.getpid(), at, at),
            )
            if cur.rowcount == 1:
                return True
            cur = conn.execute(
                "UPDATE opencode_pushes SET state = 'pushing', session_id = ?, server = ?, owner_pid = ?, error = NULL,"
                " claimed_at = ?, updated_at = ? WHERE message_id = ? AND state = 'failed'",
                (session_id, server, os.getpid(), at, at, message_id),
            )
            return cur.rowcount == 1

    def settle(self, message_id: str, state: str, *, user_message_id: str | None = None, error: str | None = None) -> None:
        """Record a push outcome (``confirmed``, ``accepted``, ``failed``, ``unknown``)."""
        with self.store.write() as conn:
            conn.execute(
                "UPDATE opencode_pushes SET state = ?, user_message_id = COALESCE(?, user_message_id), error = ?, updated_at = ?"
                " WHERE message_id = ?",
                (state, user_message_id, (error or "")[:300] or None, now_ms(), message_id),
            )


def _warning(code: str, message: str, **details: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"code": code, "message": message}
    if details:
        out["details"] = details
    return out


class Pusher:
    """Pushes envelopes into sessions of one harness's servers.

    :param request: ``(base_url, method, path, body) -> answer`` (blocking; raises
        :class:`agent_link_opencode.client.ServerError`); run in a thread here.
    :param claims: the claim table.
    :param confirm_ms: how long to wait for the pushed user message to show (ms).
    """

    def __init__(self, request: Any, claims: PushClaims, confirm_ms: int = CONFIRM_MS) -> None:
        self.request = request
        self.claims = claims
        self.confirm_ms = confirm_ms

    async def _call(self, server: str, method: str, path: str, body: Any = None) -> Any:
        return await asyncio.to_thread(self.request, server, method, path, body)

    async def _messages(self, server: str, session_id: str) -> list[Any]:
        answer = await self._call(server, "GET", f"/session/{session_id}/message")
        return answer if isinstance(answer, list) else []

    async def _busy(self, server: str, session_id: str) -> bool:
        statuses = await self._call(server, "GET", "/session/status")
        status = statuses.get(session_id) if isinstance(statuses, dict) else None
        return isinstance(status, dict) and status.get("type") not in (None, "idle")

    @staticmethod
    def _delivered(found: dict[str, Any], session_id: str, server: str, how: str) -> Delivery:
        evidence = {"sessionId": session_id, "server": server, "userMessageId": found["id"], "how": how}
        return Delivery(delivered=True, via=VIA, state="delivered", evidence=evidence,
                        fields={"opencodeUserMessageId": found["id"]})

    def _accepted(self, found: dict[str, Any], session_id: str, server: str) -> Delivery:
        return Delivery(
            accepted=True, state=ACCEPTED_STATE, note=ACCEPTED_NOTE,
            evidence={"sessionId": session_id, "server": server, "userMessageId": found["id"]},
            fields={"opencodeUserMessageId": found["id"]},
            warnings=[_warning(
                "opencode_session_busy",
                "The opencode session is running a turn: the message is stored in the session and reaches the model with "
                "its next request. It is not pushed again and counts as delivered once the model was handed it.")],
        )

    async def deliver(self, message_id: str, session_id: str, server: str, envelope: str) -> Delivery:
        """Push ``envelope`` (of stored message ``message_id``) into ``session_id`` on ``server``.

        :returns: the :class:`Delivery` (module docstring for the states). The host's failures
            become warnings and outcomes, never exceptions.
        """
        if self.claims.get(message_id) is not None:  # pushed before (every push is claimed): look first
            try:
                earlier = find_pushed(await self._messages(server, session_id), message_id)
            except ServerError as exc:
                return Delivery(retryable=exc.reason == "unreachable", warnings=[_warning(
                    "opencode_unavailable", f"The opencode server could not be read ({exc.reason}); the message waits in the mailbox.",
                    reason=exc.reason)])
            if earlier is not None:  # an earlier push landed: never a second copy
                return self._judge(message_id, earlier, session_id, server)
        if not self.claims.claim(message_id, session_id, server):
            row = self.claims.get(message_id)
            return Delivery(unknown=row is not None and row["state"] in ("pushing", "unknown"), warnings=[_warning(
                "opencode_push_open", "An earlier push of this message is still open; it is not pushed again.",
                state=row["state"] if row is not None else None)])
        look = asyncio.ensure_future(self._call(server, "GET", f"/session/{session_id}"))
        look.add_done_callback(lambda done: done.cancelled() or done.exception())  # a failed look is no error
        try:
            await self._call(server, "POST", f"/session/{session_id}/prompt_async", {"parts": [{"type": "text", "text": envelope}]})
        except ServerError as exc:
            if exc.reason == "unreachable" and "timed out" not in exc.detail:
                self.claims.settle(message_id, "failed", error=exc.detail)
                return Delivery(retryable=True, warnings=[_warning(
                    "opencode_unavailable", "The opencode server did not answer; nothing was sent and the message waits in the mailbox.",
                    reason=exc.reason)])
            if exc.reason in ("http_error", "unauthorized", "bad_url"):
                self.claims.settle(message_id, "failed", error=exc.detail)
                return Delivery(warnings=[_warning(
                    "opencode_push_refused", f"The opencode server refused the push ({exc.detail}); the message waits in the mailbox.",
                    reason=exc.reason)])
            # bad_answer to a 204 or a timeout: the server may have taken it; check below
        deadline = time.monotonic() + self.confirm_ms / 1000
        while True:
            try:
                found = find_pushed(await self._messages(server, session_id), message_id)
            except ServerError:
                found = None
            if found is not None:
                judged = self._judge(message_id, found, session_id, server)
                try:
                    record = await look
                except ServerError:
                    return judged  # unknown: the harness looks again
                times = record.get("time") if isinstance(record, dict) and isinstance(record.get("time"), dict) else None
                if times is not None:
                    judged.evidence["sessionArchived"] = bool(times.get("archived"))
                return judged
            if time.monotonic() >= deadline:
                look.cancel()
                self.claims.settle(message_id, "unknown", error="the pushed message did not show in the session")
                return Delivery(unknown=True, warnings=[_warning(
                    "opencode_push_unconfirmed",
                    f"opencode did not show the pushed message in session {session_id} within {self.confirm_ms} ms; "
                    "whether it arrived is unknown, so it is not pushed again blindly.")])
            await asyncio.sleep(CONFIRM_POLL_S)

    def _judge(self, message_id: str, found: dict[str, Any], session_id: str, server: str) -> Delivery:
        """Delivered or accepted for a user message the session holds (:func:`find_pushed`)."""
        if found["answered"] or not found["queued"]:
            self.claims.settle(message_id, "confirmed", user_message_id=found["id"])
            return self._delivered(found, session_id, server, "answered" if found["answered"] else "started_turn")
        self.claims.settle(message_id, "accepted", user_message_id=found["id"])
        return self._accepted(found, session_id, server)

    async def recheck(self, message_id: str, session_id: str, server: str) -> Delivery | None:
        """Late evidence for an accepted or unknown push: delivered when the session holds the
        user message and the model was handed it (an assistant message answers it, or the
        session is idle again). Never pushes; None without new evidence."""
        try:
            found = find_pushed(await self._messages(server, session_id), message_id)
            if found is None:
                return None
            if not found["answered"] and await self._busy(server, session_id):
                return None
        except ServerError:
            return None
        self.claims.settle(message_id, "confirmed", user_message_id=found["id"])
        return self._delivered(found, session_id, server, "answered" if found["answered"] else "session_idle")
