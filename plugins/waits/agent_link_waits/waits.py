"""Waiting for an answer (``wait_for_agent``, ``waitForReply``, ``agent-link wait``), and one path per message. One
:class:`Waits` per :class:`~agent_link_core.app.App` (:func:`waits_of`).

A wait returns the message it waited for in its own result; a push of the same message to the recipient's host (by another
process) would give it to the agent twice. So every running wait is noted in ``active_waits`` (who waits, for what, in which
process), and a push or an inbox read in any process asks ``agent_link_held_messages`` (:meth:`Waits.held` answers); a held
message is left to the wait, which pushes it when it ends without taking it (:meth:`Waits.wait`). Rows of dead processes are ignored, and removed by the next wait of the same address.
A ``waitForReply`` send notes its wait before the question is stored (``agent_link_before_send``: :meth:`Waits.hold`), so
a reply quicker than the wait's start is held too.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable

from agent_link_core.errors import AgentLinkError
from agent_link_core.lazy import LazyLogger
from agent_link_core.mailbox import Visibility
from agent_link_core.model import Caller, address_scheme
from agent_link_core.config import Setting
from agent_link_core.store import Migration, now_ms
from agent_link_waits.wakeup import Wakeup

TYPE_CHECKING = False
if TYPE_CHECKING:
    import weakref
    from typing import Any
    from agent_link_core.app import App
    from agent_link_core.store import Store
    from agent_link_core.tools.registry import Progress

log = LazyLogger(__name__)

#: how often a wait whose client sent a progress token reports progress (keeps the call alive)
PROGRESS_EVERY_MS = 10_000

#: MCP clients cut tool calls at 60 s or more (hosts have used 60, 120, 300 s): one wait never holds a call longer, and says so
MAX_WAIT_PER_CALL_MS = 50_000
#: no wait runs longer than this (600 s asked for, plus its last poll and the push after it)
MAX_WAIT_MS = 660_000
#: how long the note of a ``waitForReply`` send holds its answer before its wait takes it over (:meth:`Waits.hold`): the
#: wait starts within the bound of one tool call (:data:`MAX_WAIT_PER_CALL_MS`), or never
HOLD_MS = 60_000
#: how long a wait's note still holds the reply it returned while the answer is written and the reply marked (then ended)
TAKEN_HOLD_MS = 30_000
#: how much undelivered mail :meth:`Waits.held` looks at
HELD_SCAN = 500

SETTINGS = (
    Setting("AGENT_LINK_WAIT_CAP_MS", "int", 50000, minimum=1000, maximum=600000,
            doc="longest a wait runs in one tool call when the client sent no progress token (its tool-call timeout)"),
    Setting("AGENT_LINK_WAIT_PROGRESS_MS", "int", 10000, minimum=1000, maximum=60000,
            doc="interval of the progress notifications a wait sends when the client sent a progress token"),
)

#: ``IF NOT EXISTS``: a database from before the plugin has the table, made by the core's migration ``core.waits`` 1
MIGRATIONS = (
    Migration("waits", 1, """
        CREATE TABLE IF NOT EXISTS active_waits (
            id INTEGER PRIMARY KEY,
            address TEXT NOT NULL,      -- who waits (the recipient of what it waits for)
            key TEXT NOT NULL,          -- reply:<message id> | from:<address>
            pid INTEGER NOT NULL,
            started_at INTEGER NOT NULL
        );
        CREATE INDEX IF NOT EXISTS active_waits_address ON active_waits (address, key);
        """),
)


#: each App's Waits, made by the first wait (weakref imported then: a read in a process that never waits skips it)
_WAITS: weakref.WeakKeyDictionary[Any, Waits] | None = None


def waits_of(app: App) -> Waits:
    """The :class:`Waits` of ``app``, made on first use: ``waits_of(app).wait(...)`` is how a plugin waits for an answer."""
    global _WAITS
    if _WAITS is None:
        import weakref

        _WAITS = weakref.WeakKeyDictionary()
    waits = _WAITS.get(app)
    if waits is None:
        waits = _WAITS[app] = Waits(app)
    return waits


def held(app: App, address: str, rows: list[Any] | None = None) -> set[str]:
    """Of ``rows`` (None: ``address``'s undelivered mail, at most :data:`HELD_SCAN`), the ids a running wait, in this
    process or another (:func:`live_keys`), is about to return: the answer to the message it waits on, or any message
    from the agent it waits for, or the reply it returned and has yet to mark (``id:``). Reads no message when nobody waits (this plugin's ``agent_link_held_messages``)."""
    here = _WAITS.get(app) if _WAITS is not None else None
    keys = set(here.waiting if here is not None else ()) | live_keys(app.store, address)
    if not keys:
        return set()
    rows = app.mailbox.open_for(address, HELD_SCAN, undelivered_only=True) if rows is None else rows
    return {row["id"] for row in rows
            if f"from:{row['from_addr']}" in keys or f"reply:{row['reply_to']}" in keys or f"id:{row['id']}" in keys}


class Waits:
    """The waits running in one ``app`` (whose mailbox, directory and outbox they use), and what they hold."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.mailbox, self.store, self.config = app.mailbox, app.store, app.config
        # "reply:<message id>" / "from:<address>" -> waits running in this process: a push leaves their message to them
        self.waiting: dict[str, int] = {}
        # message id -> (the active_waits row noted before it was stored, when): the waitForReply sends awaiting their wait
        self.holds: dict[str, tuple[int, float]] = {}

    def hold(self, address: str, message_id: str) -> None:
        """Note, before ``message_id`` is stored, that ``address`` will wait for its answer (``waitForReply``), so a
        reply quicker than the wait's start is held for it; :meth:`wait` on that message takes the note over. The note of
        a send whose wait never starts (refused, its push outlasting the call, no session to wait on) lapses after
        :data:`HOLD_MS`: what it held then stays queued for the next read, push or reminder."""
        now = time.monotonic()
        for stale in [m for m, (_, at) in self.holds.items() if now - at > HOLD_MS / 1000 or m == message_id]:  # a resend: one note
            end(self.store, self.holds.pop(stale)[0])
        noted = begin(self.store, address, f"reply:{message_id}", lapse_ms=HOLD_MS)
        if noted is not None:
            self.holds[message_id] = (noted, now)

    async def wait(
        self, *, caller: Caller, agent: str, reply_to: str | None = None, timeout_ms: int = 60_000, poll_ms: int = 1000,
        progress: Progress | None = None, activity: Callable[[], Awaitable[dict[str, Any] | None]] | None = None,
        mark: bool = True,
    ) -> dict[str, Any]:
        """Wait for the resolution of ``reply_to`` (or, without it, for the oldest unread message from ``agent`` to the caller, else
        the next one to arrive). A timeout is a normal outcome.

        :param timeout_ms: ms; ``poll_ms``: the fallback re-check interval when no commit wakes it.
        :param mark: mark the returned reply delivered (via ``wait``) unless the client that asked is gone (:func:`client_gone`);
            False for a caller that does it once the reply reached its reader (:meth:`mark_taken`).
        :param progress: the tool call's progress reporter: progress every :data:`PROGRESS_EVERY_MS`, up to ``timeout_ms``. Without
            one a call waits at most ``AGENT_LINK_WAIT_CAP_MS`` (:meth:`wait_limits`; clients cut tool calls after about a minute), and says ``capped``.
        :param activity: without ``reply_to``, a check each poll that may end the wait with the target's own outcome
            (``turn_completed``, ``idle``: a harness's ``activity_check``).
        :returns: ``outcome`` reply | declined | done | unresolved | expired | turn_completed | idle | timeout, the reply (enveloped)
            when there is one, ``capped`` and ``requestedTimeoutMs`` when the cap applied.
        """
        from agent_link_core.tools.registry import AFTER_WRITE, client_gone
        start = time.monotonic()
        cap_ms, every_ms = self.wait_limits()
        capped = progress is None and timeout_ms > cap_ms
        budget = cap_ms if capped else timeout_ms
        next_progress = every_ms
        fyi = False  # waiting on an fyi message: no answer is expected
        if reply_to:
            row = self.mailbox.require(reply_to)
            reply_to, fyi = row["id"], row["anticipation"] == "fyi"
            # An unidentified caller is "external": it may wait only on mail sent as external.
            Visibility(caller.address).require(row, f"the answer to {reply_to}")
            target = row["recipient"]
        else:
            self.app.require_caller(caller)  # only mail addressed to the caller could end this wait
            target, _, _ = await self.app.directory.target_address(agent, caller)
        since = now_ms()
        key = f"reply:{reply_to}" if reply_to else f"from:{target}"
        self.waiting[key] = self.waiting.get(key, 0) + 1
        noted = self.holds.pop(reply_to)[0] if reply_to is not None and reply_to in self.holds else None  # noted before it was stored
        if noted is not None:
            renew(self.store, noted)  # this wait takes the note over, and ends it
        elif caller.known:
            noted = begin(self.store, caller.address, key)
        taken: str | None = None
        push_left = caller.known
        # Armed before the first check: a later commit wakes the wait at once (an earlier one, the check sees); poll_ms is the fallback.
        wakeup = Wakeup(self.store.path)
        try:
            while True:
                result = self._wait_check(caller, target, reply_to, since, mark)
                if result is None and activity is not None and not reply_to:
                    result = await activity()
                waited = int((time.monotonic() - start) * 1000)
                if result is not None or waited >= budget:
                    out = self._answer(result, waited, target, reply_to, fyi, (timeout_ms, cap_ms) if capped else None)
                    taken = (out.get("reply") or {}).get("id")
                    if taken is not None and mark and client_gone():
                        push_left = False  # nobody reads this answer: all it held stays queued, as on a cancel
                    return out
                if progress is not None and waited >= next_progress:
                    await progress(waited, budget, "waiting")
                    next_progress = waited + every_ms
                sleep_ms = min(poll_ms, budget - waited)
                if progress is not None:
                    sleep_ms = min(sleep_ms, max(next_progress - waited, 1))
                await wakeup.wait(sleep_ms / 1000)
        except BaseException as exc:
            if not isinstance(exc, Exception):  # cancelled, a Ctrl-C, closed: what it held stays queued for the next read, push or reminder
                push_left = False
            raise
        finally:
            wakeup.close()
            self.waiting[key] -= 1
            if not self.waiting[key]:
                del self.waiting[key]
            later = AFTER_WRITE.get()
            if noted is not None and taken is not None and not client_gone() and (later is not None or not mark):
                # The reply is marked once the answer is written (by the transport, or by a caller that marks it): until then
                # the note holds it alone, or a push in between would deliver it again. It lapses if no mark comes.
                renew(self.store, noted, lapse_ms=TAKEN_HOLD_MS, key=f"id:{taken}")
                if later is not None:
                    later.append(functools.partial(end, self.store, noted))
            else:
                end(self.store, noted)
            if push_left:
                await self._push_left_by_wait(caller.address, taken)

    def _answer(self, result: dict[str, Any] | None, waited: int, target: str, reply_to: str | None, fyi: bool,
                capped: tuple[int, int] | None) -> dict[str, Any]:
        """A wait's answer: ``result`` (None: a timeout) after ``waited`` ms on ``target``; ``capped``: ``(timeout asked, cap)``
        in ms when the cap cut the wait; ``fyi``: ``reply_to`` asks for no answer (said when none came)."""
        out = result or {"outcome": "timeout"}
        out.update({"waitedMs": waited, "timedOut": result is None, "target": {"address": target}, "harness": address_scheme(target)})
        if capped:
            out.update(capped=True, requestedTimeoutMs=capped[0])
        if reply_to:
            out["messageStatus"] = self.mailbox.state(self.mailbox.stored(reply_to)).status
        if capped:
            out["warnings"] = [wait_capped_warning(*capped)]
        if result is None and reply_to and fyi:
            out["warnings"] = [*out.get("warnings", ()), no_answer_expected(reply_to)]
        return out

    async def _push_left_by_wait(self, address: str, taken: str | None) -> None:
        """Push what pushes left to a wait of ``address`` and it did not take (``taken``), unless another wait holds it."""
        from agent_link_core.sending import HELD_EVENT  # pushing anyway: no read path imports the outbox for it

        try:
            left = [row for row in self.mailbox.open_for(address, 50, undelivered_only=True)
                    if row["id"] != taken and self.mailbox.has_event(row["id"], HELD_EVENT)]
            held_now = held(self.app, address, left) if left else set()
            for row in left:
                if row["id"] not in held_now:
                    await self.app.outbox.push(row, {})
        except AgentLinkError as exc:  # the wait's own answer stands; the mail stays queued for the next read or push
            log.warning("agent-link: could not push the mail a wait of %s left: %s", address, exc.message)

    def wait_limits(self) -> tuple[int, int]:
        """``(cap, progress interval)`` in ms: ``AGENT_LINK_WAIT_CAP_MS`` (default
        :data:`MAX_WAIT_PER_CALL_MS`) and ``AGENT_LINK_WAIT_PROGRESS_MS`` (default :data:`PROGRESS_EVERY_MS`),
        this plugin's settings."""
        values = self.config.values  # the defaults when this plugin is turned off (a host plugin's wait still runs)
        return (int(values.get("AGENT_LINK_WAIT_CAP_MS") or MAX_WAIT_PER_CALL_MS),
                int(values.get("AGENT_LINK_WAIT_PROGRESS_MS") or PROGRESS_EVERY_MS))

    def _wait_check(self, caller: Caller, target: str, reply_to: str | None, since: int, mark: bool = True) -> dict[str, Any] | None:
        if reply_to:
            row = self.mailbox.stored(reply_to)
            state = self.mailbox.state(row)
            if state.resolution is not None:
                outcome = {"reply": "reply", "decline": "declined", "done": "done"}[state.resolution["kind"]]
                out: dict[str, Any] = {"outcome": outcome, "resolution": state.resolution}
                reply_id = state.resolution.get("replyMessageId")
                if reply_id:
                    out["reply"] = self._take_reply(caller, reply_id, mark)
                return out
            if state.status in ("unresolved", "expired"):
                self.mailbox.note_transition(row, state)
                return {"outcome": state.status}
            return None
        if not caller.known:
            return None
        # Unread mail from the target first (it may have come while this server was down or between two waits), then new mail, oldest first.
        row = self.store.conn.execute(
            "SELECT id, sent_at FROM messages WHERE from_addr = ? AND recipient = ? AND (delivered_at IS NULL OR sent_at >= ?)"
            " ORDER BY sent_at, id LIMIT 1",
            (target, caller.address, since),
        ).fetchone()
        if row is None:
            return None
        return {"outcome": "reply", "reply": self._take_reply(caller, row["id"], mark), "arrivedBeforeWait": row["sent_at"] < since}

    def _take_reply(self, caller: Caller, reply_id: str, mark: bool = True) -> dict[str, Any]:
        """A reply a wait returns, marked delivered unless ``mark`` is False (then :meth:`mark_taken` does it) or the client that
        asked is gone (:func:`~agent_link_core.tools.registry.client_gone`: it stays undelivered)."""
        from agent_link_core.tools.registry import AFTER_WRITE, client_gone
        row = self.mailbox.stored(reply_id)
        shown = row["delivered_via"] if row["first_delivered_at"] is not None and row["delivered_via"] not in (None, "wait") else None
        if shown is None and self.mailbox.push_outcome(reply_id) == "accepted":
            shown = "accepted push"  # the host took a push and shows it in its own time: it is on its way
        later, as_marked = AFTER_WRITE.get(), False
        if shown is None and mark and not client_gone() and later is not None:  # the transport writes the answer: marked once written
            later.append(functools.partial(self.mark_taken, caller, reply_id))
            as_marked = caller.known and row["recipient"] == caller.address and row["delivered_at"] is None
        elif shown is None and mark and not client_gone() and self.mark_taken(caller, reply_id):
            row = self.mailbox.stored(reply_id)
        view = self.mailbox.to_view(row)
        if as_marked:
            from agent_link_core.reading import as_read

            view = as_read(self.app, {"messages": [view]}, [reply_id])["messages"][0]
        if shown is not None and caller.known and row["recipient"] == caller.address:
            # it already reached the caller another way (a push, an inbox read): said, not repeated
            view["alreadyDelivered"] = {"via": shown, "note": f"This message already reached you ({shown}); it is not repeated here."}
        else:
            view["envelope"] = self.mailbox.envelope(row)
        return view

    def mark_taken(self, caller: Caller, reply_id: str) -> bool:
        """Mark a reply a wait returned delivered (via ``wait``) when ``caller`` is its recipient; True when it became delivered now.
        A failed write raises ``state_busy`` / ``state_io_error``."""
        row = self.mailbox.stored(reply_id)
        return caller.known and row["recipient"] == caller.address and self.mailbox.mark_delivered(reply_id, "wait")


def no_answer_expected(message_id: str) -> dict[str, Any]:
    """The ``no_answer_expected`` warning of a wait that timed out on an fyi message (its recipient is not asked to answer)."""
    return {"code": "no_answer_expected", "details": {"messageId": message_id, "anticipation": "fyi"},
            "message": f"{message_id} was sent as fyi: its recipient is not asked to answer, so a wait on it usually times out."}


def wait_capped_warning(requested_ms: int, cap_ms: int) -> dict[str, Any]:
    """The ``wait_capped`` warning of a wait cut to ``cap_ms`` (ms)."""
    return {"code": "wait_capped", "details": {"requestedTimeoutMs": requested_ms, "waitedAtMostMs": cap_ms},
            "message": f"Without a progress token one call waits at most {cap_ms} ms; call again to keep waiting "
                       "(or send a progress token to wait up to timeoutMs)."}


def begin(store: Store, address: str, key: str, lapse_ms: int = MAX_WAIT_MS) -> int | None:
    """Note a wait of ``address`` for ``key`` (``reply:<id>`` or ``from:<address>``) in this process, which every process
    counts as running for ``lapse_ms`` (ms; the row is dated that much before :data:`MAX_WAIT_MS` ends, until :func:`renew`);
    rows of the same address left by dead processes go. Returns the row id for :func:`end`, or None when the database refused
    the write (the wait runs anyway; pushes elsewhere will not know of it). It waits out another process's write (a reply
    being stored): a note refused then let that reply be pushed as well as returned by the wait."""
    try:
        with store.write() as conn:
            for row in conn.execute("SELECT id, pid, started_at FROM active_waits WHERE address = ?", (address,)).fetchall():
                if not _live(row):
                    conn.execute("DELETE FROM active_waits WHERE id = ?", (row["id"],))
            cursor = conn.execute("INSERT INTO active_waits (address, key, pid, started_at) VALUES (?, ?, ?, ?)",
                                  (address, key, os.getpid(), now_ms() - (MAX_WAIT_MS - lapse_ms)))
            return int(cursor.lastrowid or 0) or None
    except (AgentLinkError, sqlite3.Error):  # busy, or no table: this plugin turned off under a host plugin's wait
        return None


def renew(store: Store, wait_id: int, lapse_ms: int = MAX_WAIT_MS, key: str | None = None) -> None:
    """Date the wait :func:`begin` noted so that every process counts it as running for ``lapse_ms`` (ms) from now, holding
    ``key`` instead when given (``id:<message id>``: that message only); a failed write leaves it as it was."""
    with contextlib.suppress(AgentLinkError, sqlite3.Error), store.write() as conn:
        conn.execute("UPDATE active_waits SET started_at = ?, key = COALESCE(?, key) WHERE id = ?",
                     (now_ms() - (MAX_WAIT_MS - lapse_ms), key, wait_id))


def end(store: Store, wait_id: int | None) -> None:
    """Forget the wait :func:`begin` noted (a failed write leaves a row that dies with its process)."""
    if wait_id is not None:
        with contextlib.suppress(AgentLinkError, sqlite3.Error), store.write() as conn:
            conn.execute("DELETE FROM active_waits WHERE id = ?", (wait_id,))


def live_keys(store: Store, address: str) -> set[str]:
    """The keys (``reply:<message id>``, ``from:<address>``) of the waits of ``address`` running in any process (none when
    the table cannot be read)."""
    try:
        found = store.conn.execute("SELECT key, pid, started_at FROM active_waits WHERE address = ?", (address,)).fetchall()
    except sqlite3.Error:
        return set()
    return {w["key"] for w in found if _live(w)}


def _live(wait: Any) -> bool:
    """Whether a noted wait still runs: younger than :data:`MAX_WAIT_MS`, in a process that exists and is no zombie (one
    that may not be inspected counts as alive)."""
    import psutil

    try:
        return now_ms() - int(wait["started_at"]) <= MAX_WAIT_MS and psutil.Process(int(wait["pid"])).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True
