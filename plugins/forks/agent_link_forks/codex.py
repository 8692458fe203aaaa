"""What fork jobs ask Codex, through the codex plugin's public harness API
(:meth:`agent_link_codex.harness.CodexHarness.thread_request` and
:meth:`~agent_link_codex.harness.CodexHarness.thread_token_usage`).

App-server facts used (Codex 0.169.0): ``thread/fork {threadId, lastTurnId, threadSource,
excludeTurns, ephemeral, model?, modelProvider?, serviceTier?, cwd?}`` (no effort: it goes on
the next ``turn/start``); the fork reports ``forkedFromId`` and ``threadSource``;
``thread/compact/start {threadId}`` runs as a turn holding a ``contextCompaction`` item;
``thread/turns/list`` pages turns newest first, each ``{id, status completed | failed |
interrupted | inProgress, error, items}``; ``thread/archive`` moves the rollout to
``archived_sessions``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from agent_link_core.errors import AgentLinkError, invalid_arguments

if TYPE_CHECKING:
    from agent_link_codex.harness import CodexHarness

THREAD_SOURCE = "agent-link-fork"
TURN_TRIGGER = "agent-link-fork"
TURN_PAGE = 50
#: how many pages of turns a lookup reads at most (newest first)
TURN_PAGES_MAX = 20
#: the fork settings thread/fork takes (effort goes on turn/start)
FORK_SETTINGS = ("model", "modelProvider", "serviceTier", "cwd")


def codex_harness(app: Any) -> CodexHarness:
    """The App's codex harness (:func:`agent_link_codex.api.codex_harness`).

    :raises AgentLinkError: ``unsupported`` when the codex plugin is not loaded.
    """
    from agent_link_codex.api import codex_harness as harness

    return harness(app)


def is_archived(thread: dict[str, Any]) -> bool:
    """Whether Codex keeps the thread archived (:func:`agent_link_codex.threads.is_archived_thread`)."""
    from agent_link_codex.threads import is_archived_thread

    return is_archived_thread(thread)


class CodexThreads:
    """The thread calls of a fork job. Every method raises
    :class:`~agent_link_core.errors.AgentLinkError` (``not_found``, ``codex_unavailable``,
    ``upstream_error``) as the harness does."""

    def __init__(self, harness: CodexHarness) -> None:
        self.harness = harness

    async def read(self, thread_id: str) -> dict[str, Any]:
        """The thread object (without turns)."""
        result = await self.harness.thread_request(thread_id, "thread/read", {"threadId": thread_id, "includeTurns": False})
        return dict(result.get("thread") or {})

    async def turns(self, thread_id: str, *, limit: int = TURN_PAGE, view: str = "summary") -> list[dict[str, Any]]:
        """Up to ``limit`` turns, newest first (``view``: notLoaded, summary or full items)."""
        page = await self.harness.thread_request(thread_id, "thread/turns/list",
                                                 {"threadId": thread_id, "limit": limit, "itemsView": view})
        return [t for t in page.get("data") or [] if isinstance(t, dict)]

    async def completed_turn(self, thread_id: str, wanted: str | None) -> str:
        """The turn a fork goes through: ``wanted`` when it is a completed turn of the thread,
        else the latest completed one.

        :raises AgentLinkError: ``invalid_arguments`` (path ``lastTurnId``) for a turn that is
            not completed or not the thread's, or (path ``threadId``) a thread without any
            completed turn.
        """
        cursor: str | None = None
        for _ in range(TURN_PAGES_MAX):
            params: dict[str, Any] = {"threadId": thread_id, "limit": TURN_PAGE, "itemsView": "notLoaded"}
            if cursor:
                params["cursor"] = cursor
            page = await self.harness.thread_request(thread_id, "thread/turns/list", params)
            for turn in page.get("data") or []:
                if wanted is None and turn.get("status") == "completed":
                    return str(turn["id"])
                if wanted is not None and turn.get("id") == wanted:
                    if turn.get("status") == "completed":
                        return wanted
                    raise invalid_arguments([{"path": "lastTurnId", "rule": "completed_turn",
                                              "expected": f"a completed turn (this one is {turn.get('status')})"}])
            cursor = page.get("nextCursor")
            if not cursor:
                break
        if wanted is not None:
            raise invalid_arguments([{"path": "lastTurnId", "rule": "completed_turn", "expected": "a completed turn of the thread"}])
        raise invalid_arguments([{"path": "threadId", "rule": "completed_turn", "expected": "a thread with a completed turn to fork from"}])

    async def fork(self, thread_id: str, last_turn_id: str, settings: dict[str, Any]) -> dict[str, Any]:
        """``thread/fork`` through ``last_turn_id`` (inclusive); returns the result
        (``thread``, ``model``, ``cwd``, ``reasoningEffort``, ...)."""
        params = {"threadId": thread_id, "lastTurnId": last_turn_id, "threadSource": THREAD_SOURCE, "excludeTurns": True,
                  "ephemeral": False, **{k: settings[k] for k in FORK_SETTINGS if settings.get(k) is not None}}
        return dict(await self.harness.thread_request(thread_id, "thread/fork", params))

    async def compact(self, thread_id: str) -> None:
        """Start compacting a thread (it runs as a turn)."""
        await self.harness.thread_request(thread_id, "thread/compact/start", {"threadId": thread_id})

    async def start_task(self, thread_id: str, text: str, job_id: str, effort: str | None) -> str | None:
        """``turn/start`` of the task (the job id as ``clientUserMessageId``); its turn id."""
        params: dict[str, Any] = {"threadId": thread_id, "input": [{"type": "text", "text": text, "text_elements": []}],
                                  "clientUserMessageId": job_id, "turnTrigger": TURN_TRIGGER}
        if effort is not None:
            params["effort"] = effort
        result = await self.harness.thread_request(thread_id, "turn/start", params)
        turn_id = (result.get("turn") or {}).get("id")
        return turn_id if isinstance(turn_id, str) else None

    async def find_turn(self, thread_id: str, *, turn_id: str | None = None, client_id: str | None = None) -> dict[str, Any] | None:
        """A recent turn by id, or the one whose userMessage carries ``client_id``."""
        for turn in await self.turns(thread_id, view="summary"):
            if turn_id is not None and turn.get("id") == turn_id:
                return turn
            if client_id is not None and any(i.get("type") == "userMessage" and i.get("clientId") == client_id
                                             for i in turn.get("items") or []):
                return turn
        return None

    async def archive(self, thread_id: str) -> None:
        """``thread/archive``."""
        await self.harness.thread_request(thread_id, "thread/archive", {"threadId": thread_id})

    async def token_usage(self, thread: dict[str, Any]) -> list[dict[str, Any]]:
        """The thread's recorded token counts (read off the event loop)."""
        return await asyncio.to_thread(self.harness.thread_token_usage, thread)


def final_answer(turn: dict[str, Any]) -> str | None:
    """The last agent message of a turn, or None."""
    texts = [i.get("text") for i in turn.get("items") or [] if i.get("type") == "agentMessage" and isinstance(i.get("text"), str)]
    return texts[-1] if texts else None


def turn_usage(records: list[dict[str, Any]], turn_id: str | None) -> dict[str, int] | None:
    """A turn's token usage: the thread's running total at the turn's last count minus the
    total before the turn; None when Codex recorded nothing for it."""
    before: dict[str, int] | None = None
    end: dict[str, int] | None = None
    for record in records:
        if turn_id is not None and record.get("turnId") == turn_id:
            end = record["total"]
        elif end is None:
            before = record["total"]
    if end is None:
        return None
    return {k: v - (before or {}).get(k, 0) for k, v in end.items()}


def sum_usage(*usages: dict[str, int] | None) -> dict[str, int] | None:
    """Token usages added up field by field (None when all are None)."""
    present = [u for u in usages if u]
    if not present:
        return None
    out: dict[str, int] = {}
    for usage in present:
        for key, value in usage.items():
            out[key] = out.get(key, 0) + value
    return out


def refuse_archived(address: str) -> AgentLinkError:
    """The ``archived`` error for a thread that cannot be forked."""
    return AgentLinkError("archived", f"{address} is archived; unarchive it before forking.", {"address": address},
                          hint="Forks are made from active threads.")
